// verl's advantage-estimator settings (volcengine/verl verl/trainer/config/algorithm.py at b178a3c, `algorithm.*`)
// as far as `grpo-studio advantages` reads them. The estimators the studio implements are the enum's values.
// (verl's loss settings live in verl.ts beside this file; these three rows belong in that table once both exist.)
import type { SettingSpec } from './types.ts';

/** The verl advantage estimators the studio implements (src/grpo/advantages.ts verlAdvantages). */
export const VERL_ADV_ESTIMATORS = ['grpo', 'rloo', 'reinforce_plus_plus'] as const;

const ALGO = 'volcengine/verl verl/trainer/config/algorithm.py';

export const VERL_ADVANTAGE_SETTINGS: readonly SettingSpec[] = [
  { name: 'adv_estimator', trainer: 'verl', type: 'enum', values: VERL_ADV_ESTIMATORS, default: 'grpo', scope: 'advantages', source: ALGO, doc: 'Outcome estimator: grpo (uid groups), rloo (leave-one-out), reinforce_plus_plus (discounted, whitened).' },
  { name: 'norm_adv_by_std_in_grpo', trainer: 'verl', type: 'boolean', default: true, scope: 'advantages', source: ALGO, doc: 'grpo: divide by the group std + 1e-6 (false: Dr. GRPO).' },
  { name: 'gamma', trainer: 'verl', type: 'number', min: 0, max: 1, default: 1, scope: 'advantages', source: ALGO, doc: 'reinforce_plus_plus: discount of the returns.' },
];
