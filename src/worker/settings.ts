// The page's loss & optimizer settings in a batch file's `config` terms (TRL names) and back. One mapping
// serves both directions: the worker sends the page's settings through the batch-config parser
// (stepConfigFromBatch) so one validator checks both, and an imported batch's config fills the loss
// panel, so stepping a batch from a Python trainer uses that trainer's settings and the panel shows them.
// Which values are acceptable is the settings tables' (src/grpo/settings), not a list kept here. Also: a
// prompt of the prompt set as the conversation the chat template renders (the render stage, the template diff).
// The trainer preset (TrainerPreset) maps the same way: an imported batch's config fills it, and for TRL the
// fields the loss panel has are taken from LossSettings, so one value serves both forms.
import { scaleRewardsOf, type BatchConfig } from '../io/batch.ts';
import type { LossType } from '../kernels/types.ts';
import { GRPO_LOSS_SETTINGS } from '../grpo/settings/studio.ts';
import { checkSetting, specOf } from '../grpo/settings/table.ts';
import { TRL_SETTINGS } from '../grpo/settings/trl.ts';
import type { ChatMessage } from '../io/batch.ts';
import { TRL_LOSS_TYPES } from '../kernels/types.ts';
import { TRAINER_TABLES } from '../grpo/settings/trainers.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import { objectiveFor, trainerOfFormat, type TrainerObjective } from '../grpo/step_objective.ts';
import type { LossSettings, PromptItem, TrainerPreset } from './protocol.ts';

/** The sampler defaults the worker applies, for the page's sampling form. */
export { DEFAULT_SAMPLING } from '../model/sampler.ts';

export function batchConfigOf(l: LossSettings): BatchConfig {
  return {
    loss_type: l.loss_type, beta: l.beta, epsilon: l.epsilon_low, epsilon_high: l.epsilon_high, delta: l.delta, temperature: l.temperature,
    kl_estimator: l.kl_estimator, importance_sampling_level: l.importance_sampling_level, max_completion_length: l.max_completion_length,
    optimizer: { name: l.optimizer, lr: l.lr, betas: l.betas, weight_decay: l.weight_decay }, max_grad_norm: l.max_grad_norm,
    position_ids: l.position_ids, scale_rewards: l.scale_rewards, advantage_estimator: l.advantage_estimator,
  };
}

const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Whether `v` is a valid value of the studio loss table's (else TRL table's) setting `name`. */
function valid(name: string, v: unknown): boolean {
  const spec = GRPO_LOSS_SETTINGS.find((s) => s.name === name) ?? specOf(TRL_SETTINGS, name);
  try {
    checkSetting(spec, v, 'config');
    return v !== undefined;
  } catch {
    return false;
  }
}

/**
 * The loss settings a batch's config sets (only the fields it has; TRL's epsilon_high defaults to its
 * epsilon). Values the settings tables reject are left out here: the step's parser names them if they matter.
 */
export function lossSettingsOf(c: BatchConfig | undefined): Partial<LossSettings> {
  if (!c) return {};
  const out: Partial<LossSettings> = {};
  if (valid('loss_type', c.loss_type)) out.loss_type = c.loss_type as LossType;
  if (valid('beta', c.beta)) out.beta = c.beta;
  if (valid('kl_estimator', c.kl_estimator)) out.kl_estimator = c.kl_estimator;
  if (valid('epsilon', c.epsilon)) out.epsilon_low = out.epsilon_high = c.epsilon;
  if (valid('epsilon_high', c.epsilon_high)) out.epsilon_high = c.epsilon_high;
  if (c.delta === null || valid('delta', c.delta)) out.delta = c.delta;
  if (valid('temperature', c.temperature)) out.temperature = c.temperature;
  if (c.scale_rewards !== undefined && valid('scale_rewards', scaleRewardsOf(c))) out.scale_rewards = scaleRewardsOf(c);
  if (c.advantage_estimator) out.advantage_estimator = c.advantage_estimator;
  if (valid('importance_sampling_level', c.importance_sampling_level)) out.importance_sampling_level = c.importance_sampling_level;
  if (valid('max_completion_length', c.max_completion_length)) out.max_completion_length = c.max_completion_length;
  if (c.position_ids) out.position_ids = c.position_ids;
  if (valid('max_grad_norm', c.max_grad_norm)) out.max_grad_norm = c.max_grad_norm as number;
  // TrainingArguments' names (a TRL config): the same optimizer fields, one value for the panel and the preset.
  if (valid('learning_rate', c.learning_rate)) out.lr = c.learning_rate as number;
  const beta = (k: 'adam_beta1' | 'adam_beta2') => (valid(k, c[k]) ? (c[k] as number) : (specOf(TRL_SETTINGS, k).default as number));
  if (valid('adam_beta1', c.adam_beta1) || valid('adam_beta2', c.adam_beta2)) out.betas = [beta('adam_beta1'), beta('adam_beta2')];
  if (valid('weight_decay', c.weight_decay)) out.weight_decay = c.weight_decay as number;
  const o = c.optimizer as Record<string, unknown> | undefined;
  if (o && typeof o === 'object') {
    if (o.name === 'adamw' || o.name === 'sgd') out.optimizer = o.name;
    if (num(o.lr)) out.lr = o.lr;
    if (Array.isArray(o.betas) && o.betas.length === 2 && o.betas.every(num)) out.betas = [o.betas[0], o.betas[1]];
    if (num(o.weight_decay)) out.weight_decay = o.weight_decay;
  }
  return out;
}

