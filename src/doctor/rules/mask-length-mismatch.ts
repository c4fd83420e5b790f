// mask-length-mismatch: a per-token array whose row length differs from its id row. In PyTorch this is
// a shape error deep inside the loss (seed 000: completion_mask 101 vs completion_ids 99, then padded to
// different widths), or — worse — a silent misalignment when both are padded to the same width.
//
// Three forms are reported, one finding per sample and field (the tool_mask facts of a row joined in one):
// 1. Row lengths differ: a row of completion_mask, tool_mask or another per-token field is longer or shorter
//    than its completion_ids row (prompt_mask: prompt_ids). Unpadded rows, and padded tensors of different
//    widths (a mask tensor wider than its ids: every row is reported).
// 2. The padded form of a tool mask longer than its completion (seed 003, TRL #5145): TRL right-pads tool_mask
//    with 1, so once rows are padded to one width (B, C) the lengths agree and only the values tell. The
//    completion's real length R is completion_mask's last 1 + 1 (TRL builds completion_mask as ones over
//    completion_ids_list[i], right-padded with 0); for a row whose completion_mask has no 1 at all (masked out
//    whole: mask_truncated_completions), R is the first pad after the real tokens — the start of the row's
//    trailing run of pad ids, plus one when the pad id is an EOS id (that first "pad" is the completion's own
//    EOS) — and a tool_mask row of all 0 there is TRL's own masking, not a finding. A tool_mask value other than
//    1 at a position ≥ R means the tool mask was built for a longer completion: its effective length E is one
//    past its last value ≠ 1. Rows where R comes from the pad id give a warning, not an error, when the caller
//    says the pad id (or EOS) was inferred.
// 3. The same bug with equal lengths, as TRL's re-tokenizing tool loop makes it (47-token turn re-tokenized to
//    41: tool_mask += [0] · (suffix − 6), so its 0s start 6 tokens into the tool output and end with it): every
//    run of tool_mask 0s must start right after the EOS that closes the assistant turn before it (toolShift).
//    Its real length is the EOS + 1, the tool mask's the start of the 0s. The opposite shift — the 0s start on
//    the turn's own EOS, so the EOS leaves the loss — is named too. Judged where each tool result follows the
//    EOS that ends its assistant turn: TRL's tool loop and OpenRLHF's agent (an error), batches that name no
//    trainer (a warning: that layout assumed); not verl's, whose sglang multi-turn rows train the chat
//    template's newline after the EOS. An inferred EOS makes it a warning.
// In the padded (B, C) form of the first case (the widths differ, TRL crashes on completion_mask · tool_mask)
// every row is reported; the row whose tool_mask also breaks 2 or 3 says so in its message.
import { msg } from '../util.ts';
import { PER_TOKEN_FIELDS } from '../../io/batch.ts';
import { completionEnd, inferredCaveat } from '../padding.ts';
import type { DoctorContext, Finding, Rule } from '../types.ts';

const TOOL_HINT = "TRL pads tool_mask with 1, so any other value past the completion's end — or tool-output 0s that start after the assistant turn's EOS instead of right at it — means tool_mask was built for a longer completion than completion_ids: in TRL's _tool_call_loop a re-tokenized tool turn came out shorter and tool_mask was extended from the old length, never truncated (TRL #5145). Inside the completion the tool-output 0s then sit on the wrong tokens. Truncate or pad tool_mask to the re-tokenized completion length before appending the post-tool tokens.";

const EARLY_HINT = "An assistant turn ends with its EOS, which the policy sampled and the loss trains; the tool output's 0s start right after it. Build the tool mask from the turn's ids including its EOS (an off-by-one against the generated length, or a template suffix that was cut before the EOS).";

/** Values of a tool_mask row past the completion's end that are not TRL's pad 1: how many, and its effective length. */
function pastEnd(row: readonly number[], from: number): { count: number; first: number; effective: number } | undefined {
  let count = 0;
  let first = -1;
  let last = -1;
  for (let t = Math.max(0, from); t < row.length; t++) {
    if (row[t] === 1) continue;
    count++;
    if (first < 0) first = t;
    last = t;
  }
  return count === 0 ? undefined : { count, first, effective: last + 1 };
}

