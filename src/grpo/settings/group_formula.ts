// The studio's formula for a trainer's group advantages, in a batch config's words (advantage_estimator,
// scale_rewards): what a verl or OpenRLHF estimator setting means when the studio recomputes advantages from
// rewards. Beside the settings tables because the importers (src/io/formats) write it into the batch config;
// rewardAdvantageGap (src/grpo/advantages.ts) checks a batch says it.
import type { BatchConfig, ScaleRewards } from '../../io/batch.ts';

export interface GroupFormula {
  advantage_estimator: NonNullable<BatchConfig['advantage_estimator']>;
  scale_rewards: ScaleRewards;
}

/**
 * verl's grpo: ε 1e-6, norm_adv_by_std_in_grpo false → r − mean (core_algos.py compute_grpo_outcome_advantage;
 * 'verl' also marks the batch as verl's). OpenRLHF's group_norm: ε 1e-9; dr_grpo: r − mean
 * (openrlhf/trainer/ppo_utils/experience_maker.py); null for an OpenRLHF estimator that is neither.
 */
export function groupFormulaOf(trainer: 'verl' | 'openrlhf', config: Record<string, unknown>): GroupFormula | null {
  if (trainer === 'verl') return { advantage_estimator: 'verl', scale_rewards: config.norm_adv_by_std_in_grpo === false ? 'none' : 'group' };
  const e = config['algo.advantage.estimator'];
  return e === 'group_norm' ? { advantage_estimator: 'openrlhf', scale_rewards: 'group' } : e === 'dr_grpo' ? { advantage_estimator: 'openrlhf', scale_rewards: 'none' } : null;
}
