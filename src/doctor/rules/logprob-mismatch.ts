// logprob-mismatch: the inference engine's log-probs (sampling_per_token_logps, e.g. vLLM) differ from the
// trainer's (old_per_token_logps) for the same tokens. Small gaps are normal (kernels, bf16); large ones
// mean different weights, temperature, template or token alignment, and the PPO ratio is then off-policy.
// The tokens compared and the diagnoses named are the mismatch explorer's (src/grpo/mismatch/), so the
// Doctor, `grpo-studio mismatch` and the page's explorer never disagree on which tokens count or why.
import { msg } from '../util.ts';
import { diagnoseMismatch, mismatchInputOf } from '../../grpo/mismatch/analysis.ts';
import { compare } from '../../grpo/mismatch/compare.ts';
import type { Rule } from '../types.ts';

const SHOWN_ROWS = 6;

export const logprobMismatch: Rule = {
  id: 'logprob-mismatch',
  title: 'Sampler and trainer log-probs disagree',
  severity: 'warning',
  description: 'sampling_per_token_logps differ from old_per_token_logps beyond a threshold on masked-in tokens, tool output excluded (reported: max and mean |Δ|, worst token, and the mismatch explorer\'s diagnoses).',
  seed: '003/004 (log-probs aligned on the wrong tokens: logits[P−1:−1] vs completion ids); TRL vllm_importance_sampling_correction',
  check(ctx) {
    const { sampling_per_token_logps: s, old_per_token_logps: o } = ctx.batch;
    if (!s || !o) return 'needs both sampling_per_token_logps and old_per_token_logps';
    const threshold = ctx.options.logprob_threshold ?? 0.05;
    const x = mismatchInputOf(ctx.batch);
    const c = compare(x);
    if (c.n === 0) return 'no masked-in token with finite log-probs to compare';
    let [sum, worst] = [0, 0];
    for (let i = 0; i < c.n; i++) {
      sum += Math.abs(c.d[i]);
      if (Math.abs(c.d[i]) > Math.abs(c.d[worst])) worst = i;
    }
    const mean = sum / c.n;
    const max = Math.abs(c.d[worst]);
    if (mean <= threshold && max <= 20 * threshold) return [];
    const [b, t] = [c.row[worst], c.pos[worst]];
    const named = diagnoseMismatch(x, { tolerance: threshold })
      .map((d) => `${d.title} (${d.id}: sample${d.rows.length > 1 ? 's' : ''} ${d.rows.slice(0, SHOWN_ROWS).map((r) => r.sample).join(', ')}${d.rows.length > SHOWN_ROWS ? ', …' : ''})`);
    return [{
      rule: this.id,
      severity: 'warning',
      sample: b,
      span: [t, t + 1],
      message: msg`sampling vs old log-probs: mean |Δ| = ${mean}, max |Δ| = ${max} at sample ${b} position ${t} (${c.sampler[worst]} vs ${c.trainer[worst]}), over ${c.n} tokens${named.length ? `; diagnosis: ${named.join('; ')}` : ''}`,
      hint: 'Check that both use the same weights, temperature and chat template, and that log-probs are aligned (logits[:, P−1:L−1] score completion_ids). The mismatch explorer (`grpo-studio mismatch`, the page\'s Mismatch panel) shows where and why.',
    }];
  },
};
