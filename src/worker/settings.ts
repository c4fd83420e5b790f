// The page's loss & optimizer settings in a batch file's `config` terms (TRL names) and back. One mapping
// serves both directions: the worker sends the page's settings through the batch-config parser
// (stepConfigFromBatch) so one validator checks both, and an imported batch's config fills the loss
// panel, so stepping a batch from a Python trainer uses that trainer's settings and the panel shows them.
// Which values are acceptable is the settings tables' (src/grpo/settings), not a list kept here. Also: a
// prompt of the prompt set as the conversation the chat template renders (the render stage, the template diff).
import { scaleRewardsOf, type BatchConfig } from '../io/batch.ts';
import type { LossType } from '../kernels/types.ts';
import { GRPO_LOSS_SETTINGS } from '../grpo/settings/studio.ts';
import { checkSetting, specOf } from '../grpo/settings/table.ts';
import { TRL_SETTINGS } from '../grpo/settings/trl.ts';
import type { ChatMessage } from '../io/batch.ts';
import type { LossSettings, PromptItem } from './protocol.ts';

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
  const o = c.optimizer as Record<string, unknown> | undefined;
  if (o && typeof o === 'object') {
    if (o.name === 'adamw' || o.name === 'sgd') out.optimizer = o.name;
    if (num(o.lr)) out.lr = o.lr;
    if (Array.isArray(o.betas) && o.betas.length === 2 && o.betas.every(num)) out.betas = [o.betas[0], o.betas[1]];
    if (num(o.weight_decay)) out.weight_decay = o.weight_decay;
  }
  return out;
}

/** A prompt of the prompt set as the chat template sees it: the system message (when given), then the user's. */
export function promptConversation(p: PromptItem): ChatMessage[] {
  return [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.user }];
}