/** The padded-form tool_mask check of one row: undefined when clean, else what the finding says. */
function toolPastEnd(ctx: DoctorContext, b: number, row: readonly number[]) {
  const { end, byPad } = completionEnd(ctx, b);
  // A row masked out whole with tool_mask all 0: TRL's mask_truncated_completions multiplies both masks.
  if (byPad && row.every((x) => x === 0)) return undefined;
  const past = pastEnd(row, end);
  if (!past) return undefined;
  const caveat = byPad ? inferredCaveat(ctx, ['pad_token_id', 'eos_token_ids']) : { severity: 'error' as const, note: '' };
  const how = byPad
    ? `completion_mask has no 1, so read from the ids: ${ctx.padIsEos ? 'through the EOS that starts its trailing pad ids' : 'up to its trailing pad ids'} (pad id ${ctx.pad})`
    : `completion_mask's last 1 at ${end - 1}`;
  const values = [...new Set(row.slice(end).filter((x) => x !== 1))].slice(0, 3).join('/');
  return { end, past, caveat, how, values };
}

/**
 * TRL's tool loop appends each tool result right after the assistant turn that called it, and that turn ends
 * with its EOS (vLLM / generate stop there; _get_tool_suffix_ids cuts the rendered template at the EOS); so does
 * OpenRLHF's agent (openrlhf/utils/agent.py: the action tokens as vLLM returned them, then the environment's
 * feedback). So every run of tool_mask 0s inside the completion starts right after an EOS id. A run that starts
 * k positions later, with the turn's EOS inside the model tokens before it, is seed 003 with equal lengths:
 * tool_mask was extended from the turn's length before re-tokenization (TRL #5145), so the first k tool-output
 * tokens are trained and the 0s are shifted ("late"). A run that starts on an EOS right after a trained token is
 * the opposite off-by-one ("early"): the turn's EOS is out of the loss. Only the first such run of a row is
 * named. Judged only where the model segment before the run holds an EOS (a turn cut by max_tokens has none).
 */
function toolShift(ctx: DoctorContext, b: number, row: readonly number[], end: number): { kind: 'late'; eos: number; start: number; shift: number } | { kind: 'early'; eos: number } | undefined {
  const ids = ctx.batch.completion_ids[b] ?? [];
  const trained = ctx.batch.completion_mask[b] ?? [];
  let segment = 0; // start of the model tokens before the current run
  for (let t = 0; t < Math.min(end, row.length, ids.length); t++) {
    if (row[t] === 1) continue;
    if (t > segment && ctx.eos.has(ids[t]) && row[t - 1] === 1 && trained[t - 1] === 1) return { kind: 'early', eos: t };
    let e = t - 1;
    while (e >= segment && !ctx.eos.has(ids[e])) e--;
    if (e >= segment && e + 1 < t) return { kind: 'late', eos: e, start: t, shift: t - (e + 1) };
    while (t < row.length && row[t] !== 1) t++;
    segment = t;
  }
  return undefined;
}

