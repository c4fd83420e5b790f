// Facts the charts and inspectors derive from the batch on screen and the current update, in one place so
// every panel shows the same numbers: each group's reward mean / std, and the reward columns' names.
import { computeAdvantages, groupRows, type GroupStats } from '../grpo/advantages.ts';
import { groupLabel, scaleRewardsOf, type GrpoBatch } from '../io/batch.ts';
import type { RunResults } from '../store/session.ts';

/**
 * Group mean / std: the advantages stage's, else recomputed from the batch's rewards (null when it has
 * none). `group` is the group's label (groupLabel), so panels name groups as the Doctor does.
 */
export function groupStats(batch: GrpoBatch, run: RunResults): GroupStats[] | null {
  const r = batch.rewards;
  const labels = batch.group_ids?.length === batch.completion_ids.length ? batch.group_ids : undefined;
  // Labelled groups (verl uid, OpenRLHF index, a TRL rank's slice) are not consecutive rows.
  const { rows } = groupRows(batch.completion_ids.length, batch.num_generations, labels);
  const named = (stats: GroupStats[]) => stats.map((s) => ({ ...s, group: rows[s.group] ? groupLabel(batch, rows[s.group][0]) : s.group }));
  if (run.advantages?.groups) return named(run.advantages.groups);
  if (!r || (!labels && r.length % batch.num_generations !== 0) || r.length !== batch.completion_ids.length) return null;
  return named(computeAdvantages(r, { num_generations: batch.num_generations, scale_rewards: scaleRewardsOf(batch.config), groups: labels && rows }).groups);
}

/** Names of the rewards_per_func columns: the reward stage's, else "reward f". */
export function rewardNames(batch: GrpoBatch, run: RunResults): string[] {
  const F = batch.rewards_per_func?.[0]?.length ?? 0;
  return run.reward?.names ?? Array.from({ length: F }, (_, f) => `reward ${f}`);
}
