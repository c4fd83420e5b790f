// Facts the charts and inspectors derive from the batch on screen and the current update, in one place so
// every panel shows the same numbers: each group's reward mean / std, and the reward columns' names.
import { computeAdvantages, groupRows, type GroupStats } from '../grpo/advantages.ts';
import { scaleRewardsOf, type GrpoBatch } from '../io/batch.ts';
import type { RunResults } from '../store/session.ts';

/** Group mean / std: the advantages stage's, else recomputed from the batch's rewards (null when it has none). */
export function groupStats(batch: GrpoBatch, run: RunResults): GroupStats[] | null {
  if (run.advantages?.groups) return run.advantages.groups;
  const r = batch.rewards;
  const labels = batch.group_ids?.length === r?.length ? batch.group_ids : undefined;
  if (!r || (!labels && r.length % batch.num_generations !== 0)) return null;
  // Labelled groups (verl uid, OpenRLHF index, a TRL rank's slice) are not consecutive rows.
  const groups = labels && groupRows(r.length, batch.num_generations, labels).rows;
  return computeAdvantages(r, { num_generations: batch.num_generations, scale_rewards: scaleRewardsOf(batch.config), groups }).groups;
}

/** Names of the rewards_per_func columns: the reward stage's, else "reward f". */
export function rewardNames(batch: GrpoBatch, run: RunResults): string[] {
  const F = batch.rewards_per_func?.[0]?.length ?? 0;
  return run.reward?.names ?? Array.from({ length: F }, (_, f) => `reward ${f}`);
}
