// Facts the charts and inspectors read about the batch on screen, in one place so every panel shows the
// same numbers. Nothing is recomputed here: group statistics come from the worker (the advantages
// stage, or the Doctor's report computed when the batch was imported).
import type { GroupStats } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { DoctorReport } from '../doctor/types.ts';
import type { BatchSlice, CorrectionsState, JudgedImport, MismatchState, RunResults } from './session.ts';
import type { StudioState } from './index.ts';
import type { MismatchOf, StepSettings } from '../bridge/protocol.ts';
import { diffBatches, type BatchDiff } from '../io/batch_diff.ts';
import { AGGREGATIONS, type LossType } from '../kernels/types.ts';
import { pageSettings, samplerOf, whatIfSettings, type SettingsBase, type SettingsEdits } from '../bridge/settings.ts';
import type { BaseKind } from './settings.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import { settingOf, settingsChanges, type EffectiveSettings } from '../grpo/settings/effective.ts';
import { STAGES } from '../bridge/protocol.ts';

/**
 * An update is in progress: running to the end, a stage request not yet answered (a dropped update's may
 * still compute in the worker), or a stage running. The Stepper starts nothing then, and the Model panel
 * changes nothing that would drop it.
 */
export function updateInProgress(s: Pick<StudioState, 'running' | 'stageRequests' | 'stages'>): boolean {
  return s.running || s.stageRequests > 0 || STAGES.some((id) => s.stages[id].status === 'running');
}

/**
 * Each stage's time once it is done, null before (the timings chart's bars). Select it with useShallow: a stage
 * starting leaves it shallow-equal, so the chart (a whole recharts tree, ~20 ms a render on a 2-core machine)
 * redraws once a stage, not twice.
 */
export function doneStageTimes(s: Pick<StudioState, 'stages'>): (number | null)[] {
  return STAGES.map((id) => (s.stages[id].status === 'done' ? (s.stages[id].ms ?? null) : null));
}

/**
 * Each group's reward mean / std: the advantages stage's; for a batch that came from a file (shown as
 * imported, or stepped from it), the Doctor's on import; null when neither has them (no rewards).
 */
export function groupStats(s: Pick<BatchSlice, 'run' | 'imported' | 'batchOrigin' | 'stepFrom'>): GroupStats[] | null {
  if (s.run.advantages?.groups) return s.run.advantages.groups;
  return (fromFile(s) && s.imported?.report.groups) || null;
}

/** The batch on screen came from the imported file: shown as imported, or an update stepped from it. */
export function fromFile(s: Pick<BatchSlice, 'batchOrigin' | 'stepFrom'>): boolean {
  return s.batchOrigin === 'import' || (s.batchOrigin === 'step' && s.stepFrom === 'import');
}

/** Names of the rewards_per_func columns: the reward stage's, else "reward f". */
export function rewardNames(batch: GrpoBatch, run: RunResults): string[] {
  const F = batch.rewards_per_func?.[0]?.length ?? 0;
  return run.reward?.names ?? Array.from({ length: F }, (_, f) => `reward ${f}`);
}

type BaseState = Pick<StudioState, 'task' | 'sampling' | 'trainer' | 'edits' | 'batchTrainer' | 'batchEdits' | 'stepFrom' | 'imported'>;

/** Which base the next update has: the imported batch when the stepper is set to it, else the prompt set. */
export function baseKindOf(s: Pick<StudioState, 'stepFrom' | 'imported'>): BaseKind {
  return s.stepFrom === 'import' && s.imported ? 'batch' : 'prompts';
}

/** What the next update starts from: the imported batch (its own settings), or the prompt set (its task's preset and sampling form). */
export function baseOf(s: Pick<StudioState, 'stepFrom' | 'imported' | 'task'> & Partial<Pick<StudioState, 'sampling'>>): SettingsBase {
  return baseKindOf(s) === 'batch' ? { kind: 'batch', batch: s.imported!.batch, name: s.imported!.name } : { kind: 'prompts', task: s.task, sampling: s.sampling };
}

/** The trainer and the user's edits of the next update's base. */
export function baseSettingsOf(s: BaseState): { trainer: TrainerId; edits: SettingsEdits } {
  return baseKindOf(s) === 'batch' ? { trainer: s.batchTrainer, edits: s.batchEdits } : { trainer: s.trainer, edits: s.edits };
}

/** The trainer the next update follows. */
export const trainerOf = (s: BaseState): TrainerId => baseSettingsOf(s).trainer;

let lastEffective: { key: unknown[]; value: { settings: EffectiveSettings } | { error: string } } | null = null;

/**
 * The settings the next update runs with (the one resolution the CLI uses: src/bridge/settings.ts pageSettings),
 * or why they cannot be formed (a file value the table refuses). Memoised on its inputs: selectors must
 * return the same object while nothing changed.
 */
