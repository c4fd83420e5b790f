// Small helpers shared by the Doctor's rules: locating runs of positions, naming tokens.
import type { DoctorContext } from './types.ts';

/** Positions → [start, end) of the first contiguous run, plus how many positions in all. */
export function firstRun(positions: number[]): { span: [number, number]; count: number } | undefined {
  if (positions.length === 0) return undefined;
  let end = positions[0] + 1;
  while (positions.includes(end)) end++;
  return { span: [positions[0], end], count: positions.length };
}

/** A token id as the user reads it: `id` or `id "text"` when a tokenizer is loaded. */
export function showToken(ctx: DoctorContext, id: number | undefined): string {
  if (id === undefined) return '(none)';
  const tok = ctx.options.tokenizer;
  return tok ? `${id} ${JSON.stringify(tok.decode([id]))}` : `${id}`;
}

/** "samples 0, 3, 7" with at most `max` listed. */
export function listSamples(samples: number[], max = 8): string {
  const head = samples.slice(0, max).join(', ');
  return samples.length > max ? `${head}, … (${samples.length} in all)` : head;
}

/** Index of the first difference between two id rows, or −1 if equal. */
export function firstDiff(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
