// tool-tokens-in-loss: tool-response tokens with loss weight ≠ 0. A tool's output is the environment's text,
// not the policy's: TRL marks it tool_mask 0 and trains completion_mask × tool_mask (huggingface/trl
// trl/trainer/grpo_trainer.py, _compute_loss: `mask = completion_mask * tool_mask`), verl gives it
// response_mask 0 (verl/experimental/agent_loop/tool_agent_loop.py). Two ways the weight leaks:
// 1. The render (src/tokenize/roundtrip.ts) says a span is a tool response, yet completion_mask and tool_mask
//    are both 1 there: no tool_mask at all, or one built for another length — TRL #5145 (seed 003): after the
//    tool call was re-tokenized shorter, tool_mask was extended from the old length, so its 0s start late or
//    run past the completion and the first tool-output tokens are trained.
// 2. Without a render (no tokenizer given): the batch's effective loss mask counts tokens tool_mask zeroes
//    (a loss that used completion_mask without tool_mask).
import type { Finding, Rule } from '../types.ts';
import { firstRun, msg } from '../util.ts';
import { located, roundTrips, turnName } from '../turns.ts';

const HINT = "Give every token of a tool result loss weight 0 (TRL: tool_mask 0, multiplied into completion_mask by the loss; verl: response_mask 0), and build the mask from the same ids it masks: when a tool turn is re-tokenized, truncate or pad tool_mask to the new length before appending the tool block (TRL #5145), or concatenate ids instead of re-rendering (TRL #5242).";

export const toolTokensInLoss: Rule = {
  id: 'tool-tokens-in-loss',
  title: 'Tool-response tokens are trained',
  severity: 'error',
  description: "A span the chat template renders as a tool response has tokens with completion_mask × tool_mask ≠ 0 (the row, turn and positions named), or the batch's effective loss mask counts tokens its tool_mask zeroes.",
  seed: '003 (TRL #5145: tool_mask built for the pre-re-tokenization length, its 0s off the tool output)',
  // The render check waits with the other tokenizer rules (the page's import defers them); with no tokenizer
  // at all the rule still runs its mask check.
  needsTokenizer: true,
  check(ctx) {
    const out: Finding[] = [];
    const { batch } = ctx;
    const byMask = !!(batch.tool_mask && batch.effective_loss_mask);
    if (byMask) {
      for (let b = 0; b < ctx.B; b++) {
        const [tool, eff] = [batch.tool_mask![b] ?? [], batch.effective_loss_mask![b] ?? []];
        const at: number[] = [];
        for (let t = 0; t < Math.min(tool.length, eff.length); t++) if (tool[t] === 0 && eff[t] !== 0) at.push(t);
        const run = firstRun(at);
        if (!run) continue;
        out.push({
          rule: this.id, severity: 'error', sample: b, field: 'effective_loss_mask', span: run.span,
          message: msg`sample ${b}: the effective loss mask trains ${run.count} token(s) tool_mask marks as tool output (first at ${run.span[0]}…${run.span[1] - 1}): the loss used completion_mask without tool_mask`,
          hint: HINT,
        });
      }
    }
    const trips = roundTrips(ctx);
    if (typeof trips === 'string') return byMask ? out : `the render check ${trips}; the mask check needs tool_mask and effective_loss_mask`;
    for (const [b, trip] of trips) {
      if (!('report' in trip)) continue;
      const P = trip.prompt_length;
      const loss = (t: number) => (batch.completion_mask[b]?.[t] ?? 0) * (batch.tool_mask?.[b]?.[t] ?? 1);
      for (const turn of trip.report.turns) {
        if (turn.role !== 'tool' || turn.end <= P) continue;
        const at: number[] = [];
        for (let s = Math.max(turn.start, P); s < turn.end; s++) if (loss(s - P) !== 0) at.push(s);
        const run = firstRun(at);
        if (!run) continue;
        const where = located(run.span, P);
        out.push({
          rule: this.id, severity: 'error', sample: b, ...where,
          message: msg`sample ${b}, ${turnName(turn.message, turn.role)}: ${run.count} of its ${turn.end - turn.start} tokens are in the loss (completion_mask 1 and ${batch.tool_mask ? 'tool_mask 1' : 'no tool_mask'}; first run at completion positions ${where.span[0]}…${where.span[1] - 1})`,
          hint: HINT,
        });
      }
    }
    return out;
  },
};
