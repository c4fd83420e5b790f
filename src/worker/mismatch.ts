// The mismatch explorer's worker side: the train–inference analysis (src/grpo/mismatch, the same code as
// `grpo-studio mismatch` and the offline report) of the batch the page names, and its per-token log ratios
// packed into one Float32Array for the grid's heat, transferred rather than cloned, so opening the explorer on
// a 1,024 × 2,560 batch costs the page's thread a small report and an O(1) buffer hand-over.
import { analyseMismatch, logRatioRows, mismatchInputOf } from '../grpo/mismatch/analysis.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { MismatchResult, PackedLogRatio } from '../bridge/protocol.ts';

/** The rows of logRatioRows in one buffer: row b is values[offsets[b] … offsets[b + 1]). */
export function packLogRatio(rows: readonly ArrayLike<number>[]): PackedLogRatio {
  const offsets = new Int32Array(rows.length + 1);
  for (let b = 0; b < rows.length; b++) offsets[b + 1] = offsets[b] + rows[b].length;
  const values = new Float32Array(offsets[rows.length]);
  rows.forEach((row, b) => values.set(row, offsets[b]));
  return { values, offsets };
}

/**
 * The analysis of `batch`: its sampler side against its trainer side (old_per_token_logps), or against
 * `sides` scored with the loaded model (the trainer with its adapter, the base without). A batch without one
 * of the sides answers `missing` with the analysis' own message (the field it lacks), not an error.
 */
export function mismatchOf(
  batch: GrpoBatch,
  opts: { sides: { trainer: number[][]; base: number[][] | null } | null; tokenizer: { special_ids: ReadonlySet<number>; tokenText: (id: number) => string } | null },
): MismatchResult {
  const t0 = performance.now();
  const { sides, tokenizer } = opts;
  let input;
  try {
    input = mismatchInputOf(batch, {
      ...(sides ? { trainer: { source: 'recomputed', logps: sides.trainer } } : {}),
      ...(sides?.base ? { base: { source: 'recomputed_base', logps: sides.base } } : {}),
      ...(tokenizer ? { special_ids: tokenizer.special_ids, tokenText: tokenizer.tokenText } : {}),
    });
  } catch (e) {
    if (e instanceof Error && e.name === 'InputError') return { report: null, missing: e.message, log_ratio: null, recomputed: !!sides, ms: performance.now() - t0 };
    throw e;
  }
  const report = analyseMismatch(input);
  return { report, missing: null, log_ratio: packLogRatio(logRatioRows(input)), recomputed: !!sides, ms: performance.now() - t0 };
}

/** The buffers of a result that move to the page instead of being copied. */
export const transferOf = (r: MismatchResult): Transferable[] => (r.log_ratio ? [r.log_ratio.values.buffer, r.log_ratio.offsets.buffer] : []);
