// logprob-mismatch: the inference engine's log-probs (sampling_per_token_logps, e.g. vLLM) differ from the
// trainer's (old_per_token_logps) for the same tokens. Small gaps are normal (kernels, bf16); large ones
// mean different weights, temperature, template or token alignment, and the PPO ratio is then off-policy.
import type { Rule } from '../types.ts';

export const logprobMismatch: Rule = {
  id: 'logprob-mismatch',
  title: 'Sampler and trainer log-probs disagree',
  severity: 'warning',
  description: 'sampling_per_token_logps differ from old_per_token_logps beyond a threshold on masked-in tokens, tool output excluded (reported: max and mean |Δ|, worst token).',
  seed: '003/004 (log-probs aligned on the wrong tokens: logits[P−1:−1] vs completion ids); TRL vllm_importance_sampling_correction',
  check(ctx) {
    const { sampling_per_token_logps: s, old_per_token_logps: o, completion_mask: m, tool_mask: tool } = ctx.batch;
    if (!s || !o) return 'needs both sampling_per_token_logps and old_per_token_logps';
    const threshold = ctx.options.logprob_threshold ?? 0.05;
    let max = 0;
    let sum = 0;
    let n = 0;
    let worst: [number, number] = [-1, -1];
    for (let b = 0; b < Math.min(s.length, o.length, m.length); b++) {
      for (let t = 0; t < Math.min(s[b].length, o[b].length, m[b].length); t++) {
        // Tool-output tokens were not sampled: TRL writes 0 as their sampling log-prob.
        if (m[b][t] !== 1 || tool?.[b]?.[t] === 0 || !Number.isFinite(s[b][t]) || !Number.isFinite(o[b][t])) continue;
        const d = Math.abs(s[b][t] - o[b][t]);
        sum += d;
        n++;
        if (d > max) [max, worst] = [d, [b, t]];
      }
    }
    if (n === 0) return 'no masked-in token with finite log-probs to compare';
    const mean = sum / n;
    if (mean <= threshold && max <= 20 * threshold) return [];
    const [b, t] = worst;
    return [{
      rule: this.id,
      severity: 'warning',
      sample: b,
      span: [t, t + 1],
      message: `sampling vs old log-probs: mean |Δ| = ${mean.toPrecision(3)}, max |Δ| = ${max.toPrecision(3)} at sample ${b} position ${t} (${s[b][t]} vs ${o[b][t]}), over ${n} tokens`,
      hint: 'Check that both use the same weights, temperature and chat template, and that log-probs are aligned (logits[:, P−1:L−1] score completion_ids). A constant per-row gap points at a temperature mismatch.',
    }];
  },
};
