// The batch the page's Export writes: the batch on screen with the update's results folded in (its rewards and
// advantages are the assembled batch's; the log-probs the loss used and the trainer's effective loss mask come
// from later stages), the settings they were computed with, exactly (src/bridge/batch_settings.ts withSettings,
// the function the worker steps and judges an imported batch with), so `grpo-studio` replays the same update
// from the file (src/cli/args.ts stepSettingsOfFile reads back the StepConfig the page ran) and its Doctor says
// what the page's did, and the ids the import's reader inferred (inferred_ids). Which settings: those of the
// update once one has started (recorded at its first stage, so an Export mid-update never pairs its results with
// other settings); before any, the next update's (the batch's own under the user's edits), so nothing the user
// entered is left out. Form edits made after the update started are not in the file, and exportNote says so.
// The same settings are those the page's Doctor judges the imported batch on screen under (importDoctorSettings):
// an import whose settings the user changed is judged as its Export would be by `grpo-studio doctor`.
// Pure, so a test reads the exported file in the CLI without a browser.
import type { GrpoBatch } from '../io/batch.ts';
import { settingsChanges, trainerOfBatch, type EffectiveSettings } from '../grpo/settings/effective.ts';
import { withSettings } from '../bridge/batch_settings.ts';
import { noEdits, pageSettings } from '../bridge/settings.ts';
import { StudioFailure } from '../bridge/errors.ts';
import type { StudioState } from './index.ts';
import { baseSettingsOf, effectiveOf, fromFile, staleFields } from './derived.ts';

type ExportState = Pick<StudioState, 'batch' | 'run' | 'runSettings' | 'imported' | 'batchOrigin' | 'stepFrom' | 'task' | 'prompts' | 'sampling' | 'rewards' | 'tools' | 'trainer' | 'edits' | 'batchTrainer' | 'batchEdits'>;

/**
 * The settings the exported batch records: the started update's, else the next update's; null only where those
 * cannot be formed from the file's own values and the user edited nothing (the file's settings are then written
 * back untouched). Throws StudioFailure('settings') naming the problem when the user's edits cannot be formed:
 * the file must not silently leave them out.
 */
function exportSettings(s: ExportState): EffectiveSettings | null {
  const r = recordedSettings(s);
  if ('error' in r) throw new StudioFailure('settings', `Export: the settings cannot be formed (${r.error}): fix them, or press Defaults to export the file's own`);
  return r.settings;
}

/** exportSettings' answer, with the reason the user's edits cannot be formed as a value rather than thrown. */
function recordedSettings(s: ExportState): { settings: EffectiveSettings | null } | { error: string } {
  if (s.runSettings) return { settings: s.runSettings.settings };
  const next = effectiveOf(s);
  if ('settings' in next) return next;
  const { trainer, edits } = baseSettingsOf(s);
  const edited = Object.values(edits[trainer]).some((o) => Object.keys(o).length > 0) || (s.imported !== null && trainer !== trainerOfBatch(s.imported.batch));
  return edited ? { error: next.error } : { settings: null };
}

/** What the imported batch on screen is judged under (importDoctorSettings). */
export type ImportJudgement = { kind: 'own' } | { kind: 'edited'; settings: EffectiveSettings; changes: string[]; key: string } | { kind: 'error'; error: string };

/** A batch's own settings (its trainer, no edits), as an import starts with them; memoised per batch. */
const ownOf = new WeakMap<GrpoBatch, { settings: EffectiveSettings } | { error: string }>();
function ownSettings(batch: GrpoBatch, name: string): { settings: EffectiveSettings } | { error: string } {
  let own = ownOf.get(batch);
  if (!own) {
    try {
      own = { settings: pageSettings(trainerOfBatch(batch), { kind: 'batch', batch, name }, noEdits()) };
    } catch (e) {
      own = { error: (e as Error).message };
    }
    ownOf.set(batch, own);
  }
  return own;
}

/** JSON with every object's keys sorted: two settings that write the same file compare equal whatever their keys' order. */
const canonical = (x: unknown): string => JSON.stringify(x, (_k, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v));
const written = (b: GrpoBatch) => canonical({ trainer: b.trainer ?? null, config: b.config ?? null, run: b.run ?? null });

/**
 * The settings the page's Doctor judges the imported batch on screen under (`key`: what they write into the file,
 * canonical: two resolutions that write the same are one judgement): those its Export records (so the page's
 * report is `grpo-studio doctor`'s on that file). 'own': they write what the file's own settings write (no edit, or
 * edits back to the file's values), so the import's own report stands; 'edited': other settings, with what they
 * change against the file's; 'error': the user's edits cannot be formed (no report is the answer, not the file's).
 * Null when the batch on screen is not the imported one (an update's assembled batch has its own report).
 */
export function importDoctorSettings(s: ExportState): ImportJudgement | null {
  const i = s.imported;
  if (!i || s.batchOrigin !== 'import' || s.batch !== i.batch) return null;
  const r = recordedSettings(s);
  if ('error' in r) return { kind: 'error', error: r.error };
  if (!r.settings) return { kind: 'own' };
  const own = ownSettings(i.batch, i.name);
  const key = written(withSettings(i.batch, r.settings));
  if ('settings' in own && written(withSettings(i.batch, own.settings)) === key) return { kind: 'own' };
  const changes = 'settings' in own ? settingsChanges(own.settings, r.settings) : [`the file's own settings cannot be formed (${own.error})`];
  return { kind: 'edited', settings: r.settings, changes: changes.length ? changes : ['the same values as the file, written out'], key };
}

export function exportedBatch(s: ExportState): GrpoBatch | null {
  const { batch, run } = s;
  if (!batch) return null;
  const settings = exportSettings(s);
  const out = settings ? withSettings(batch, settings, run.assemble?.padded.tokenizer_eos_token_id) : { ...batch };
  // The ids its reader inferred stay marked as such, so the file's Doctor verdicts are the import's (not errors).
  const inferred = fromFile(s) ? s.imported?.inferred : undefined;
  if (inferred && Object.keys(inferred).length) out.inferred_ids = inferred;
  const C = run.assemble?.padded.C ?? 0;
  const rows = (a: Float32Array | null | undefined) => a && batch.completion_ids.map((ids, b) => Array.from(a.subarray(b * C, b * C + ids.length)));
  out.old_per_token_logps = rows(run.loss?.old_per_token_logps) ?? batch.old_per_token_logps;
  out.ref_per_token_logps = rows(run.reference_forward?.ref_per_token_logps) ?? batch.ref_per_token_logps;
  // The trainer preset's effective loss mask (0/1), so a reader sees which tokens the trainer's loss kept.
  out.effective_loss_mask = rows(run.loss?.trainer?.terms?.effective_loss_mask) ?? batch.effective_loss_mask;
  return out;
}

/**
 * What the user is told with an Export of an update's batch when the form changed after the update started: the
 * file holds that update's results, so its settings are the ones it ran with, and the later changes are not in it.
 * Null when there is nothing to say.
 */
export function exportNote(s: ExportState): string | null {
  if (!s.batch || !s.runSettings) return null;
  const now = effectiveOf(s);
  const changed = staleFields(s.runSettings, { prompts: s.prompts, sampling: s.sampling, rewards: s.rewards, tools: s.tools, settings: 'settings' in now ? now.settings : null });
  return changed.length ? `the exported file holds the settings this update ran with; changed in the form since, and not in the file: ${changed.join('; ')}` : null;
}
