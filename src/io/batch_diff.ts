// Two batches compared token by token (two imports, or an update's batch against the one it started
// from): rows aligned by index, on their real tokens only — a trainer dump pads every row to the batch's
// widest (prompts on the left, prompt_mask 0; completions on the right, pad_token_id with completion_mask 0)
// while the page keeps rows unpadded, so padding is stripped before comparing: prompts aligned at their
// right end, completions at their start. Every changed id and mask entry by position, changed rewards and
// advantages (equal within an f32 round trip: a dump written from float32 tensors reads 1.2 as
// 1.2000000476837158), config keys that differ, and a summary of what differs; and two token rows aligned
// (alignTokens) for a prompt rendered with two templates. Pure: the page, the worker and the tests share it.
import type { GrpoBatch } from './batch.ts';

export interface RowDiff {
  sample: number;
  /** Real prompt positions counted back from the boundary (1 = the last prompt token) whose id differs or exists on one side only. */
  prompt_from_end: number[];
  /** Real completion positions whose id differs or exists on one side only. */
  completion: number[];
  /** Real completion positions whose completion_mask entry differs (or exists on one side only). */
  completion_mask: number[];
  reward: [number | null, number | null] | null;
  advantage: [number | null, number | null] | null;
}

export interface BatchDiff {
  rows: [number, number]; // B of each side
  /** Rows present on both sides with at least one difference. */
  changed: RowDiff[];
  summary: { rows_changed: number; prompt_tokens: number; completion_tokens: number; mask_entries: number; rewards: number; advantages: number; config: string[]; only_in_one: number };
  /** Pad positions left out of the comparison, over both sides (prompt_mask 0; trailing pad_token_id with completion_mask 0). */
  pad_ignored: number;
  /** Relative tolerance rewards and advantages are compared with (NUMBER_TOLERANCE). */
  tolerance: number;
}

/**
 * Rewards and advantages that differ by at most this much relative to the larger are equal: one f32 ulp
 * (2^-23), which covers a float64 value written through a float32 tensor and back (rounding is ≤ 2^-24).
 */
export const NUMBER_TOLERANCE = 2 ** -23;

const same = (x: number | undefined, y: number | undefined) => x === y || (Number.isNaN(x) && Number.isNaN(y));
const close = (x: number | undefined, y: number | undefined) =>
  same(x, y) || (x !== undefined && y !== undefined && Math.abs(x - y) <= NUMBER_TOLERANCE * Math.max(Math.abs(x), Math.abs(y)));

/** Positions where two rows differ; `fromEnd` aligns them at their last element. */
function rowDiff(x: readonly number[], y: readonly number[], fromEnd = false): number[] {
  const out: number[] = [];
  for (let k = 0; k < Math.max(x.length, y.length); k++) {
    const [u, v] = fromEnd ? [x[x.length - 1 - k], y[y.length - 1 - k]] : [x[k], y[k]];
    if (!same(u, v)) out.push(fromEnd ? k + 1 : k);
  }
  return out;
}

const pair = (a: number[] | undefined, b: number[] | undefined, i: number): [number | null, number | null] | null => {
  const [u, v] = [a?.[i], b?.[i]];
  return close(u, v) ? null : [u ?? null, v ?? null];
};

/** Row i's real prompt ids: those with prompt_mask 1 (all of them without a mask: the page's rows are unpadded). */
function realPrompt(batch: GrpoBatch, i: number): number[] {
  const ids = batch.prompt_ids[i] ?? [];
  const mask = batch.prompt_mask?.[i];
  return mask ? ids.filter((_, k) => mask[k] !== 0) : ids;
}

/**
 * Row i's real completion length: the row without its trailing padding — pad_token_id with completion_mask 0
 * (TRL pads completions on the right with pad_token_id, grpo_trainer.py _generate_and_score_completions).
 * A masked real token (a truncated completion, mask 0) is not padding unless it is the pad id.
 */
function realCompletionLength(batch: GrpoBatch, i: number): number {
  const ids = batch.completion_ids[i] ?? [];
  const mask = batch.completion_mask[i] ?? [];
  let n = ids.length;
  while (n > 0 && ids[n - 1] === batch.pad_token_id && !mask[n - 1]) n--;
  return n;
}

