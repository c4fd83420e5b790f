// The page's settings, resolved the way `grpo-studio` resolves a file (src/grpo/settings/effective.ts): the
// trainer's defaults, then the base of the update — the default task's preset for the page's own prompt set,
// or the imported batch's own `config` / `run` for that batch (never an earlier batch's) — then the user's
// edits, kept per trainer in its own field names. The page sends the result (EffectiveSettings) with every
// update and what-if; the worker turns it into a StepConfig with the CLI's function (stepConfigOf). Also: a
// prompt of the prompt set as the conversation the chat template renders (the render stage, the template diff).
import { DEFAULT_GRPO_CONFIG } from '../grpo/default_task.ts';
import { effectiveSettings, fileLayer, type EffectiveSettings, type SettingsLayer } from '../grpo/settings/effective.ts';
import { TRAINERS, type TrainerId } from '../grpo/settings/types.ts';
import type { ChatMessage, GrpoBatch } from '../io/batch.ts';
import type { PromptItem } from './protocol.ts';

/** The sampler defaults the worker applies, for the page's sampling form. */
export { DEFAULT_SAMPLING } from '../model/sampler.ts';

/** The default task's settings (TRL names): the preset of the page's own prompt set. */
export const DEFAULT_TASK_LAYER: SettingsLayer = { origin: 'preset', label: 'default task', trainer: 'trl', config: { ...DEFAULT_GRPO_CONFIG } };

/** The user's values, per trainer, in that trainer's own names (a value equal to the layer below still counts: the user set it). */
export type SettingsEdits = Record<TrainerId, { config: Record<string, unknown>; run: Record<string, unknown> }>;

export const noEdits = (): SettingsEdits => Object.fromEntries(TRAINERS.map((t) => [t, { config: {}, run: {} }])) as SettingsEdits;

/** What an update's settings start from: the prompt set (the default task's preset) or a batch file (its own settings). */
export type SettingsBase = { kind: 'prompts' } | { kind: 'batch'; batch: Pick<GrpoBatch, 'trainer' | 'config' | 'run'>; name: string };

/** The settings the page's next update (or what-if) runs with. Throws SettingsError naming a bad value. */
export function pageSettings(trainer: TrainerId, base: SettingsBase, edits: SettingsEdits, extra: SettingsLayer[] = []): EffectiveSettings {
  const below = base.kind === 'batch' ? fileLayer(base.batch, base.name) : DEFAULT_TASK_LAYER;
  return effectiveSettings(trainer, [below, { origin: 'edited', ...edits[trainer] }, ...extra]);
}

/** A prompt of the prompt set as the chat template sees it: the system message (when given), then the user's. */
export function promptConversation(p: PromptItem): ChatMessage[] {
  return [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.user }];
}
