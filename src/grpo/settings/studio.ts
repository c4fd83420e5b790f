// The studio's own loss config (src/grpo/loss.ts GrpoLossConfig: the older tests/golden/loss cases, the step
// pipeline's per-token kernels), as rows of the TRL table with the studio-only differences marked: loss_type
// takes the studio's aggregation names (TRL's grpo/bnpo/dr_grpo/dapo plus verl's loss_agg_mode values),
// epsilon_low is TRL's `epsilon`, epsilon_high is never null, kl_estimator picks k1/k2/k3.
import { AGGREGATIONS } from '../../kernels/types.ts';
import { specOf, type SettingsTable } from './table.ts';
import { TRL_RUN_SETTINGS, TRL_SETTINGS } from './trl.ts';

const trl = (name: string) => specOf(TRL_SETTINGS, name);

export const GRPO_LOSS_SETTINGS: SettingsTable = [
  { ...trl('loss_type'), values: AGGREGATIONS, studio: true, doc: 'The aggregation: TRL loss types grpo/bnpo/dr_grpo/dapo or verl loss_agg_mode names.' },
  trl('beta'),
  { ...trl('epsilon'), name: 'epsilon_low', max: 1, studio: true, doc: 'TRL `epsilon`: lower clip 1 − ε_low.' },
  { ...trl('epsilon_high'), nullable: false, default: 0.2, studio: true, doc: 'Upper clip 1 + ε_high (TRL: null means epsilon).' },
  trl('delta'),
  trl('temperature'),
  trl('max_completion_length'),
  trl('kl_estimator'),
  trl('importance_sampling_level'),
  { ...specOf(TRL_RUN_SETTINGS, 'num_items_in_batch'), min: 0, exclusive: true },
];

/** Fields a studio loss config must give (the rest have meaningful defaults). */
export const GRPO_LOSS_REQUIRED = ['loss_type', 'beta', 'epsilon_low', 'epsilon_high', 'temperature', 'max_completion_length', 'kl_estimator', 'importance_sampling_level'] as const;
