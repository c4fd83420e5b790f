// short-completions: most completions are 0–2 tokens (often just EOS). The policy collapsed to stopping
// at once — seed 002: a repetition penalty applied to the prompt made EOS 3000× more likely.
import { msg } from '../util.ts';
import type { Rule } from '../types.ts';

export const shortCompletions: Rule = {
  id: 'short-completions',
  title: 'Most completions are 0–2 tokens',
  severity: 'warning',
  description: 'More than half of the completions are at most 2 tokens long (EOS included): generation collapsed to stopping immediately.',
  seed: '002 (bug #2: presence/frequency penalty over the prompt → 1-token generations)',
  check(ctx) {
    if (ctx.B === 0) return [];
    const short = ctx.realEnd.filter((n) => n <= 2).length;
    if (short * 2 <= ctx.B) return [];
    return [{
      rule: this.id,
      severity: 'warning',
      message: msg`${short} of ${ctx.B} completions are 0–2 tokens long`,
      hint: 'Check sampling: penalties (presence/frequency/repetition) must cover the response only, min_new_tokens, the stop tokens, and that the prompt ends with the assistant header.',
    }];
  },
};
