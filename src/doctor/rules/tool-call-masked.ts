// tool-call-masked: a tool call the policy wrote that tool_mask keeps out of the loss. tool_mask exists to zero
// tool results (huggingface/trl trl/trainer/grpo_trainer.py: "0 for tool result tokens, 1 elsewhere"); a 0 on
// a span the chat template renders as a tool call drops the policy's action from training without a word. The
// tool loop TRL ran before huggingface/trl#5242 does exactly this when the model writes a call more compactly
// than the template re-renders it: the call comes back longer, the mask's 1s were counted for the sampled
// length, so the call's last tokens fall under the tool block's 0s — the mirror of tool-tokens-in-loss, where a
// longer sampled call lets tool output in. Only tool-call spans are judged: a trainer may mean to mask other
// assistant text (earlier turns' reasoning), never the call it rewards. Needs the render's turns
// (src/tokenize/roundtrip.ts): without them a 0 of tool_mask is what it says.
import type { Finding, Rule } from '../types.ts';
import { firstRun, msg } from '../util.ts';
import { located, roundTrips, turnName } from '../turns.ts';

export const toolCallMasked: Rule = {
  id: 'tool-call-masked',
  title: 'A tool call the policy wrote is out of the loss',
  severity: 'error',
  description: 'A span the chat template renders as a tool call has completion tokens with completion_mask 1 but tool_mask 0: the policy wrote them and they are not trained (the row, turn and positions named).',
  seed: '003 (TRL #5145, the other direction: a call re-rendered longer than sampled, the mask built for the sampled length)',
  needsTokenizer: true,
  check(ctx) {
    const { batch } = ctx;
    if (!batch.tool_mask) return 'needs tool_mask';
    const trips = roundTrips(ctx);
    if (typeof trips === 'string') return trips;
    const out: Finding[] = [];
    for (const [b, trip] of trips) {
      if (!('report' in trip)) continue;
      const P = trip.prompt_length;
      for (const turn of trip.report.turns) {
        if (turn.role !== 'tool_call' || turn.end <= P) continue;
        const at: number[] = [];
        for (let s = Math.max(turn.start, P); s < turn.end; s++) if (batch.completion_mask[b]?.[s - P] === 1 && batch.tool_mask[b]?.[s - P] === 0) at.push(s);
        const run = firstRun(at);
        if (!run) continue;
        const where = located(run.span, P);
        out.push({
          rule: this.id, severity: 'error', sample: b, ...where,
          message: msg`sample ${b}, ${turnName(turn.message, turn.role)}: ${run.count} of its ${turn.end - turn.start} tokens have tool_mask 0 (first run at completion positions ${where.span[0]}…${where.span[1] - 1}): the policy wrote them and they are not trained`,
          hint: 'tool_mask is 0 on tool results only. A mask that reaches into the call was built for another length than the ids it masks: when a turn is re-tokenized, rebuild tool_mask from the new ids (TRL #5145), or concatenate ids instead of re-rendering (TRL #5242).',
        });
      }
    }
    return out;
  },
};
