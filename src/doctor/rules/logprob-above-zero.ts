// logprob-above-zero: a per-token log-prob above 0 on a trained token. log p ≤ 0 for every probability, so
// such a value is not a log-prob: the negative log-likelihood written for it (a sign flip), probabilities or
// logits written instead, or a slice taken from another tensor. Every loss term built on it (the PPO ratio
// exp(logp − old), the KL to the reference, the sampler-mismatch weight) is then meaningless, and nothing else
// stops it: the numbers are finite, and only a model loaded to recompute them (logprob-mismatch) would show it.
// Rounding alone stays far below SLACK: a bf16 probability rounded up to just above 1 gives log p ≤ 0.0039.
// The tokens checked are those the loss trains (completion_mask 1, tool output excluded): exporters fill the
// others with anything (TRL writes 0.0 on padding; an engine has no log-prob for a tool's output).
import type { Finding, Rule } from '../types.ts';
import { msg } from '../util.ts';

const FIELDS = ['old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps'] as const;
const SLACK = 0.01;

export const logprobAboveZero: Rule = {
  id: 'logprob-above-zero',
  title: 'Log-probs above 0',
  severity: 'error',
  description: `old / ref / sampling per-token log-probs above ${SLACK} on trained tokens: a log-prob is never positive, so the field holds NLLs (sign flip), probabilities, logits or another tensor's slice.`,
  seed: '003/004 (log-probs from the wrong tensor slice); sign conventions of trainer dumps (NLL vs log-prob)',
  check(ctx) {
    const { completion_mask: mask, tool_mask: tool } = ctx.batch;
    const out: Finding[] = [];
    for (const field of FIELDS) {
      const rows = ctx.batch[field];
      if (!rows) continue;
      let [above, trained, nonNegative] = [0, 0, 0];
      let worst: [number, number] | undefined;
      rows.forEach((row, b) =>
        row.forEach((x, t) => {
          if (mask[b]?.[t] !== 1 || tool?.[b]?.[t] === 0 || !Number.isFinite(x)) return;
          trained++;
          if (x >= 0) nonNegative++;
          if (x > SLACK) {
            above++;
            if (!worst || x > rows[worst[0]][worst[1]]) worst = [b, t];
          }
        }),
      );
      if (!worst) continue;
      const [b, t] = worst;
      const all = nonNegative === trained;
      out.push({
        rule: this.id,
        severity: 'error',
        field,
        sample: b,
        span: [t, t + 1],
        message: msg`${field} has ${above} of ${trained} trained values above ${SLACK} (largest ${rows[b][t]} at sample ${b} position ${t})${all ? ': none is negative' : ''}`,
        hint: all
          ? 'Every value is ≥ 0: the exporter wrote the negative log-likelihood (flip the sign) or probabilities (take the log). A log-prob is log_softmax(logits / T) gathered at the sampled id.'
          : 'A log-prob is log_softmax(logits / T) gathered at the sampled id, never above 0: check which tensor these positions were sliced from (logits or probabilities instead of log-probs, or another row).',
      });
    }
    return out;
  },
};
