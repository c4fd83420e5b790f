// The batch's rewards as the trainer combined them: `rewards`, else TRL's nansum of rewards_per_func ·
// reward_weights; a row where every reward function returned None (all NaN) is NaN, as TRL marks it
// (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577: `rewards[unscorable_mask] = nan`) so the group
// statistics leave it out. Shared by the reward rules and the report's group statistics.
import { combineRewards } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';

/** Rows of rewards_per_func where every reward function returned None (NaN); a row with no functions is not one. */
export function unscorableRows(batch: GrpoBatch): number[] {
  const out: number[] = [];
  batch.rewards_per_func?.forEach((row, b) => {
    if (Array.isArray(row) && row.length > 0 && row.every((x) => Number.isNaN(x))) out.push(b);
  });
  return out;
}

export function batchRewards(batch: GrpoBatch): ArrayLike<number> | undefined {
  const base = batch.rewards ?? (batch.rewards_per_func ? combineRewards(batch.rewards_per_func, batch.reward_weights) : undefined);
  const none = unscorableRows(batch);
  if (!base || none.length === 0) return base;
  const out = Float64Array.from(base);
  for (const b of none) if (b < out.length) out[b] = NaN;
  return out;
}

/** Whether a per-sample field has one value per sample. */
export function perSample(values: ArrayLike<number> | undefined, B: number): values is ArrayLike<number> {
  return !!values && values.length === B && B > 0;
}

/** A group as the report names it: its label when the batch has group_ids, else its index. */
export function groupName(batch: GrpoBatch, rows: readonly number[], g: number): number {
  return batch.group_ids?.[rows[0]] ?? g;
}
