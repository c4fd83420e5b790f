// The round-trip proof (src/tokenize/roundtrip.ts) of every row that carries its whole conversation, run
// once per Doctor run and shared by the turn rules (tool-tokens-in-loss, turn-retokenization,
// reasoning-dropped). A row is proven only where it can be: a tokenizer that fits the batch (the caller's
// promise, src/doctor/tokenizer_fit.ts) with a chat template, and `messages` one conversation per sample
// holding at least one assistant turn. Each row costs a few renders of its own conversation, so the Doctor
// stays linear in the number of rows. The stored ids are the real prompt (prompt_mask 1, else the ids after
// the left padding) ⧺ the completion up
// to its real end (src/doctor/padding.ts completionEnd); the loss weight is completion_mask × tool_mask, as
// TRL's _compute_loss multiplies them.
import { roundTripProver, RoundTripError, type RoundTripReport } from '../tokenize/roundtrip.ts';
import { completionEnd } from './padding.ts';
import type { DoctorContext } from './types.ts';

/** Per row: its report and where its completion starts in the stored ids, or why it could not be proven (the ids too different from the render to align). */
export type RowRoundTrip = { report: RoundTripReport; prompt_length: number } | { error: string };

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
    const prompt = pm ? ids.filter((_, t) => pm[t] === 1) : ids.slice(first);
    const end = completionEnd(ctx, b).end;
    const completion = batch.completion_ids[b].slice(0, end);
    const loss = completion.map((_, t) => (batch.completion_mask[b]?.[t] ?? 0) * (batch.tool_mask?.[b]?.[t] ?? 1));
    try {
      out.set(b, { report: prover({ messages: conv, ids: [...prompt, ...completion], prompt_length: prompt.length, loss }), prompt_length: prompt.length });
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
