// The studio's own settings, in the same SettingSpec form as the trainers' tables (trl.ts, verl.ts,
// openrlhf.ts) so one parser, one validator and one form serve them all:
// - STUDIO_SETTINGS: the batch-config fields the studio defines for every trainer (how the studio computes
//   advantages and position ids, the model family, a torch.optim optimizer object of the studio's own export);
// - GRPO_LOSS_SETTINGS: the studio loss config (src/grpo/loss.ts GrpoLossConfig: the older loss cases, the
//   step pipeline's per-token kernels), as rows of the TRL table with the studio-only differences marked:
//   loss_type also takes verl's aggregation names, epsilon_low is TRL's `epsilon`, epsilon_high is never null.
// Bounds are the TRL table's: one rule per field wherever it is read.
import { AGGREGATIONS } from '../../kernels/types.ts';
import { specOf, type SettingsTable } from './table.ts';
import { TRL_RUN_SETTINGS, TRL_SETTINGS } from './trl.ts';
import type { SettingSpec } from './types.ts';

const trl = (name: string) => specOf(TRL_SETTINGS, name);

const studio = (spec: Omit<SettingSpec, 'trainer' | 'studio'>): SettingSpec => ({ trainer: 'trl', studio: true, ...spec });

/** Batch-config fields of the studio's own, valid beside any trainer's table (src/grpo/settings/effective.ts). */
export const STUDIO_SETTINGS: SettingsTable = [
  studio({ name: 'advantage_estimator', form: 'loss', type: 'enum', values: ['trl', 'verl', 'openrlhf'], default: 'trl', scope: 'advantages', doc: 'The group std the studio divides by: trl (std + 1e-4, unbiased), verl (std + 1e-6) or openrlhf (group_norm: std + 1e-9; clamped to the OpenRLHF reward.clip_range, default ±10).' }),
  studio({ name: 'position_ids', form: 'loss', type: 'enum', values: ['from_attention_mask', 'arange'], default: 'from_attention_mask', scope: 'batch', doc: 'cumsum(attention_mask) − 1 (HF generate), or arange(L) as a forward without position_ids: left padding shifts GPT-2’s learned positions.' }),
  studio({ name: 'model_type', type: 'string', nullable: true, default: null, scope: 'batch', doc: 'HF model_type of the policy (gpt2 has absolute positions; llama / qwen use RoPE).' }),
  studio({ name: 'optimizer', type: 'object', nullable: true, default: null, scope: 'optimizer', doc: 'The studio’s own torch.optim optimizer {name: adamw | sgd, lr, betas, eps, weight_decay, momentum, no_decay}: one decay group, a constant rate; when set it replaces learning_rate / adam_* / weight_decay.' }),
];

export const GRPO_LOSS_SETTINGS: SettingsTable = [
  { ...trl('loss_type'), values: AGGREGATIONS, studio: true, doc: 'The aggregation: TRL loss types grpo/bnpo/dr_grpo/dapo or verl loss_agg_mode names.' },
  trl('beta'),
  { ...trl('epsilon'), name: 'epsilon_low', studio: true, doc: 'TRL `epsilon`: lower clip 1 − ε_low.' },
  { ...trl('epsilon_high'), nullable: false, default: trl('epsilon').default, studio: true, doc: 'Upper clip 1 + ε_high (TRL: null means epsilon).' },
  trl('delta'),
  trl('temperature'),
  trl('max_completion_length'),
  trl('kl_estimator'),
  trl('importance_sampling_level'),
  specOf(TRL_RUN_SETTINGS, 'num_items_in_batch'),
];

/** Fields a studio loss config must give (the rest have meaningful defaults). */
export const GRPO_LOSS_REQUIRED = ['loss_type', 'beta', 'epsilon_low', 'epsilon_high', 'temperature', 'max_completion_length', 'kl_estimator', 'importance_sampling_level'] as const;