export const maskLengthMismatch: Rule = {
  id: 'mask-length-mismatch',
  title: 'Mask or per-token array length ≠ token count',
  severity: 'error',
  description: "completion_mask, tool_mask or a per-token log-prob row has a different length than completion_ids (or prompt_mask than prompt_ids) for a sample; in padded (B, C) tensors, a tool_mask whose values past the completion's real end (completion_mask's last 1) differ from TRL's pad value 1.",
  seed: '000 (DeepSeek-R1 custom mask is 2 tokens longer than the ids); 003 (TRL #5145: tool_mask longer after tool-call retokenization, its 0s past the completion end once padded with 1)',
  check(ctx) {
    const out: Finding[] = [];
    // The tool-output shift is judged where a tool result follows its turn's EOS: certain for a TRL or OpenRLHF
    // batch (the reader's mark), assumed (a warning) for a batch that names no trainer, not judged for verl.
    const judged = ctx.batch.trainer !== 'verl';
    const layoutCertain = ctx.batch.trainer === 'trl' || ctx.batch.trainer === 'openrlhf' || ctx.batch.config?.advantage_estimator === 'trl';
    const pairs: [string, number[][] | undefined, 'completion_ids' | 'prompt_ids'][] = [
      ...PER_TOKEN_FIELDS.map((f) => [f, ctx.batch[f], 'completion_ids'] as [string, number[][] | undefined, 'completion_ids']),
      ['prompt_mask', ctx.batch.prompt_mask, 'prompt_ids'],
    ];
    for (const [field, rows, idsField] of pairs) {
      if (!rows) continue;
      const ids = ctx.batch[idsField];
      for (let b = 0; b < Math.min(rows.length, ids.length); b++) {
        const n = rows[b].length;
        const m = ids[b].length;
        const tool = field === 'tool_mask' ? toolPastEnd(ctx, b, rows[b]) : undefined;
        const shift = field === 'tool_mask' && judged ? toolShift(ctx, b, rows[b], completionEnd(ctx, b).end) : undefined;
        // An inferred EOS makes the shift a warning; so does a batch that names no trainer (TRL's layout assumed).
        const shiftCaveat = shift ? inferredCaveat(ctx, ['eos_token_ids']) : undefined;
        if (shiftCaveat && !layoutCertain) [shiftCaveat.severity, shiftCaveat.note] = ['warning', `${shiftCaveat.note} (a tool result right after its turn's EOS assumed, as TRL's tool loop and OpenRLHF's agent lay it: the batch names no trainer)`];
        const parts: string[] = [];
        if (tool) parts.push(`tool_mask runs past the completion's end — the completion has ${tool.end} real tokens (${tool.how}) but tool_mask's effective length is ${tool.past.effective} (${tool.past.count} value(s) ${tool.values} ≠ 1, TRL's pad, at positions ${tool.past.first}…${tool.past.effective - 1})${tool.caveat.note}`);
        if (shift?.kind === 'late') parts.push(`tool_mask's tool-output 0s start at ${shift.start}, ${shift.shift} position(s) after the assistant turn's EOS at ${shift.eos}: the turn has ${shift.eos + 1} tokens in completion_ids but tool_mask was built for ${shift.start}, so ${shift.shift} tool-output token(s) are trained${shiftCaveat!.note}`);
        if (shift?.kind === 'early') parts.push(`tool_mask's tool-output 0s start at ${shift.eos}, on the assistant turn's own EOS: the EOS that ends the turn is out of the loss (a tool mask built one position early: the token after the run is then tool output, trained)${shiftCaveat!.note}`);
        if (n !== m) {
          // Row lengths differ (unpadded rows, or padded tensors of different widths): one finding per row, the
          // tool_mask facts above appended, so the row that caused a width mismatch is told from the others.
          out.push({
            rule: this.id,
            severity: 'error',
            sample: b,
            field,
            span: [Math.min(n, m), Math.max(n, m)],
            message: msg`sample ${b}: ${field} has ${n} entries, ${idsField} has ${m} (${n > m ? `${n - m} extra` : `${m - n} missing`})${parts.length ? `; ${parts.join('; also ')}` : ''}`,
            hint: `Build ${field} from the same sliced/truncated ids it masks; never pad or extend one without the other. A constant offset (e.g. +2) points at template tokens counted in the mask only.${parts.length ? ` ${TOOL_HINT}` : ''}`,
          });
          continue;
        }
        if (parts.length === 0) continue;
        const certain = (tool && tool.caveat.severity === 'error') || (shiftCaveat && shiftCaveat.severity === 'error');
        out.push({
          rule: this.id,
          severity: certain ? 'error' : 'warning',
          sample: b,
          field,
          span: tool ? [tool.end, tool.past.effective] : shift!.kind === 'late' ? [shift!.eos + 1, shift!.start] : [shift!.eos, shift!.eos + 1],
          message: msg`sample ${b}: ${parts.join('; also ')}`,
          hint: tool || shift!.kind === 'late' ? TOOL_HINT : EARLY_HINT,
        });
      }
    }
    return out;
  },
};
