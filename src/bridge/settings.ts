// The page's settings, resolved the way `grpo-studio` resolves a file (src/grpo/settings/effective.ts): the
// trainer's defaults, then the base of the update — the chosen task's preset for the page's own prompt set,
// or the imported batch's own `config` / `run` for that batch (never an earlier batch's) — then the user's
// edits, kept per trainer in its own field names. The page sends the result (EffectiveSettings) with every
// update and what-if; the worker turns it into a StepConfig with the CLI's function (stepConfigOf). A what-if
// is resolved over the settings its update ran with (whatIfSettings), never over the form as it is now. The
// prompt set's sampling form holds the values a trainer samples AND scores with (TRL's temperature,
// max_completion_length, num_generations, top-k / top-p / min-p: rows marked `sampler`): it is a layer of the
// prompt set's settings (samplingLayer), so the sampler and the loss read one value. Also: a prompt of the prompt
// set as the conversation the chat template renders (the render stage, the template diff).
import { DEFAULT_TASK, TASKS, type TaskId } from '../grpo/tasks.ts';
import { configTable, effectiveSettings, fileLayer, settingOf, type EffectiveSettings, type SettingsLayer } from '../grpo/settings/effective.ts';
import { checkSetting } from '../grpo/settings/table.ts';
import { SettingsError, TRAINERS, type SamplerField, type SettingSpec, type TrainerId } from '../grpo/settings/types.ts';
import type { ChatMessage, GrpoBatch } from '../io/batch.ts';
import type { PromptItem, SamplingSettings } from './protocol_settings.ts';

/** The sampler defaults the worker applies, for the page's sampling form. */
export { DEFAULT_SAMPLING } from '../model/sampler.ts';

/**
 * A task's settings (TRL names): the preset of the page's prompt set on that task, its GRPO config (TASKS:
 * multiply-tool's 96 completion tokens, so dr_grpo's B · max_completion_length and TRL's truncated-completion rule
 * are the task's).
 */
export function taskLayer(task: TaskId): SettingsLayer {
  return { origin: 'preset', label: `${task} task`, trainer: 'trl', config: { ...TASKS[task].config } };
}

/** The user's values, per trainer, in that trainer's own names (a value equal to the layer below still counts: the user set it). */
export type SettingsEdits = Record<TrainerId, { config: Record<string, unknown>; run: Record<string, unknown> }>;

export const noEdits = (): SettingsEdits => Object.fromEntries(TRAINERS.map((t) => [t, { config: {}, run: {} }])) as SettingsEdits;

/**
 * What an update's settings start from: the prompt set (its task's preset, default the default task, and its
 * sampling form) or a batch file (its own settings).
 */
export type SettingsBase = { kind: 'prompts'; task?: TaskId; sampling?: SamplingSettings } | { kind: 'batch'; batch: Pick<GrpoBatch, 'trainer' | 'config' | 'run'>; name: string };

/** The rows of a trainer's config that are a sampler field (SettingSpec.sampler). */
export const samplerRows = (trainer: TrainerId): (SettingSpec & { sampler: SamplerField })[] => configTable(trainer).filter((r): r is SettingSpec & { sampler: SamplerField } => r.sampler !== undefined);

/**
 * The sampler's value of a field that switches it off (top-k 0, top-p 1, min-p 0), which a nullable row writes None
 * (TRL's min_p). Other fields have none: a row's None there (max_completion_length: no cap) is nothing the page's
 * sampler can run.
 */
const SAMPLER_OFF: Partial<Record<SamplerField, number>> = { top_k: 0, top_p: 1, min_p: 0 };

/** A sampler value in the row's terms: its "off" value is the row's None where the row is nullable. */
const rowValue = (row: SettingSpec & { sampler: SamplerField }, v: number): number | null => (row.nullable && v === SAMPLER_OFF[row.sampler] ? null : v);

/** A row's value as the sampler's field (None is the field's "off" value), or undefined where the sampler has no such value. */
export const samplerValue = (row: SettingSpec & { sampler: SamplerField }, v: unknown): number | undefined => (v === null ? SAMPLER_OFF[row.sampler] : typeof v === 'number' ? v : undefined);

/**
 * The sampling form as a layer of `trainer`'s settings: each row that is a sampler field, where the form's value
 * is not what the task's preset already gives (so an untouched form leaves the preset's provenance). Set by the
 * user in the sampling form: origin edited, label "sampling form". A value the row refuses (TRL: G 1, temperature 0)
 * is a SettingsError naming the form's field and the trainer's row.
 */
function samplingLayer(trainer: TrainerId, preset: SettingsLayer, sampling: SamplingSettings): SettingsLayer {
  const below = effectiveSettings(trainer, [preset]);
  const config = Object.fromEntries(
    samplerRows(trainer)
      .map((row) => {
        const v = rowValue(row, sampling[row.sampler]);
        try {
          checkSetting(row, v, 'config');
        } catch (e) {
          throw new SettingsError(`sampling form: ${row.sampler} ${sampling[row.sampler]} is ${trainer}'s ${(e as Error).message}${row.sampler === 'temperature' ? ' (greedy decoding: untick "sample")' : ''}`);
        }
        return [row.name, v] as const;
      })
      .filter(([name, v]) => JSON.stringify(settingOf(below, 'config', name).value) !== JSON.stringify(v)),
  );
  return { origin: 'edited', label: 'sampling form', trainer, config };
}

