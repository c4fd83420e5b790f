// The compared tokens of a mismatch analysis, flat: every token with loss_mask 1 where both sides are
// finite, with d = trainer − sampler, both sides, row and position — what the statistics (analysis.ts) and
// the diagnoses (diagnoses.ts) read; and each position's assistant turn. Its own module so the two read
// it without importing each other.
import type { LogpSide, MismatchInput } from './types.ts';

/** The compared tokens, flat: d, both sides, row and position; rowStart[b]..rowStart[b+1] are row b's. */
export interface Compared {
  n: number;
  d: Float64Array; // trainer − sampler
  sampler: Float64Array;
  trainer: Float64Array;
  row: Int32Array;
  pos: Int32Array;
  rowStart: Int32Array; // (B + 1)
  nonfinite: number;
}

/** Gathers every token with loss_mask 1 where both sides are finite. */
export function compare(x: MismatchInput, trainer: LogpSide = x.trainer): Compared {
  const B = x.completion_ids.length;
  let cap = 0;
  for (let b = 0; b < B; b++) cap += x.loss_mask[b]?.length ?? 0;
  const d = new Float64Array(cap);
  const s = new Float64Array(cap);
  const t = new Float64Array(cap);
  const row = new Int32Array(cap);
  const pos = new Int32Array(cap);
  const rowStart = new Int32Array(B + 1);
  let n = 0;
  let nonfinite = 0;
  for (let b = 0; b < B; b++) {
    rowStart[b] = n;
    const m = x.loss_mask[b] ?? [];
    const sr = x.sampler.logps[b] ?? [];
    const tr = trainer.logps[b] ?? [];
    for (let p = 0; p < m.length; p++) {
      if (m[p] !== 1) continue;
      const sv = sr[p];
      const tv = tr[p];
      if (!(Number.isFinite(sv) && Number.isFinite(tv))) {
        nonfinite++;
        continue;
      }
      d[n] = tv - sv;
      s[n] = sv;
      t[n] = tv;
      row[n] = b;
      pos[n] = p;
      n++;
    }
  }
  rowStart[B] = n;
  return { n, d: d.subarray(0, n), sampler: s.subarray(0, n), trainer: t.subarray(0, n), row: row.subarray(0, n), pos: pos.subarray(0, n), rowStart, nonfinite };
}

/** The 1-based assistant turn of each position: a run of tool_mask 0 (a tool response) ends a turn. */
export function turnsOf(tool: ArrayLike<number> | undefined, C: number): Int32Array {
  const turn = new Int32Array(C).fill(1);
  if (!tool) return turn;
  let k = 1;
  for (let p = 0; p < C; p++) {
    if (p > 0 && tool[p] !== 0 && tool[p - 1] === 0) k++;
    turn[p] = k;
  }
  return turn;
}
