// The mismatch analysis (src/grpo/mismatch/): each planted pattern is diagnosed by its rule on exactly the
// planted rows and clean batches get no diagnosis (several seeds); the statistics equal a naive float64
// computation written here from the definitions (d = trainer − sampler, k1 = −d, k2 = d²/2, k3 = e^d − 1 − d,
// numpy's linear quantiles); the top tokens are the naive sort's; and, over random batches (fast-check), the
// counts always add up and nothing throws.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { analyseMismatch, logRatioRows, mismatchInputOf } from '../../src/grpo/mismatch/analysis.ts';
import { DIAGNOSES } from '../../src/grpo/mismatch/diagnoses.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { DIAGNOSIS_OF, PLANTED, plantedBatch, realisticBatch } from '../helpers/mismatch_fixtures.ts';

const analyse = (batch: GrpoBatch) => analyseMismatch(mismatchInputOf(batch));

describe('diagnoses on planted batches', () => {
  for (const seed of [1, 7, 42]) {
    for (const pattern of PLANTED) {
      it(`${pattern} (seed ${seed})`, () => {
        const { batch, planted } = plantedBatch(pattern, { seed });
        const r = analyse(batch);
        if (pattern === 'clean') {
          expect(r.diagnoses).toEqual([]);
          return;
        }
        expect(r.diagnoses.map((d) => d.id)).toEqual([DIAGNOSIS_OF[pattern]]);
        expect(r.diagnoses[0].rows.map((x) => x.sample)).toEqual(planted);
      });
    }
  }

  it('divergence names the first token of turn 2 on each planted row', () => {
    const { batch, planted } = plantedBatch('divergence', { seed: 3 });
    const [d] = analyse(batch).diagnoses;
    for (const row of d.rows) {
      const tool = batch.tool_mask![row.sample];
      const turn2 = tool.findIndex((v, t) => t > 0 && v === 1 && tool[t - 1] === 0);
      // The first turn-2 token is where the sampler's logits start to differ; a token drawn there may still agree by chance.
      expect(row.turn).toBe(2);
      expect(row.position).toBeGreaterThanOrEqual(turn2);
      expect(row.position).toBeLessThan(turn2 + 3);
    }
    expect(d.rows.length).toBe(planted.length);
  });

  it('off-by-one in the other direction is named with shift −1', () => {
    const { batch } = plantedBatch('clean', { seed: 5 });
    const [o, s] = [batch.old_per_token_logps![2], batch.sampling_per_token_logps![2]];
    for (let t = o.length - 1; t > 0; t--) s[t] = o[t - 1];
    s[0] = o[0] - 2;
    const [d] = analyse(batch).diagnoses;
    expect(d.id).toBe('off-by-one');
    expect(d.rows).toEqual([{ sample: 2, value: -1 }]);
    expect(d.evidence).toContain('trainer[t − 1]');
  });

  it('adapter-missing-on-sampler: the sampler matches the base, not the adapter', () => {
    const { batch } = plantedBatch('clean', { seed: 9 });
    const sampler = batch.sampling_per_token_logps!;
    // The base side is the sampler's own distribution (noise-free), the trainer side the base moved by an adapter.
    const base = { source: 'recomputed_base' as const, logps: batch.old_per_token_logps! };
    const adapted = { source: 'recomputed' as const, logps: base.logps.map((r, b) => r.map((v, t) => v + 0.4 * Math.sin(1 + b + 3 * t))) };
    const r = analyseMismatch(mismatchInputOf(batch, { trainer: adapted, base }));
    expect(r.diagnoses.map((d) => d.id)).toEqual(['adapter-missing-on-sampler']);
    expect(r.diagnoses[0].rows.map((x) => x.sample)).toEqual(sampler.map((_, b) => b));
    expect(r.adapter!.base_mean_abs).toBeLessThan(0.01);
    // The adapter reached the sampler: the trainer side matches it, the base does not — no diagnosis.
    const synced = analyseMismatch(mismatchInputOf(batch, { trainer: base, base: adapted }));
    expect(synced.diagnoses).toEqual([]);
  });

  it('every diagnosis of the table has a formula and a fix', () => {
    for (const d of DIAGNOSES) expect(d.formula.length * d.fix.length).toBeGreaterThan(0);
    expect(new Set(DIAGNOSES.map((d) => d.id)).size).toBe(DIAGNOSES.length);
  });
});

