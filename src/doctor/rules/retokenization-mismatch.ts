// retokenization-mismatch: encode(decode(completion_ids)) ≠ completion_ids. Sampled token sequences are
// not always the tokenizer's canonical split; any pipeline step that goes through text (tool-call parsing,
// a reward model, re-rendering a multi-turn chat) then changes ids and lengths — seed 003, where a
// re-tokenized tool call came out 6 tokens shorter and tool_mask no longer matched.
import type { Finding, Rule } from '../types.ts';
import { firstDiff, showToken, msg } from '../util.ts';

export const retokenizationMismatch: Rule = {
  id: 'retokenization-mismatch',
  title: 'Completion does not survive decode → encode',
  severity: 'warning',
  description: 'Re-encoding the decoded completion gives other ids (first differing token and both lengths shown): anything that round-trips through text will misalign masks and log-probs.',
  seed: '003 (TRL #5145: tool-call retokenization shortened a completion from 47 to 41 tokens)',
  needsTokenizer: true,
  check(ctx) {
    const tok = ctx.options.tokenizer;
    if (!tok) return 'needs a tokenizer (--tokenizer DIR)';
    const out: Finding[] = [];
    ctx.batch.completion_ids.forEach((row, b) => {
      const ids = row.slice(0, ctx.realEnd[b]);
      if (ids.length === 0) return;
      const again = tok.encode(tok.decode(ids));
      const t = firstDiff(ids, again);
      if (t < 0) return;
      out.push({
        rule: this.id, severity: 'warning', sample: b, span: [t, Math.min(ids.length, t + 1)],
        message: msg`sample ${b}: decode → encode changes the completion at position ${t}: ${showToken(ctx, ids[t])} becomes ${showToken(ctx, again[t])}; ${ids.length} tokens → ${again.length}`,
        hint: 'Keep token ids from the sampler end to end; if text must be re-tokenized (tool calls), re-derive every mask and log-prob row from the new ids.',
      });
    });
    return out;
  },
};
