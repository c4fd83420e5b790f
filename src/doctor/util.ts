// Small helpers shared by the Doctor's rules: locating runs of positions, naming tokens.
import type { DoctorContext } from './types.ts';

/** Ascending positions → [start, end) of the first contiguous run, plus how many positions in all. Linear: rows may hold 400k tokens. */
export function firstRun(positions: readonly number[]): { span: [number, number]; count: number } | undefined {
  if (positions.length === 0) return undefined;
  let i = 1;
  while (i < positions.length && positions[i] === positions[0] + i) i++;
  return { span: [positions[0], positions[0] + i], count: positions.length };
}

/** The largest value of a list, or `init` when empty (no spread: `Math.max(...xs)` overflows the stack on 200k values). */
export function maxOf(values: Iterable<number>, init = 0): number {
  let m = init;
  for (const v of values) if (v > m) m = v;
  return m;
}

/**
 * The longest n such that the last n elements of `text` equal the first n of `pattern` (KMP: O(|text| +
 * |pattern|), where trying every n is quadratic in the row length).
 */
export function suffixPrefixOverlap(text: ArrayLike<unknown>, pattern: ArrayLike<unknown>): number {
  if (pattern.length === 0) return 0;
  const fail = new Int32Array(pattern.length); // fail[i]: longest proper border of pattern[0..i]
  for (let i = 1, k = 0; i < pattern.length; i++) {
    while (k > 0 && pattern[i] !== pattern[k]) k = fail[k - 1];
    if (pattern[i] === pattern[k]) k++;
    fail[i] = k;
  }
  let q = 0;
  for (let i = 0; i < text.length; i++) {
    while (q > 0 && (q === pattern.length || text[i] !== pattern[q])) q = fail[q - 1];
    if (text[i] === pattern[q]) q++;
  }
  return q;
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

/**
 * A number as a finding prints it: integers (sample indices, counts, ids) exactly, other finite values to 4
 * significant digits, so a float32 read back as float64 reads `-0.8`, not `-0.7999999523162842`.
 */
export function showNumber(v: number): string {
  return Number.isInteger(v) || !Number.isFinite(v) ? String(v) : String(Number(v.toPrecision(4)));
}

/** The template tag every rule builds its message with: each interpolated number goes through showNumber. */
export function msg(parts: TemplateStringsArray, ...values: unknown[]): string {
  let out = parts[0];
  values.forEach((v, i) => (out += (typeof v === 'number' ? showNumber(v) : String(v)) + parts[i + 1]));
  return out;
}
