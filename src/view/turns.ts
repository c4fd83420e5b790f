// A row's conversation as turns (issue 25, item 1): which span of prompt_ids ⧺ completion_ids is the system
// prompt, a user message, an assistant turn, its tool call or a tool response, and each turn's sums (tokens,
// tokens in the loss, Σ loss, Σ KL, Σ |mismatch|). Two sources, the better first:
// - render: the template round-trip proof (src/tokenize/roundtrip.ts, run by the Doctor in the worker where a
//   tokenizer fits and `messages` holds the whole conversation) — message index and role of every token, and
//   the runs of stored tokens that differ from the render (a re-tokenized tool call, a BPE seam);
// - masks: what the trainer's masks say without a tokenizer — TRL's tool_mask (0 = tool response) or a
//   verl / prime-rl multi-turn loss mask (completion_mask 0 inside the completion = environment tokens) split
//   the completion into alternating assistant / tool spans; the prompt is one span.
// Pure and per row (the grid asks only for the rows it draws), in src/view/ so the page and the saved report
// read the same turns. Positions are indices into prompt_ids[b] ⧺ completion_ids[b] (left padding included):
// grid column = position + P − prompt_ids[b].length.
import type { GrpoBatch } from '../io/batch.ts';
import type { ProvenDiff, ProvenRow, TurnRole } from '../io/turns.ts';

/** A span's role: a proven one, or the whole prompt where the masks are all there is. */
export type SpanRole = TurnRole | 'prompt';

export interface RowTurn {
  /** Index of the message in the conversation (render), or null (masks: messages unknown). */
  message: number | null;
  role: SpanRole;
  start: number;
  end: number;
  source: 'render' | 'masks';
}

export interface RowTurns {
  /** Contiguous, in order, covering the row's real tokens (first real prompt token … completion's real end). */
  spans: RowTurn[];
  /** Stored runs that differ from the render (render only), with their cause. */
  diffs: ProvenDiff[];
  /** Why the render could not be used for this row, where it was tried (the spans then come from the masks). */
  note?: string;
}

/** The turn names the grid and the inspector show. */
export const ROLE_NAMES: Record<SpanRole, string> = { prompt: 'prompt', system: 'system', user: 'user', assistant: 'assistant', tool_call: 'tool call', tool: 'tool response' };

/** End (exclusive) of the last 1 in a mask row, or 0. */
const lastOneEnd = (m: readonly number[] | undefined) => {
  for (let j = (m?.length ?? 0) - 1; j >= 0; j--) if (m![j] === 1) return j + 1;
  return 0;
};

/** The real tokens of row b: the first real prompt position and the end of the completion, as positions. */
export function realRange(batch: GrpoBatch, b: number): [number, number] {
  const p = batch.prompt_ids[b] ?? [];
  const pm = batch.prompt_mask?.[b];
  let first = 0;
  if (pm) while (first < p.length && pm[first] !== 1) first++;
  else while (first < p.length && p[first] === batch.pad_token_id) first++;
  const c = batch.completion_ids[b] ?? [];
  // The completion's loss mask ends it (a multi-turn row has an EOS at every turn's end); else the trailing padding.
  let end = Math.min(c.length, lastOneEnd(batch.completion_mask[b]));
  if (end === 0) for (end = c.length; end > 0 && c[end - 1] === batch.pad_token_id; end--);
  return [first, p.length + end];
}

/** Turns from the masks: the prompt as one span, then assistant / tool spans where tool_mask or an interior completion_mask is 0. */
export function maskTurns(batch: GrpoBatch, b: number): RowTurn[] {
  const [first, end] = realRange(batch, b);
  const Lp = batch.prompt_ids[b]?.length ?? 0;
  const spans: RowTurn[] = [];
  const push = (role: SpanRole, s: number, e: number) => {
    const last = spans[spans.length - 1];
    if (last?.role === role && last.end === s) last.end = e;
    else if (e > s) spans.push({ message: null, role, start: s, end: e, source: 'masks' });
  };
  push('prompt', first, Lp);
  const cm = batch.completion_mask[b] ?? [];
  const tm = batch.tool_mask?.[b];
  // Positions before `end` whose mask is 0: end is the last 1 of completion_mask, so a 0 there lies inside the completion.
  for (let p = Math.max(first, Lp); p < end; p++) push(tm?.[p - Lp] === 0 || cm[p - Lp] === 0 ? 'tool' : 'assistant', p, p + 1);
  return spans;
}

