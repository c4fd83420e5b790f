// Where a completion really ends inside a right-padded (B, C) row, as TRL writes it
// (huggingface/trl trl/trainer/grpo_trainer.py, _generate_and_score_completions): completion_ids are padded
// with pad_token_id, completion_mask = ones over completion_ids_list[i] padded with 0, tool_mask padded with 1,
// sampling log-probs padded with 0; with mask_truncated_completions a truncated row gets completion_mask (and,
// in recent TRL, tool_mask) all 0. The trainer readers (src/io/formats) keep rows padded as written and pad a
// split tool_mask with 1 too, so these definitions hold for every imported batch. Each is linear in the row.
import type { DoctorContext } from './types.ts';

/** Start of the trailing run of `pad` ids in a row (the row's length when it does not end with a pad). */
export function trailingPadStart(ids: readonly number[], pad: number): number {
  let n = ids.length;
  while (n > 0 && ids[n - 1] === pad) n--;
  return n;
}

/**
 * The completion's real length read from the ids alone: the position of the first pad after the real tokens,
 * i.e. the start of the row's trailing run of pad ids. When the pad id is an EOS id, the first id of that run
 * is the completion's own EOS (TRL keeps the EOS in completion_ids), so it counts as real: start + 1. EOS ids
 * inside the row (multi-turn completions end each assistant turn with one) do not end it.
 */
export function padEnd(ctx: DoctorContext, b: number): number {
  const ids = ctx.batch.completion_ids[b] ?? [];
  const start = trailingPadStart(ids, ctx.pad);
  return ctx.padIsEos && start < ids.length ? start + 1 : start;
}

/** One past the last 1 of a mask row (0 when it has none). */
export function lastOneEnd(mask: readonly number[] | undefined): number {
  return mask ? mask.lastIndexOf(1) + 1 : 0;
}

/**
 * The completion's real length for the checks of values past its end:
 * - completion_mask's last 1 + 1 when the row has a 1 (TRL: exactly len(completion_ids_list[i]); independent
 *   of the pad and EOS ids, so never an inference);
 * - else (a row masked out whole, e.g. mask_truncated_completions) the ids' pad end (padEnd), which depends on
 *   the pad id — `byPad` says so, so a finding on it can be downgraded when the pad id was inferred.
 */
export function completionEnd(ctx: DoctorContext, b: number): { end: number; byPad: boolean } {
  const m = lastOneEnd(ctx.batch.completion_mask[b]);
  return m > 0 ? { end: m, byPad: false } : { end: padEnd(ctx, b), byPad: true };
}

/**
 * What the caller says was inferred (not read from the file or a tokenizer) among the values a finding
 * depends on. An inferred id never raises an error: the finding becomes a warning naming the inference.
 */
export function inferredCaveat(ctx: DoctorContext, uses: readonly ('pad_token_id' | 'eos_token_ids')[]): { severity: 'error' | 'warning'; note: string } {
  const inferred = ctx.options.inferred ?? {};
  const named = uses.filter((k) => inferred[k] !== undefined).map((k) => `${k === 'pad_token_id' ? `pad id ${ctx.pad}` : `EOS ids [${[...ctx.eos].join(', ')}]`} inferred (${inferred[k]})`);
  return named.length === 0 ? { severity: 'error', note: '' } : { severity: 'warning', note: ` — not certain: ${named.join('; ')}; pass the trainer's ids (a tokenizer or the dump's metadata) to confirm` };
}