export function diffBatches(a: GrpoBatch, b: GrpoBatch): BatchDiff {
  const n = Math.min(a.completion_ids.length, b.completion_ids.length);
  const changed: RowDiff[] = [];
  const s = { rows_changed: 0, prompt_tokens: 0, completion_tokens: 0, mask_entries: 0, rewards: 0, advantages: 0, config: [] as string[], only_in_one: Math.abs(a.completion_ids.length - b.completion_ids.length) };
  let pad = 0;
  for (let i = 0; i < n; i++) {
    const [pa, pb] = [realPrompt(a, i), realPrompt(b, i)];
    const [la, lb] = [realCompletionLength(a, i), realCompletionLength(b, i)];
    pad += (a.prompt_ids[i]?.length ?? 0) - pa.length + (b.prompt_ids[i]?.length ?? 0) - pb.length;
    pad += (a.completion_ids[i]?.length ?? 0) - la + (b.completion_ids[i]?.length ?? 0) - lb;
    const r: RowDiff = {
      sample: i,
      prompt_from_end: rowDiff(pa, pb, true),
      completion: rowDiff((a.completion_ids[i] ?? []).slice(0, la), (b.completion_ids[i] ?? []).slice(0, lb)),
      completion_mask: rowDiff((a.completion_mask[i] ?? []).slice(0, la), (b.completion_mask[i] ?? []).slice(0, lb)),
      reward: pair(a.rewards, b.rewards, i),
      advantage: pair(a.advantages, b.advantages, i),
    };
    if (r.prompt_from_end.length + r.completion.length + r.completion_mask.length === 0 && !r.reward && !r.advantage) continue;
    changed.push(r);
    s.rows_changed++;
    s.prompt_tokens += r.prompt_from_end.length;
    s.completion_tokens += r.completion.length;
    s.mask_entries += r.completion_mask.length;
    s.rewards += r.reward ? 1 : 0;
    s.advantages += r.advantage ? 1 : 0;
  }
  const ca = (a.config ?? {}) as Record<string, unknown>;
  const cb = (b.config ?? {}) as Record<string, unknown>;
  s.config = [...new Set([...Object.keys(ca), ...Object.keys(cb)])].filter((k) => JSON.stringify(ca[k]) !== JSON.stringify(cb[k])).sort();
  return { rows: [a.completion_ids.length, b.completion_ids.length], changed, summary: s, pad_ignored: pad, tolerance: NUMBER_TOLERANCE };
}

// ---------------------------------------------------------------------------------------------------------
// Two token rows aligned (a prompt rendered with two chat templates): where positions shift — a template
// that inserts "<think>\n\n</think>\n\n" moves everything after it — a positional diff marks every later
// token; an alignment marks only the inserted or removed ones.

/** One step of an alignment: a token on both sides, only in `a` (removed) or only in `b` (added); a / b are positions. */
export interface TokenOp {
  op: 'same' | 'removed' | 'added';
  a: number | null;
  b: number | null;
}

/** Edits beyond which alignTokens gives up: the trace it keeps grows with their square. */
export const MAX_TOKEN_EDITS = 4096;

/**
 * The shortest edit script from `a` to `b` (Myers' O((N + M)·D) diff, D = edits) as aligned steps in order.
 * Among equal alignments, a run of one-sided tokens is moved to start at a `boundary` token when one is in
 * reach (slideRuns). Throws RangeError when the rows differ in more than MAX_TOKEN_EDITS tokens.
 */
