// reasoning-dropped: a <think> block the chat template removes between turns while the loss covers it. Qwen3's
// template keeps the reasoning of assistant turns only after the last user query; rendered again (a rollout
// that re-renders the conversation for the next turn, a trainer that re-tokenizes it), an earlier turn loses
// its block. Then the next turn was sampled from a context without that reasoning while the stored row trains
// it in context — or the trainer's re-render no longer holds the tokens the loss weights. Found by the round
// trip (src/tokenize/roundtrip.ts): a block in the stored ids that the full render lacks, with loss tokens.
import { msg } from '../util.ts';
import type { Finding, Rule } from '../types.ts';
import { located, roundTrips, turnName } from '../turns.ts';

export const reasoningDropped: Rule = {
  id: 'reasoning-dropped',
  title: 'Reasoning the template drops is trained',
  severity: 'warning',
  description: "A <think> block of an earlier assistant turn is in the stored ids and in the loss, but the chat template's render of the whole conversation drops it (Qwen3 keeps reasoning only after the last user query): the row, turn and tokens are named.",
  seed: 'issue 25 (reasoning dropped between turns; Qwen3 chat template)',
  needsTokenizer: true,
  check(ctx) {
    const trips = roundTrips(ctx);
    if (typeof trips === 'string') return trips;
    const out: Finding[] = [];
    for (const [b, trip] of trips) {
      if (!('report' in trip)) continue;
      for (const d of trip.report.full.diffs) {
        if (d.cause !== 'think-dropped' || d.loss_tokens === 0 || d.stored[1] === d.stored[0]) continue;
        const where = located(d.stored, trip.prompt_length);
        out.push({
          rule: this.id, severity: 'warning', sample: b, ...where,
          message: msg`sample ${b}, ${turnName(d.message, d.role)}: its reasoning block (${d.stored[1] - d.stored[0]} tokens, ${d.loss_tokens} in the loss, ${where.field} ${where.span[0]}…${where.span[1] - 1}) is dropped when the chat template renders the conversation again`,
          hint: 'A turn sampled after a re-render never saw this reasoning, yet the loss trains it in context. Build turns by concatenating sampled ids (TRL ≥ #5242, verl agent loop) and sample from that same sequence, or keep reasoning in the template (a training template that does not strip it), or mask earlier turns\' reasoning out of the loss.',
        });
      }
    }
    return out;
  },
};
