// The batch's rewards as the trainer combined them: `rewards`, else TRL's nansum of rewards_per_func ·
// reward_weights. Shared by the reward rules and the report's group statistics.
import { combineRewards } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';

export function batchRewards(batch: GrpoBatch): ArrayLike<number> | undefined {
  if (batch.rewards) return batch.rewards;
  if (batch.rewards_per_func) return combineRewards(batch.rewards_per_func, batch.reward_weights);
  return undefined;
}

/** Whether a per-sample field has one value per sample. */
export function perSample(values: ArrayLike<number> | undefined, B: number): values is ArrayLike<number> {
  return !!values && values.length === B && B > 0;
}

/** A group as the report names it: its label when the batch has group_ids, else its index. */
export function groupName(batch: GrpoBatch, rows: readonly number[], g: number): number {
  return batch.group_ids?.[rows[0]] ?? g;
}