/** A row's turns: the proven ones where the row was proven, else the masks'. */
export function rowTurns(batch: GrpoBatch, b: number, proven?: ProvenRow | null): RowTurns {
  if (proven && 'spans' in proven && proven.spans.length > 0) return { spans: proven.spans.map((s) => ({ ...s, source: 'render' as const })), diffs: proven.diffs };
  return { spans: maskTurns(batch, b), diffs: [], ...(proven && 'error' in proven ? { note: proven.error } : {}) };
}

/** Index of the span holding position p, or −1 (binary search: spans are contiguous and in order). */
export function spanAt(spans: readonly RowTurn[], p: number): number {
  let [lo, hi] = [0, spans.length - 1];
  while (lo <= hi) {
    const m = (lo + hi) >> 1;
    if (p < spans[m].start) hi = m - 1;
    else if (p >= spans[m].end) lo = m + 1;
    else return m;
  }
  return -1;
}

/** A per-token value at completion position j of sample b, or undefined where there is none. */
export type PerToken = (b: number, j: number) => number | undefined;

/** The per-token arrays a turn's sums read, those the page holds (each may be missing). */
export interface TurnInputs {
  loss?: PerToken;
  kl?: PerToken;
  /** trainer − sampler log-prob. */
  mismatch?: PerToken;
  /** The trainer preset's effective loss mask (0 removes the token). */
  effective?: PerToken;
}

export interface TurnSums {
  tokens: number;
  /** Completion tokens with completion_mask × tool_mask × effective mask ≠ 0. */
  loss_tokens: number;
  /** Σ per-token loss and Σ KL over the loss tokens (null: no such array); Σ |trainer − sampler| over the tokens that have one. */
  loss: number | null;
  kl: number | null;
  mismatch: number | null;
}

/** Each span's sums over its tokens (one pass over the row). */
export function turnSums(batch: GrpoBatch, b: number, spans: readonly RowTurn[], inputs: TurnInputs = {}): TurnSums[] {
  const Lp = batch.prompt_ids[b]?.length ?? 0;
  const cm = batch.completion_mask[b] ?? [];
  const tm = batch.tool_mask?.[b];
  const { loss, kl, mismatch, effective } = inputs;
  return spans.map(({ start, end }) => {
    const s: TurnSums = { tokens: end - start, loss_tokens: 0, loss: loss ? 0 : null, kl: kl ? 0 : null, mismatch: mismatch ? 0 : null };
    for (let p = Math.max(start, Lp); p < end; p++) {
      const j = p - Lp;
      const d = mismatch?.(b, j);
      if (d !== undefined && Number.isFinite(d)) s.mismatch! += Math.abs(d);
      if ((cm[j] ?? 0) * (tm?.[j] ?? 1) * (effective?.(b, j) ?? 1) === 0) continue;
      s.loss_tokens++;
      if (s.loss !== null) s.loss += loss!(b, j) ?? 0;
      if (s.kl !== null) s.kl += kl!(b, j) ?? 0;
    }
    return s;
  });
}

/**
 * Whether the batch has turns worth drawing: tool_mask, conversations in `messages`, or a completion_mask 0
 * inside some completion (verl / prime-rl multi-turn). The last scans the masks, stopping at the first hit.
 */
export function hasTurns(batch: GrpoBatch): boolean {
  if (batch.tool_mask || batch.messages?.some((m) => Array.isArray(m) && m.some((x) => x?.role === 'assistant'))) return true;
  return batch.completion_mask.some((m) => {
    const end = lastOneEnd(m);
    for (let j = 0; j < end; j++) if (m[j] === 0) return true;
    return false;
  });
}
