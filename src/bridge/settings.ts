// The page's settings, resolved the way `grpo-studio` resolves a file (src/grpo/settings/effective.ts): the
// trainer's defaults, then the base of the update — the chosen task's preset for the page's own prompt set,
// or the imported batch's own `config` / `run` for that batch (never an earlier batch's) — then the user's
// edits, kept per trainer in its own field names. The page sends the result (EffectiveSettings) with every
// update and what-if; the worker turns it into a StepConfig with the CLI's function (stepConfigOf). A what-if
// is resolved over the settings its update ran with (whatIfSettings), never over the form as it is now. Also: a
// prompt of the prompt set as the conversation the chat template renders (the render stage, the template diff).
import { DEFAULT_TASK, TASKS, type TaskId } from '../grpo/tasks.ts';
import { effectiveSettings, fileLayer, settingOf, type EffectiveSettings, type SettingsLayer } from '../grpo/settings/effective.ts';
import { TRAINERS, type TrainerId } from '../grpo/settings/types.ts';
import type { ChatMessage, GrpoBatch } from '../io/batch.ts';
import type { PromptItem } from './protocol.ts';

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

/** What an update's settings start from: the prompt set (its task's preset; default: the default task) or a batch file (its own settings). */
export type SettingsBase = { kind: 'prompts'; task?: TaskId } | { kind: 'batch'; batch: Pick<GrpoBatch, 'trainer' | 'config' | 'run'>; name: string };

/** The layer below the user's edits: the file's own settings, or the task's preset. */
const baseLayer = (base: SettingsBase): SettingsLayer => (base.kind === 'batch' ? fileLayer(base.batch, base.name) : taskLayer(base.task ?? DEFAULT_TASK));

/** The settings the page's next update runs with. Throws SettingsError naming a bad value. */
export function pageSettings(trainer: TrainerId, base: SettingsBase, edits: SettingsEdits): EffectiveSettings {
  return effectiveSettings(trainer, [baseLayer(base), { origin: 'edited', ...edits[trainer] }]);
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
  return effectiveSettings(trainer, [baseLayer(base), ...layersOf(ran), { origin: 'edited', label: 'what-if', config: edits }]);
}

/**
 * The edits of `target.trainer` that make pageSettings(target.trainer, base, …) give `target`'s values (a what-if
 * applied): every value the user or the what-if set, and every value the base alone would not give.
 */
export function editsReaching(target: EffectiveSettings, base: SettingsBase): SettingsEdits[TrainerId] {
  const below = effectiveSettings(target.trainer, [baseLayer(base)]);
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
