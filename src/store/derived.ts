// Facts the charts and inspectors read about the batch on screen, in one place so every panel shows the
// same numbers. Nothing is recomputed here: group statistics come from the worker (the advantages
// stage, or the Doctor's report computed when the batch was imported).
import type { GroupStats } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { BatchSlice, RunResults } from './session.ts';
import type { StudioState } from './index.ts';
import type { LossSettings, StepSettings } from '../worker/protocol.ts';
import { diffBatches, type BatchDiff } from '../io/batch_diff.ts';

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

let lastDiff: { a: GrpoBatch; b: GrpoBatch; diff: BatchDiff } | null = null;

/** The batch on screen against the pinned diff base (null without one, or when it is the same batch); memoised on the pair. */
export function batchDiff(s: Pick<StudioState, 'batch' | 'diffBase'>): BatchDiff | null {
  const a = s.diffBase?.batch;
  const b = s.batch;
  if (!a || !b || a === b) return null;
  if (lastDiff?.a !== a || lastDiff.b !== b) lastDiff = { a, b, diff: diffBatches(a, b) };
  return lastDiff.diff;
}