export function effectiveOf(s: BaseState): { settings: EffectiveSettings } | { error: string } {
  const base = baseOf(s);
  const { trainer, edits } = baseSettingsOf(s);
  const key = [trainer, edits, ...(base.kind === 'batch' ? [base.batch] : [base.task, base.sampling])];
  if (lastEffective && lastEffective.key.length === key.length && lastEffective.key.every((k, i) => k === key[i])) return lastEffective.value;
  let value: { settings: EffectiveSettings } | { error: string };
  try {
    const settings = pageSettings(trainer, base, edits);
    // The prompt set's sampler reads the same values (one each): a second one is named before anything runs.
    if (base.kind === 'prompts' && base.sampling) samplerOf(settings, base.sampling);
    value = { settings };
  } catch (e) {
    value = { error: `${base.kind === 'batch' ? `${base.name}: ` : ''}${(e as Error).message}` };
  }
  lastEffective = { key, value };
  return value;
}

/**
 * The settings of a what-if on the update on screen (src/bridge/settings.ts whatIfSettings: over the settings the
 * update ran with, never the form's later edits), or why they cannot be formed; null without an update.
 */
export function whatIfOf(s: Pick<StudioState, 'runSettings' | 'stepFrom' | 'imported' | 'task'>, trainer: TrainerId, edits: Record<string, unknown>): { settings: EffectiveSettings } | { error: string } | null {
  if (!s.runSettings) return null;
  try {
    return { settings: whatIfSettings(s.runSettings.settings, baseOf(s), trainer, edits) };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/**
 * The report's Settings table for the update on screen: its trainer, config and run as it ran (the keys
 * `grpo-studio report` shows from the file's config) and, for an update from the prompt set, the sampling it ran
 * with under `sampling.` keys, never over a config key of the same name; an imported batch's update sampled nothing.
 */
export function reportSettings(s: Pick<StudioState, 'runSettings' | 'stepFrom' | 'imported'>): Record<string, unknown> | null {
  const r = s.runSettings;
  if (!r) return null;
  const sampling = baseKindOf(s) === 'prompts' ? Object.fromEntries(Object.entries(r.sampling).map(([k, v]) => [`sampling.${k}`, v])) : {};
  return { trainer: r.settings.trainer, ...r.settings.config, ...r.settings.run, ...sampling };
}

/** A config value of the settings an update ran with (its row's default where no layer set it). */
export function ranValue(settings: EffectiveSettings, name: string): unknown {
  return settingOf(settings, 'config', name).value;
}

/** The studio loss type the results on screen ran with (the update's), else the next update's. */
export function lossTypeOf(s: BaseState & Pick<StudioState, 'runSettings'>): LossType {
  const e = s.runSettings ? { settings: s.runSettings.settings } : effectiveOf(s);
  const v = 'settings' in e ? ranValue(e.settings, 'loss_type') : undefined;
  return ((AGGREGATIONS as readonly unknown[]).includes(v) ? v : 'dapo') as LossType;
}

/**
 * What differs between the settings an update ran with and the form now: settings by name with where each
 * value comes from, the other panels as a whole. Empty when the results on screen are current.
 */
export function staleFields(ran: StepSettings | null, now: Omit<StepSettings, 'settings'> & { settings: EffectiveSettings | null }): string[] {
  if (!ran) return [];
  const out = now.settings ? settingsChanges(ran.settings, now.settings) : ['settings: cannot be formed'];
  for (const k of ['prompts', 'sampling', 'rewards', 'tools'] as const) if (JSON.stringify(ran[k] ?? null) !== JSON.stringify(now[k] ?? null)) out.push(`${k} changed`);
  return out;
}

let lastDiff: { a: GrpoBatch; b: GrpoBatch; diff: BatchDiff } | null = null;

/** The batch on screen against the pinned diff base (null without one, or when it is the same batch); memoised on the pair. */
export function batchDiff(s: Pick<StudioState, 'batch' | 'diffBase'>): BatchDiff | null {
  const a = s.diffBase?.batch;
  const b = s.batch;
  if (!a || !b || a === b) return null;
  if (lastDiff?.a !== a || lastDiff.b !== b) lastDiff = { a, b, diff: diffBatches(a, b) };
  return lastDiff.diff;
}

/**
 * What the mismatch explorer reads for the batch on screen: the import the worker holds (by its request id), or
 * the current update once its loss stage has run (its trainer side is the policy before the step where the
 * batch has none), with the key its answer is kept under; or why there is nothing to ask yet.
 */
export function mismatchTarget(s: Pick<StudioState, 'batch' | 'batchOrigin' | 'imported' | 'run'>): { key: object; of: MismatchOf } | { key: null; reason: string } {
  if (!s.batch) return { key: null, reason: 'no batch on screen: import one, or run an update' };
  if (s.batchOrigin === 'import' && s.imported?.importId !== undefined) return { key: s.imported.batch, of: { kind: 'import', import: s.imported.importId } };
  if (s.batchOrigin === 'step' && s.run.loss) return { key: s.run.loss, of: { kind: 'update' } };
  return { key: null, reason: "an update's trainer side is the policy's log-probs before the step: run it to its loss stage" };
}

/** The explorer's answer for the batch on screen, or null (none asked yet, or one for another batch). */
export function mismatchShown(s: Pick<StudioState, 'batch' | 'batchOrigin' | 'imported' | 'run' | 'mismatch'>): MismatchState | null {
  const key = mismatchTarget(s).key;
  return key && s.mismatch?.key === key ? s.mismatch : null;
}

/** The corrections' effects for the explorer's answer on screen, or null (not asked yet, or for another analysis). */
export function correctionsShown(s: Pick<StudioState, 'batch' | 'batchOrigin' | 'imported' | 'run' | 'mismatch' | 'mismatchCorrections'>): CorrectionsState | null {
  const result = mismatchShown(s)?.result;
  return result && s.mismatchCorrections?.key === result ? s.mismatchCorrections : null;
}


/**
 * The run as pass `pass` of the update saw it (μ > 1 passes over one batch): the loss stage's ratio, KL,
 * per-token loss, token weights (a trainer's masks can drop other tokens on a later pass), clip bits, loss and mean
 * KL replaced by that pass's (the step stage's `passes`); pass 1, or a pass the update did not run, is the run
 * itself. A trainer preset's view (its terms table) stays the first pass's.
 */
export function runAtPass(run: RunResults, pass: number): RunResults {
  const p = run.step?.passes?.find((x) => x.pass === pass);
  if (!p || !run.loss) return run;
  const { importance_ratio, per_token_kl, per_token_loss, token_weight, clip, clip_counts, loss, mean_kl } = p;
  return { ...run, loss: { ...run.loss, importance_ratio, per_token_kl, per_token_loss, token_weight, clip, clip_counts, loss, mean_kl } };
}

let lastPass: { run: RunResults; pass: number; out: RunResults } | null = null;

/** The run at the chosen pass (runAtPass), memoised on the pair so a selector returns the same object. */
export function shownRun(s: Pick<StudioState, 'run' | 'pass'>): RunResults {
  if (lastPass?.run !== s.run || lastPass.pass !== s.pass) lastPass = { run: s.run, pass: s.pass, out: runAtPass(s.run, s.pass) };
  return lastPass.out;
}

/**
 * The round-trip proof's turns per sample for the batch on screen (src/doctor/turns.ts provenTurns, carried by the
 * Doctor's report: an import's once its tokenizer checks ran, an update's assembled batch's), or null: the grid
 * then takes the turns from the masks.
 */
export function provenTurnsOf(s: Pick<StudioState, 'batch' | 'batchOrigin' | 'imported' | 'run'>): DoctorReport['turns'] | null {
  if (s.batchOrigin === 'import') return s.imported?.batch === s.batch ? (s.imported?.report.turns ?? null) : null;
  const a = s.run.assemble;
  return s.batchOrigin === 'step' && a?.batch === s.batch ? (a.report.turns ?? null) : null;
}

/** The imported batch's judgement under edited settings when that batch is the one on screen (JudgedImport), else null. */
export function judgedShown(s: Pick<StudioState, 'batch' | 'batchOrigin' | 'judged'>): JudgedImport | null {
  return s.batchOrigin === 'import' && s.judged?.batch === s.batch ? s.judged : null;
}

/**
 * What the Doctor's findings on an imported batch were judged under, in words, when not the file's own settings:
 * the edited settings (those the Export writes, as `grpo-studio doctor` on it reads them), a re-check on its way,
 * or why there is no report. Null: the file's own settings, its own report.
 */
export function judgedNote(j: JudgedImport | null): { status: JudgedImport['status']; text: string } | null {
  if (!j) return null;
  if (j.status === 'error') return { status: 'error', text: `not judged: the settings cannot be formed (${j.error}). Fix them, or press Defaults for the file's own settings` };
  const under = (changes: string[]) => `the edited settings, not the file's (${changes.join('; ')})`;
  if (j.status === 'ready') return { status: 'ready', text: `judged under ${under(j.changes)}, as its Export records them` };
  return { status: 'busy', text: `re-checking under the edited settings… shown meanwhile: the findings under ${j.report ? under(j.changes) : "the file's own settings"}` };
}
