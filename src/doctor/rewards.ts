// The batch's rewards as the trainer combined them: `rewards`, else TRL's nansum of rewards_per_func ·
// reward_weights. Shared by the reward rules and the report's group statistics.
import { combineRewards } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';

export function batchRewards(batch: GrpoBatch): ArrayLike<number> | undefined {
  if (batch.rewards) return batch.rewards;
  if (batch.rewards_per_func) return combineRewards(batch.rewards_per_func, batch.reward_weights);
  return undefined;
}

/** Whether rewards/advantages can be grouped: B a multiple of G and one value per sample. */
export function groupable(values: ArrayLike<number> | undefined, B: number, G: number): boolean {
  return !!values && values.length === B && B > 0 && B % G === 0;
}
