// The round-trip proof (src/tokenize/roundtrip.ts) of every row that carries its whole conversation, run
// once per Doctor run and shared by the turn rules (tool-tokens-in-loss, turn-retokenization,
// reasoning-dropped). A row is proven only where it can be: a tokenizer that fits the batch (the caller's
// promise, src/doctor/tokenizer_fit.ts) with a chat template, and `messages` one conversation per sample
// holding at least one assistant turn. Each row costs a few renders of its own conversation, so the Doctor
// stays linear in the number of rows. The stored ids are the real prompt (prompt_mask 1, else the ids after
// the left padding) ⧺ the completion up
// to its real end (src/doctor/padding.ts completionEnd); the loss weight is completion_mask × tool_mask, as
// TRL's _compute_loss multiplies them.
import { roundTripProver, RoundTripError, WAYS, type RoundTripReport, type Way } from '../tokenize/roundtrip.ts';
import type { ProvenRow } from '../io/turns.ts';
import { completionEnd } from './padding.ts';
import type { DoctorContext } from './types.ts';

/**
 * Per row: its report, where its completion starts in the stored ids and where each real prompt token sits in
 * prompt_ids (the stored ids skip the padding), or why it could not be proven (the ids too different from the
 * render to align).
 */
export type RowRoundTrip = { report: RoundTripReport; prompt_length: number; prompt_index: number[] } | { error: string };

const memo = new WeakMap<DoctorContext, Map<number, RowRoundTrip> | string>();

/** The rows' round trips, or why none can run (a skip reason). */
export function roundTrips(ctx: DoctorContext): Map<number, RowRoundTrip> | string {
  if (!memo.has(ctx)) memo.set(ctx, prove(ctx));
  return memo.get(ctx)!;
}

function prove(ctx: DoctorContext): Map<number, RowRoundTrip> | string {
  const tok = ctx.options.tokenizer;
  if (!tok) return 'needs a tokenizer (--tokenizer DIR)';
  if (ctx.options.defer_tokenizer_rules) return ctx.options.defer_tokenizer_rules;
  if (!tok.has_chat_template) return 'the tokenizer has no chat template';
  const { batch } = ctx;
  if (!batch.messages || batch.messages.length !== ctx.B) return 'needs `messages` with one whole conversation per sample (assistant turns included)';
  const prover = roundTripProver(tok, { tools: batch.tools, template_kwargs: batch.config?.chat_template_kwargs, eos_token_ids: batch.eos_token_ids });
  const out = new Map<number, RowRoundTrip>();
  for (let b = 0; b < ctx.B; b++) {
    const conv = batch.messages[b];
    if (!Array.isArray(conv) || !conv.some((m) => m?.role === 'assistant')) continue;
    // The real prompt: prompt_mask 1, or without a mask the ids after the left padding.
    const pm = batch.prompt_mask?.[b];
    const ids = batch.prompt_ids[b];
    let first = 0;
    while (!pm && first < ids.length && ids[first] === ctx.pad) first++;
    const prompt_index = pm ? ids.flatMap((_, t) => (pm[t] === 1 ? [t] : [])) : Array.from({ length: ids.length - first }, (_, t) => first + t);
    const prompt = prompt_index.map((t) => ids[t]);
    const end = completionEnd(ctx, b).end;
    const completion = batch.completion_ids[b].slice(0, end);
    const loss = completion.map((_, t) => (batch.completion_mask[b]?.[t] ?? 0) * (batch.tool_mask?.[b]?.[t] ?? 1));
    try {
      out.set(b, { report: prover({ messages: conv, ids: [...prompt, ...completion], prompt_length: prompt.length, loss }), prompt_length: prompt.length, prompt_index });
    } catch (e) {
      if (!(e instanceof RoundTripError)) throw e;
      out.set(b, { error: e.message });
    }
  }
  return out.size > 0 ? out : 'no sample has a conversation with an assistant turn in `messages`';
}

/** A turn as findings name it: "turn 2 (tool response)". */
export const turnName = (message: number, role: string) => `turn ${message} (${role === 'tool' ? 'tool response' : role === 'tool_call' ? 'tool call' : role})`;

/** A stored span [start, end) of prompt ⧺ completion as a finding locates it: in completion_ids when it starts there, else in prompt_ids. */
export function located(span: readonly [number, number], promptLength: number): { field: 'completion_ids' | 'prompt_ids'; span: [number, number] } {
  return span[0] >= promptLength ? { field: 'completion_ids', span: [span[0] - promptLength, span[1] - promptLength] } : { field: 'prompt_ids', span: [span[0], Math.min(span[1], promptLength)] };
}

/** A text for a message: JSON-quoted, cut to `max` characters. */
export const quoted = (text: string, max = 48) => JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text);

/** The way with the fewest differing tokens (the first listed on a tie): the one the trainer evidently used. */
export function trainerWay(report: RoundTripReport): Way {
  const size = (w: Way) => report[w].stored_tokens + report[w].rendered_tokens;
  return (Object.keys(WAYS) as Way[]).reduce((best, w) => (size(w) < size(best) ? w : best));
}

/**
 * The proven rows' turns and differences as the report carries them to the grid (src/view/turns.ts): stored
 * positions moved to prompt_ids ⧺ completion_ids indices, the differences of the trainer's way. Undefined
 * where no row was proven; free once a turn rule ran (the proof is kept per Doctor run).
 */
export function provenTurns(ctx: DoctorContext): Record<number, ProvenRow> | undefined {
  const trips = roundTrips(ctx);
  if (typeof trips === 'string') return undefined;
  const out: Record<number, ProvenRow> = {};
  for (const [b, trip] of trips) {
    if ('error' in trip) {
      out[b] = { error: trip.error };
      continue;
    }
    const { report, prompt_length: pl, prompt_index } = trip;
    const Lp = ctx.batch.prompt_ids[b].length;
    const at = (s: number) => (s < pl ? prompt_index[s] : Lp + s - pl);
    // An end is one past its last token; an empty run [s, s) stays empty at s.
    const span = (s: number, e: number) => (e > s ? [at(s), at(e - 1) + 1] : [at(s), at(s)]);
    const way = trainerWay(report);
    out[b] = {
      way,
      spans: report.turns.map((t) => {
        const [start, end] = span(t.start, t.end);
        return { message: t.message, role: t.role, start, end };
      }),
      diffs: report[way].diffs.map((d) => {
        const [start, end] = span(d.stored[0], d.stored[1]);
        return { start, end, cause: d.cause, message: d.message };
      }),
    };
  }
  return out;
}
