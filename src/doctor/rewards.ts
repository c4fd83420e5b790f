// The batch's rewards as the trainer combined them: `rewards`, else TRL's nansum of rewards_per_func ·
// reward_weights; a row where every reward function returned None (all NaN) is NaN, as TRL marks it
// (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577: `rewards[unscorable_mask] = nan`) so the group
// statistics leave it out. Shared by the reward rules and the report's group statistics.
import { combineRewards, rewardWeightsOf, unscorableRows as unscorableOf, withUnscorable } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';

/** Rows where every reward function returned None (rewards_per_func all NaN). */
export const unscorableRows = (batch: GrpoBatch): number[] => unscorableOf(batch.rewards_per_func);

export function batchRewards(batch: GrpoBatch): ArrayLike<number> | undefined {
  const base = batch.rewards ?? (batch.rewards_per_func ? combineRewards(batch.rewards_per_func, rewardWeightsOf(batch)) : undefined);
  return base && withUnscorable(base, batch.rewards_per_func);
}

/** Whether a per-sample field has one value per sample. */
export function perSample(values: ArrayLike<number> | undefined, B: number): values is ArrayLike<number> {
  return !!values && values.length === B && B > 0;
}

/** A group as the report names it: its label when the batch has group_ids, else its index. */
export function groupName(batch: GrpoBatch, rows: readonly number[], g: number): number {
  return batch.group_ids?.[rows[0]] ?? g;
}