/** The default preset: TRL, everything else from LossSettings and the TRL table's defaults. */
export const DEFAULT_TRAINER: TrainerPreset = { trainer: 'trl', config: {}, run: {} };

/** The TRL config LossSettings stands for (TRL names); a studio-only aggregation name leaves loss_type out. */
function trlConfigOfLoss(l: LossSettings): Record<string, unknown> {
  const c = batchConfigOf(l);
  const keys = ['beta', 'epsilon', 'epsilon_high', 'delta', 'temperature', 'kl_estimator', 'importance_sampling_level', 'max_completion_length', 'scale_rewards'] as const;
  const out: Record<string, unknown> = Object.fromEntries(keys.map((k) => [k, c[k]]));
  Object.assign(out, { learning_rate: l.lr, adam_beta1: l.betas[0], adam_beta2: l.betas[1], weight_decay: l.weight_decay });
  if ((TRL_LOSS_TYPES as readonly string[]).includes(l.loss_type)) out.loss_type = l.loss_type;
  return out;
}

/** The config the preset's trainer reads: for TRL, LossSettings' fields with the preset's other fields. */
export function trainerConfigOf(p: TrainerPreset, l: LossSettings): Record<string, unknown> {
  return p.trainer === 'trl' ? { ...trlConfigOfLoss(l), ...p.config } : p.config;
}

/** The objective the step's loss and gradient follow for this preset: null where the studio loss is TRL's own (LossSettings' fields are the studio loss's). */
export function stepObjectiveOf(p: TrainerPreset, l: LossSettings): TrainerObjective | null {
  return objectiveFor(p.trainer, trainerConfigOf(p, l), p.run, (k) => !(k in p.config));
}

/** Whether LossSettings holds TRL field `name` (then the loss panel and TRL preset edit the same value). */
export function lossHolds(name: string, value: unknown): boolean {
  return Object.keys(lossSettingsOf({ [name]: value })).length > 0;
}

export { trainerOfFormat };

/**
 * The preset an imported batch's config fills: its keys the trainer's tables know (config or run), values as
 * written (a bad one is named when the loss runs, never replaced); for TRL without the fields LossSettings takes.
 */
export function presetOfBatch(trainer: TrainerId, c: BatchConfig | undefined, run?: Record<string, unknown>): TrainerPreset {
  const t = TRAINER_TABLES[trainer];
  const entries = Object.entries(c ?? {});
  const known = (table: typeof t.config) => (k: string) => table.some((s) => s.name === k);
  return {
    trainer,
    config: Object.fromEntries(entries.filter(([k, v]) => known(t.config)(k) && !(trainer === 'trl' && lossHolds(k, v)))),
    // Run keys from the config (where importers put some) and the batch's run (num_items_in_batch, TrainerState).
    run: Object.fromEntries([...entries, ...Object.entries(run ?? {})].filter(([k]) => known(t.run)(k))),
  };
}

/** A prompt of the prompt set as the chat template sees it: the system message (when given), then the user's. */
export function promptConversation(p: PromptItem): ChatMessage[] {
  return [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.user }];
}
