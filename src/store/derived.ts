// Facts the charts and inspectors read about the batch on screen, in one place so every panel shows the
// same numbers. Nothing is recomputed here: group statistics come from the worker (the advantages
// stage, or the Doctor's report computed when the batch was imported).
import type { GroupStats } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { BatchSlice, RunResults } from './session.ts';

/**
 * Each group's reward mean / std: the advantages stage's; for a batch that came from a file (shown as
 * imported, or stepped from it), the Doctor's on import; null when neither has them (no rewards).
 */
export function groupStats(s: Pick<BatchSlice, 'run' | 'imported' | 'batchOrigin' | 'stepFrom'>): GroupStats[] | null {
  if (s.run.advantages?.groups) return s.run.advantages.groups;
  const fromFile = s.batchOrigin === 'import' || (s.batchOrigin === 'step' && s.stepFrom === 'import');
  return (fromFile && s.imported?.report.groups) || null;
}

/** Names of the rewards_per_func columns: the reward stage's, else "reward f". */
export function rewardNames(batch: GrpoBatch, run: RunResults): string[] {
  const F = batch.rewards_per_func?.[0]?.length ?? 0;
  return run.reward?.names ?? Array.from({ length: F }, (_, f) => `reward ${f}`);
}