export function alignTokens(a: readonly number[], b: readonly number[], boundary?: (id: number) => boolean): TokenOp[] {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const N = a.length - pre - suf;
  const M = b.length - pre - suf;
  const x0 = (i: number) => a[pre + i];
  const y0 = (j: number) => b[pre + j];
  const off = N + M + 1;
  const v = new Int32Array(2 * off + 1); // v[off + k]: furthest x on diagonal k
  const trace: Int32Array[] = []; // trace[d]: v on diagonals −d…d before edit d (its square bounds the memory)
  let D = -1;
  for (let d = 0; d <= N + M && D < 0; d++) {
    if (d > MAX_TOKEN_EDITS) throw new RangeError(`the two renderings differ in more than ${MAX_TOKEN_EDITS} tokens: too different to align`);
    trace.push(v.slice(off - d, off + d + 1));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < N && y < M && x0(x) === y0(y)) [x, y] = [x + 1, y + 1];
      v[off + k] = x;
      if (x >= N && y >= M) {
        D = d;
        break;
      }
    }
  }
  const middle: TokenOp[] = [];
  let [x, y] = [N, M];
  for (let d = D; d > 0; d--) {
    const t = trace[d];
    const at = (k: number) => t[k + d];
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const pk = down ? k + 1 : k - 1;
    const px = at(pk);
    const py = px - pk;
    while (x > px && y > py) [x, y] = [x - 1, y - 1], middle.push({ op: 'same', a: pre + x, b: pre + y });
    if (down) middle.push({ op: 'added', a: null, b: pre + py });
    else middle.push({ op: 'removed', a: pre + px, b: null });
    [x, y] = [px, py];
  }
  while (x > 0 && y > 0) [x, y] = [x - 1, y - 1], middle.push({ op: 'same', a: pre + x, b: pre + y });
  const ops: TokenOp[] = [];
  for (let i = 0; i < pre; i++) ops.push({ op: 'same', a: i, b: i });
  for (let i = middle.length - 1; i >= 0; i--) ops.push(middle[i]);
  for (let i = 0; i < suf; i++) ops.push({ op: 'same', a: a.length - suf + i, b: b.length - suf + i });
  if (boundary) {
    slideRuns(ops, a, 'removed', 'a', boundary);
    slideRuns(ops, b, 'added', 'b', boundary);
  }
  return ops;
}

/**
 * Where an equal alignment allows it (the token before a run equals its last one, or the token after it
 * its first), moves each run of one-sided tokens to start at a boundary token — `boundary` marks them,
 * e.g. special tokens such as <|im_start|> — so a template that drops "<|im_start|>system…<|im_end|>\n"
 * shows that block removed, not "system…\n<|im_start|>". Without a boundary in reach, the run stays.
 */
function slideRuns(ops: TokenOp[], row: readonly number[], kind: 'removed' | 'added', k: 'a' | 'b', boundary: (id: number) => boolean): void {
  const left = (s: number, e: number) => {
    const same = ops[s - 1];
    const last = ops[e][k]!;
    for (let i = s; i <= e; i++) ops[i] = { ...ops[i], [k]: ops[i][k]! - 1 };
    ops.splice(s - 1, 1);
    ops.splice(e, 0, { ...same, [k]: last });
  };
  const right = (s: number, e: number) => {
    const same = ops[e + 1];
    const first = ops[s][k]!;
    for (let i = s; i <= e; i++) ops[i] = { ...ops[i], [k]: ops[i][k]! + 1 };
    ops.splice(e + 1, 1);
    ops.splice(s, 0, { ...same, [k]: first });
  };
  const canLeft = (s: number, e: number) => s > 0 && ops[s - 1].op === 'same' && row[ops[s - 1][k]!] === row[ops[e][k]!];
  const canRight = (s: number, e: number) => e + 1 < ops.length && ops[e + 1].op === 'same' && row[ops[e + 1][k]!] === row[ops[s][k]!];
  for (let s = 0; s < ops.length; s++) {
    if (ops[s].op !== kind || ops[s - 1]?.op === kind) continue;
    let e = s;
    while (ops[e + 1]?.op === kind) e++;
    if (boundary(row[ops[s][k]!])) {
      s = e;
      continue;
    }
    let shifted = 0;
    while (canLeft(s, e) && !boundary(row[ops[s][k]!])) [left(s, e), s--, e--, shifted--];
    while (!boundary(row[ops[s][k]!]) && canRight(s, e)) [right(s, e), s++, e++, shifted++];
    for (; !boundary(row[ops[s][k]!]) && shifted < 0; shifted++) [right(s, e), s++, e++];
    for (; !boundary(row[ops[s][k]!]) && shifted > 0; shifted--) [left(s, e), s--, e--];
    s = e;
  }
}
