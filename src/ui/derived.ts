// Facts the charts and inspectors derive from the batch on screen and the current update, in one place so
// every panel shows the same numbers: each group's reward mean / std, and the reward columns' names.
import { computeAdvantages, type GroupStats } from '../grpo/advantages.ts';
import { scaleRewardsOf, type GrpoBatch } from '../io/batch.ts';
import type { RunResults } from '../store/session.ts';
import type { LossSettings, StepSettings } from '../worker/protocol.ts';

/** Group mean / std: the advantages stage's, else recomputed from the batch's rewards (null when it has none). */
export function groupStats(batch: GrpoBatch, run: RunResults): GroupStats[] | null {
  if (run.advantages?.groups) return run.advantages.groups;
  const r = batch.rewards;
  if (!r || r.length % batch.num_generations !== 0) return null;
  return computeAdvantages(r, { num_generations: batch.num_generations, scale_rewards: scaleRewardsOf(batch.config) }).groups;
}

/** Names of the rewards_per_func columns: the reward stage's, else "reward f". */
export function rewardNames(batch: GrpoBatch, run: RunResults): string[] {
  const F = batch.rewards_per_func?.[0]?.length ?? 0;
  return run.reward?.names ?? Array.from({ length: F }, (_, f) => `reward ${f}`);
}

/**
 * What differs between the settings an update ran with and the form now: loss fields by name, the other
 * panels as a whole. Empty when the results on screen are current.
 */
export function staleFields(ran: StepSettings | null, now: StepSettings): string[] {
  if (!ran) return [];
  const out = (Object.keys(now.loss) as (keyof LossSettings)[]).filter((k) => JSON.stringify(ran.loss[k]) !== JSON.stringify(now.loss[k])).map((k) => `${k} ${JSON.stringify(ran.loss[k])} → ${JSON.stringify(now.loss[k])}`);
  for (const k of ['prompts', 'sampling', 'rewards'] as const) if (JSON.stringify(ran[k]) !== JSON.stringify(now[k])) out.push(`${k} changed`);
  return out;
}