/** numpy.quantile's default (linear) on an ascending copy. */
function npQuantile(values: number[], q: number): number {
  const v = [...values].sort((a, b) => a - b);
  const h = (v.length - 1) * q;
  const i = Math.floor(h);
  return i + 1 < v.length ? v[i] + (h - i) * (v[i + 1] - v[i]) : v[i];
}

describe('statistics from the definitions', () => {
  const { batch } = plantedBatch('stale', { seed: 13, B: 8, C: 23 });
  // A NaN, a tool token and a masked token: none is compared.
  batch.sampling_per_token_logps![0][1] = NaN;
  batch.tool_mask = batch.completion_ids.map((r) => r.map(() => 1));
  batch.tool_mask[1][2] = 0;
  batch.completion_mask[2][3] = 0;
  const r = analyse(batch);
  const d: number[] = [];
  const rows: number[][] = batch.completion_ids.map(() => []);
  batch.completion_ids.forEach((ids, b) =>
    ids.forEach((_, t) => {
      const v = batch.old_per_token_logps![b][t] - batch.sampling_per_token_logps![b][t];
      if (batch.completion_mask[b][t] === 1 && batch.tool_mask![b][t] === 1 && Number.isFinite(v)) [d.push(v), rows[b].push(v)];
    }),
  );
  const defs = { log_ratio: (x: number) => x, k1: (x: number) => -x, k2: (x: number) => (x * x) / 2, k3: (x: number) => Math.exp(x) - 1 - x };

  it('counts what is compared', () => {
    expect(r.tokens).toBe(d.length);
    expect(r.nonfinite).toBe(1);
    expect(r.per_row.reduce((a, x) => a + x.tokens, 0)).toBe(d.length);
  });

  for (const [name, f] of Object.entries(defs)) {
    it(`per-token ${name}: mean, mean |·|, quantiles`, () => {
      const v = d.map(f);
      const s = r.token[name as keyof typeof defs].summary;
      expect(s.n).toBe(v.length);
      expect(s.mean).toBeCloseTo(v.reduce((a, x) => a + x, 0) / v.length, 12);
      expect(s.mean_abs).toBeCloseTo(v.reduce((a, x) => a + Math.abs(x), 0) / v.length, 12);
      expect(s.max).toBeCloseTo(Math.max(...v), 12);
      for (const [k, q] of [['p1', 0.01], ['p25', 0.25], ['p50', 0.5], ['p99', 0.99]] as const) expect(s.q[k]).toBeCloseTo(npQuantile(v, q), 12);
      const h = r.token[name as keyof typeof defs].histogram;
      expect(h.counts.reduce((a, x) => a + x, 0) + h.under + h.over).toBe(v.length);
    });
    it(`per-sequence ${name}: quantiles of the row means`, () => {
      const means = rows.filter((x) => x.length).map((x) => x.map(f).reduce((a, y) => a + y, 0) / x.length);
      const s = r.sequence[name as keyof typeof defs].summary;
      expect(s.n).toBe(means.length);
      expect(s.q.p50).toBeCloseTo(npQuantile(means, 0.5), 12);
      expect(s.q.p95).toBeCloseTo(npQuantile(means, 0.95), 12);
    });
  }

  it('per-sequence log_ratio_sum is Σ d per row', () => {
    const sums = rows.filter((x) => x.length).map((x) => x.reduce((a, y) => a + y, 0));
    expect(r.sequence.log_ratio_sum.summary.max).toBeCloseTo(Math.max(...sums), 12);
    expect(r.sequence.log_ratio_sum.summary.q.p25).toBeCloseTo(npQuantile(sums, 0.25), 12);
  });

  it('the top tokens are the largest |d|, with both sides and the turn', () => {
    const all = batch.completion_ids.flatMap((ids, b) => ids.map((_, t) => ({ b, t, v: batch.old_per_token_logps![b][t] - batch.sampling_per_token_logps![b][t] })))
      .filter(({ b, t, v }) => batch.completion_mask[b][t] === 1 && batch.tool_mask![b][t] === 1 && Number.isFinite(v))
      .sort((x, y) => Math.abs(y.v) - Math.abs(x.v));
    expect(r.top.map((x) => [x.sample, x.position])).toEqual(all.slice(0, 20).map((x) => [x.b, x.t]));
    for (const x of r.top) expect(x.log_ratio).toBeCloseTo(x.trainer_logp - x.sampler_logp, 12);
    // Row 1's tool token at position 2 ends turn 1 there.
    for (const x of r.top) expect(x.turn).toBe(x.sample === 1 && x.position > 2 ? 2 : 1);
  });

  it('token text and context come from tokenText', () => {
    const t = analyseMismatch(mismatchInputOf(batch, { tokenText: (id) => `<${id}>` }), { top: 3 });
    for (const x of t.top) {
      expect(x.text).toBe(`<${batch.completion_ids[x.sample][x.position]}>`);
      expect(x.context).toContain(`⟦<${batch.completion_ids[x.sample][x.position]}>⟧`);
    }
  });

  it('classes: position bins partition the tokens; the first-token class holds position 0', () => {
    const pos = r.classes.filter((c) => c.id.startsWith('pos_'));
    expect(pos.reduce((a, c) => a + c.tokens, 0)).toBe(d.length);
    expect(pos.reduce((a, c) => a + c.share, 0)).toBeCloseTo(1, 12);
    const firsts = batch.completion_ids.filter((_, b) => batch.completion_mask[b][0] === 1 && batch.tool_mask![b][0] === 1 && Number.isFinite(batch.sampling_per_token_logps![b][0])).length;
    expect(r.classes.find((c) => c.id === 'first')!.tokens).toBe(firsts);
    expect(r.classes.find((c) => c.id === 'after_tool')!.tokens).toBe(3); // row 1, positions 3–5
  });

  it('probability bins partition the tokens by exp(sampler)', () => {
    expect(r.by_probability.reduce((a, x) => a + x.tokens, 0)).toBe(d.length);
    const low = batch.sampling_per_token_logps!.flatMap((row, b) => row.filter((v, t) => batch.completion_mask[b][t] === 1 && batch.tool_mask![b][t] === 1 && Number.isFinite(v) && Number.isFinite(batch.old_per_token_logps![b][t]) && Math.exp(v) < 0.01)).length;
    expect(r.by_probability[0].tokens).toBe(low);
  });

  it('logRatioRows: d where compared, NaN elsewhere', () => {
    const heat = logRatioRows(mismatchInputOf(batch));
    expect(heat[1][2]).toBeNaN();
    expect(heat[2][3]).toBeNaN();
    expect(heat[3][4]).toBeCloseTo(batch.old_per_token_logps![3][4] - batch.sampling_per_token_logps![3][4], 12);
  });
});

