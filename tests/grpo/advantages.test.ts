// Group advantages against values derived by hand here and against the golden advantages (PyTorch, TRL
// formula) from the rewards stored in golden.safetensors metadata.
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { combineRewards, computeAdvantages } from '../../src/grpo/advantages.ts';
import { parseSafeTensors, toF32 } from '../../src/io/safetensors.ts';

const golden = path.resolve(import.meta.dirname, '..', 'golden/models');

describe('computeAdvantages', () => {
  it('TRL group scaling, hand-derived', () => {
    // Group [1, 2, 3, 6]: mean 3, deviations −2 −1 0 3, Σd² = 14, Bessel var 14/3.
    const std = Math.sqrt(14 / 3);
    const r = computeAdvantages([1, 2, 3, 6], { num_generations: 4 });
    expect([...r.advantages]).toEqual([-2, -1, 0, 3].map((d) => d / (std + 1e-4)));
    expect(r.groups).toEqual([{ group: 0, mean: 3, std, zero_std: false }]);
    expect(r.epsilon).toBe(1e-4);
  });

  it('a flat group gets A = 0 and is reported zero-std', () => {
    const r = computeAdvantages([0.5, 0.5, 1, 0], { num_generations: 2 });
    expect(r.advantages[0]).toBe(0);
    expect(r.advantages[1]).toBe(0);
    expect(r.groups.map((g) => g.zero_std)).toEqual([true, false]);
    // Group 1: mean 0.5, std √0.5.
    expect(r.advantages[2]).toBeCloseTo(0.5 / (Math.SQRT1_2 + 1e-4), 14);
  });

  it('batch scaling divides by the std over the whole batch; none only centres', () => {
    const rewards = [1, 0, 0.5, 0.5];
    // Batch mean 0.5, deviations .5 −.5 0 0 → Σd² = 0.5, Bessel var 0.5/3.
    const bstd = Math.sqrt(0.5 / 3);
    const b = computeAdvantages(rewards, { num_generations: 2, scale_rewards: 'batch' });
    expect(b.batch_std).toBeCloseTo(bstd, 15);
    expect([...b.advantages]).toEqual([0.5 / (bstd + 1e-4), -0.5 / (bstd + 1e-4), 0, 0]);
    expect([...computeAdvantages(rewards, { num_generations: 2, scale_rewards: 'none' }).advantages]).toEqual([0.5, -0.5, 0, 0]);
  });

  it('verl: ε = 1e-6 and a single-sample group gets mean 0, std 1', () => {
    const v = computeAdvantages([1, 3], { num_generations: 2, estimator: 'verl' });
    expect(v.advantages[0]).toBe(-1 / (Math.SQRT2 + 1e-6));
    const single = computeAdvantages([0.7, -2], { num_generations: 1, estimator: 'verl' });
    expect([...single.advantages]).toEqual([0.7 / (1 + 1e-6), -2 / (1 + 1e-6)]);
    // TRL with one generation: std taken as 0, A = r − r = 0.
    expect([...computeAdvantages([0.7, -2], { num_generations: 1 }).advantages]).toEqual([0, 0]);
  });

  it('combines reward functions with weights, skipping NaN like torch.nansum', () => {
    expect([...combineRewards([[1, 2], [NaN, 3], [NaN, NaN]], [0.5, 2])]).toEqual([4.5, 6, 0]);
    expect([...combineRewards([[1, 2]])]).toEqual([3]);
  });

  it('rejects a batch that is not a whole number of groups', () => {
    expect(() => computeAdvantages([1, 2, 3], { num_generations: 2 })).toThrow(RangeError);
  });
});

describe('golden advantages from the stored rewards', () => {
  const models = readdirSync(golden).filter((d) => d.startsWith('tiny-'));
  it('reads every tiny model (a missing folder would leave no case to run)', () => expect(models).toHaveLength(5));
  for (const m of models) {
    it(m, () => {
      const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(golden, m, 'golden.safetensors'))));
      const meta = JSON.parse(st.metadata.batch) as { rewards: number[]; num_generations: number };
      const want = toF32(st, 'advantages');
      const got = computeAdvantages(meta.rewards, { num_generations: meta.num_generations }).advantages;
      // The golden values are float32 roundings of the float64 formula: equal after rounding to f32.
      expect([...got].map(Math.fround)).toEqual([...want]);
    });
  }
});

describe('computeAdvantages with group labels', () => {
  it('property: shuffling rows together with their labels shuffles the advantages the same way', async () => {
    const fc = (await import('fast-check')).default;
    const { groupRows } = await import('../../src/grpo/advantages.ts');
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }), // G
        fc.integer({ min: 1, max: 6 }), // groups
        fc.constantFrom('group', 'batch', 'none' as const),
        fc.constantFrom('trl', 'verl' as const),
        fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { minLength: 30, maxLength: 30 }),
        fc.array(fc.nat(), { minLength: 30, maxLength: 30 }),
        (G, n, scale, estimator, values, keys) => {
          const B = G * n;
          const rewards = values.slice(0, B);
          const ref = computeAdvantages(rewards, { num_generations: G, scale_rewards: scale, estimator });
          const consecutive = ref.advantages;
          // A random permutation (verl's _balance_batch), labels carried along with their rows.
          const perm = keys.slice(0, B).map((k, i) => [k, i]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map(([, i]) => i);
          const shuffled = perm.map((i) => rewards[i]);
          const labels = perm.map((i) => Math.floor(i / G) * 7 + 3); // arbitrary integers, not 0..n−1
          const got = computeAdvantages(shuffled, { num_generations: G, scale_rewards: scale, estimator, groups: groupRows(B, G, labels).rows }).advantages;
          // Another order sums each mean differently: by up to B·u·max|r| (u = 2^-53), which the division by
          // std + ε (down to ε = 1e-6) magnifies; beyond that the advantages must agree to rounding.
          const maxR = Math.max(...rewards.map(Math.abs));
          perm.forEach((i, k) => {
            const divisor = scale === 'none' ? 1 : (ref.batch_std ?? ref.groups[Math.floor(i / G)].std) + ref.epsilon;
            const tol = 1e-12 * (1 + Math.abs(consecutive[i])) + (4 * B * 2 ** -53 * maxR) / divisor;
            expect(Math.abs(got[k] - consecutive[i])).toBeLessThanOrEqual(tol);
          });
        },
      ),
      {
        numRuns: 200,
        // CI's counterexample to a tolerance without the divisor: three rewards 1e-11 apart around 5, in another order.
        examples: [[3, 1, 'group', 'trl', [4.999999999993617, 4.999999999990891, 4.999999999999533, ...Array(27).fill(0)], [0, 693956711, ...Array(28).fill(0)]]],
      },
    );
  });

  it('groupRows: labels in order of first appearance; a group with fewer than G rows is incomplete', async () => {
    const { groupRows } = await import('../../src/grpo/advantages.ts');
    expect(groupRows(6, 4, [1, 1, 2, 2, 2, 2])).toEqual({ rows: [[0, 1], [2, 3, 4, 5]], complete: [false, true] });
    expect(groupRows(5, 2)).toEqual({ rows: [[0, 1], [2, 3], [4]], complete: [true, true, false] });
  });
});