/** The layers below the user's edits: the file's own settings, or the task's preset and the sampling form. */
function baseLayers(base: SettingsBase, trainer: TrainerId): SettingsLayer[] {
  if (base.kind === 'batch') return [fileLayer(base.batch, base.name)];
  const preset = taskLayer(base.task ?? DEFAULT_TASK);
  return base.sampling ? [preset, samplingLayer(trainer, preset, base.sampling)] : [preset];
}

/**
 * The settings the page's next update runs with. Over the prompt set, the sampler's rows come from the sampling form
 * (the store keeps an edit of one there: src/store/settings.ts setSetting). Throws SettingsError naming a bad value.
 */
export function pageSettings(trainer: TrainerId, base: SettingsBase, edits: SettingsEdits): EffectiveSettings {
  return effectiveSettings(trainer, [...baseLayers(base, trainer), { origin: 'edited', ...edits[trainer] }]);
}

/**
 * The sampler's settings of a prompt-set update whose settings are `settings`: the sampling as sent, once each row
 * that is a sampler field is checked to hold the sampler's value — the trainer samples with the value it scores
 * with, so two values would be an update no trainer runs — and TRL's repetition_penalty to count the prompt's tokens
 * as vLLM's and HF's do. Throws SettingsError naming both.
 */
export function samplerOf(settings: EffectiveSettings, sampling: SamplingSettings): SamplingSettings {
  for (const row of samplerRows(settings.trainer)) {
    const { value, provenance } = settingOf(settings, 'config', row.name);
    const where = `config.${row.name} ${JSON.stringify(value)} (${provenance.label ?? provenance.origin})`;
    const v = samplerValue(row, value);
    if (v === undefined) throw new SettingsError(`${where}: the page's sampler needs a value for its ${row.sampler}; set it in the sampling form`);
    if (v !== sampling[row.sampler]) throw new SettingsError(`${where} is not the sampler's ${row.sampler} ${sampling[row.sampler]}: ${settings.trainer} samples with the value it scores with; set it in the sampling form`);
    if (row.sampler === 'repetition_penalty' && v !== 1 && sampling.penalty_scope !== 'prompt+completion') {
      throw new SettingsError(`${where}: ${settings.trainer}'s repetition penalty (vLLM's, HF generate's) counts the prompt's tokens too; set the sampling form's penalty scope to prompt+completion`);
    }
  }
  return sampling;
}

/** Resolved settings as layers again, one per provenance, in the trainer's names: each value keeps where it came from. */
function layersOf(s: EffectiveSettings): SettingsLayer[] {
  const layers = new Map<string, SettingsLayer & { config: Record<string, unknown>; run: Record<string, unknown> }>();
  for (const [key, p] of Object.entries(s.provenance)) {
    const id = JSON.stringify([p.origin, p.label ?? null]);
    if (!layers.has(id)) layers.set(id, { origin: p.origin as SettingsLayer['origin'], ...(p.label ? { label: p.label } : {}), trainer: s.trainer, config: {}, run: {} });
    const where = key.slice(0, key.indexOf('.')) as 'config' | 'run';
    const name = key.slice(key.indexOf('.') + 1);
    layers.get(id)![where][name] = s[where][name];
  }
  return [...layers.values()];
}

/**
 * A what-if's settings: the update's `ran` settings (each value with its provenance) under `trainer`, then the
 * what-if's own config values (label "what-if"). Under another trainer than the update's, the update's base (the
 * file, or the task's preset) and the values of `ran` that mean the same under any trainer, over that trainer's
 * defaults. Edits made in the form after the update ran play no part: the what-if's Δ is its own values. Throws
 * SettingsError naming a bad value.
 */
export function whatIfSettings(ran: EffectiveSettings, base: SettingsBase, trainer: TrainerId, edits: Record<string, unknown>): EffectiveSettings {
  // The sampling form as it is now is not the update's: what the update sampled with is in `ran`.
  const below = baseLayers(base.kind === 'prompts' ? { kind: 'prompts', task: base.task } : base, trainer);
  return effectiveSettings(trainer, [...below, ...layersOf(ran), { origin: 'edited', label: 'what-if', config: edits }]);
}

/**
 * The edits of `target.trainer` that make pageSettings(target.trainer, base, …) give `target`'s values (a what-if
 * applied): every value the user or the what-if set, and every value the base alone would not give.
 */
export function editsReaching(target: EffectiveSettings, base: SettingsBase): SettingsEdits[TrainerId] {
  const below = effectiveSettings(target.trainer, baseLayers(base, target.trainer));
  const pick = (where: 'config' | 'run') =>
    Object.fromEntries(
      Object.entries(target[where]).filter(([k, v]) => target.provenance[`${where}.${k}`]?.origin === 'edited' || JSON.stringify(settingOf(below, where, k).value) !== JSON.stringify(v)),
    );
  return { config: pick('config'), run: pick('run') };
}

/** A prompt of the prompt set as the chat template sees it: the system message (when given), then the user's. */
export function promptConversation(p: PromptItem): ChatMessage[] {
  return [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.user }];
}
