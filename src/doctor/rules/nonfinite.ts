// nonfinite: NaN or ±Inf in a numeric field. One NaN anywhere in a per-token array poisons the loss even
// where the mask is 0 (NaN · 0 = NaN). TRL's NaN in rewards_per_func means "reward not applicable" and is
// skipped by nansum — reported as info; a sample where every function is NaN is TRL's unscorable row
// (the unscorable-rewards rule), whose `rewards` entry TRL itself sets to NaN.
import type { Finding, Rule } from '../types.ts';
import { unscorableRows } from '../rewards.ts';
import { listSamples, msg } from '../util.ts';

const FIELDS = ['rewards', 'advantages', 'reward_weights', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps'] as const;

export const nonfinite: Rule = {
  id: 'nonfinite',
  title: 'NaN or Inf in numbers',
  severity: 'error',
  description: 'A reward, advantage, weight or per-token log-prob is NaN or ±Inf; it makes the loss NaN even on masked positions.',
  seed: '001 (exact-zero/invalid loss diagnostics); TRL nansum over reward functions',
  check(ctx) {
    const out: Finding[] = [];
    const none = new Set(unscorableRows(ctx.batch));
    for (const field of FIELDS) {
      const v = ctx.batch[field];
      if (!v) continue;
      const rows: unknown[][] = Array.isArray(v[0]) ? (v as number[][]) : [v as number[]];
      const where: [number, number][] = [];
      rows.forEach((row, b) => row.forEach((x, t) => typeof x === 'number' && !Number.isFinite(x) && !(field === 'rewards' && Number.isNaN(x) && none.has(t)) && where.push([b, t])));
      if (where.length === 0) continue;
      const perToken = Array.isArray(v[0]);
      const [b, t] = where[0];
      const value = (rows[b] as number[])[t];
      out.push({
        rule: this.id,
        severity: 'error',
        field,
        sample: perToken ? b : t,
        span: perToken ? [t, t + 1] : undefined,
        message: msg`${field} has ${where.length} non-finite value(s); first ${value} at ${perToken ? `sample ${b} position ${t}` : `index ${t}`}`,
        hint: field.includes('logps')
          ? 'Write finite values everywhere (0.0 on padding, as TRL); −inf log-probs come from a token the sampler could not have drawn (top-k/top-p, wrong temperature or misaligned ids).'
          : 'Find where the value became non-finite (reward function error, a std of one sample, division by zero).',
      });
    }
    const rpf = ctx.batch.rewards_per_func;
    if (rpf) {
      const withNaN = rpf.map((row, b) => (row.some((x) => Number.isNaN(x)) && !none.has(b) ? b : -1)).filter((b) => b >= 0);
      const inf = rpf.map((row, b) => (row.some((x) => x === Infinity || x === -Infinity) ? b : -1)).filter((b) => b >= 0);
      if (inf.length) out.push({ rule: this.id, severity: 'error', field: 'rewards_per_func', sample: inf[0], message: msg`rewards_per_func has ±Inf for samples ${listSamples(inf)}`, hint: 'A reward function returned an infinite score.' });
      if (withNaN.length) out.push({ rule: this.id, severity: 'info', field: 'rewards_per_func', sample: withNaN[0], message: msg`rewards_per_func holds NaN (a function returned None) for samples ${listSamples(withNaN)}; skipped by nansum`, hint: 'Expected in multi-task setups where a reward function applies to some samples only.' });
    }
    return out;
  },
};