describe('input', () => {
  it('a missing side is an InputError naming the field', () => {
    const { batch } = plantedBatch('clean');
    delete batch.sampling_per_token_logps;
    expect(() => mismatchInputOf(batch, { source: 'b.json' })).toThrow(/b\.json: field "sampling_per_token_logps" is absent/);
    const { batch: b2 } = plantedBatch('clean');
    delete b2.old_per_token_logps;
    expect(() => mismatchInputOf(b2)).toThrow(expect.objectContaining({ name: 'InputError', message: expect.stringContaining('old_per_token_logps') }));
    // A recomputed trainer side needs no old_per_token_logps.
    expect(analyseMismatch(mismatchInputOf(b2, { trainer: { source: 'recomputed', logps: b2.sampling_per_token_logps! } })).diagnoses).toEqual([]);
  });

  it('random batches: counts add up, quantiles ascend, nothing throws', () => {
    const value = fc.oneof(fc.double({ min: -30, max: 0, noNaN: true }), fc.constantFrom(NaN, -Infinity, 0));
    const row = fc.array(fc.tuple(value, value, fc.constantFrom(0, 1), fc.constantFrom(0, 1, 1)), { maxLength: 12 });
    fc.assert(
      fc.property(fc.array(row, { minLength: 1, maxLength: 6 }), (rows) => {
        const batch: GrpoBatch = {
          format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [3],
          prompt_ids: rows.map(() => [5]), completion_ids: rows.map((r) => r.map((_, t) => 4 + t)),
          completion_mask: rows.map((r) => r.map((x) => x[2])), tool_mask: rows.map((r) => r.map((x) => x[3])),
          old_per_token_logps: rows.map((r) => r.map((x) => x[0])), sampling_per_token_logps: rows.map((r) => r.map((x) => x[1])),
        };
        const r = analyse(batch);
        const compared = rows.flat().filter((x) => x[2] === 1 && x[3] === 1);
        expect(r.tokens + r.nonfinite).toBe(compared.length);
        const q = Object.values(r.token.log_ratio.summary.q);
        // No compared token: every statistic is NaN (JSON null), not a number made up.
        if (r.tokens === 0) expect(q.every(Number.isNaN)).toBe(true);
        else for (let i = 1; i < q.length; i++) expect(q[i]).toBeGreaterThanOrEqual(q[i - 1]);
        expect(r.classes.filter((c) => c.id.startsWith('pos_')).reduce((a, c) => a + c.tokens, 0)).toBe(r.tokens);
        for (const d of r.diagnoses) expect(d.rows.length).toBeGreaterThan(0);
      }),
      { numRuns: 300 },
    );
  });
});

describe('diagnoses on samplers that really misbehave (every row)', () => {
  // A real nucleus / top-k sampler's offset log S_t varies per token; a real temperature scales by 1/τ only
  // roughly (log softmax(z/τ) = z/τ − lse(z/τ)); other weights move every token both ways.
  const cases: Array<[Parameters<typeof realisticBatch>[0], number, number, string]> = [
    ['nucleus', 0.9, 2, 'sampler-renormalised'],
    ['nucleus', 0.7, 1, 'sampler-renormalised'],
    ['top_k', 10, 2, 'sampler-renormalised'],
    ['tempered', 0.7, 2, 'temperature-one-side'],
    ['tempered', 0.9, 1, 'temperature-one-side'],
    ['tempered', 1.1, 2, 'temperature-one-side'],
    ['tempered', 1.3, 4, 'temperature-one-side'],
    ['weights', 0.8, 2, 'stale-policy'],
    ['weights', 1.5, 4, 'stale-policy'],
  ];
  for (const [kind, param, scale, id] of cases) {
    it(`${kind} ${param} (logit scale ${scale}) → ${id}`, () => {
      const r = analyse(realisticBatch(kind, param, { scale }));
      expect(r.diagnoses.map((d) => d.id)).toContain(id);
      // The diagnosis explains most rows, and nothing else claims more than a few.
      expect(r.diagnoses.find((d) => d.id === id)!.rows.length).toBeGreaterThanOrEqual(11);
    });
  }

  it('the temperature evidence estimates τ_sampler / τ_trainer', () => {
    for (const tau of [0.7, 1.3]) {
      const d = analyse(realisticBatch('tempered', tau, { scale: 1 })).diagnoses.find((x) => x.id === 'temperature-one-side')!;
      const est = Number(/τ_sampler \/ τ_trainer ≈ ([\d.]+)/.exec(d.evidence)![1]);
      expect(Math.abs(est - tau)).toBeLessThan(0.05);
    }
  });
});
