// verl's rollout correction (src/grpo/settings/verl_rollout.ts) on hand-computed examples for the modes the
// golden cases do not reach (token_k2/k3, seq_sum, seq_max, chained options, a bare k1 threshold, token batch
// normalisation), and properties over random batches: weights ≤ threshold and 0 on padding, the rejected
// mask a subset of the response mask.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { rolloutCorrection, type RolloutCorrectionSettings } from '../../src/grpo/settings/verl_rollout.ts';

const base: RolloutCorrectionSettings = { rollout_is: null, rollout_is_threshold: 2, rollout_is_batch_normalize: false, rollout_rs: null, rollout_rs_threshold: null };
const L = Math.log;

describe('verl rollout correction', () => {
  it('token and sequence IS weights, truncation and token batch normalisation', () => {
    const lr = [L(3), L(0.5), 7]; // the last is padding
    const M = [1, 1, 0];
    const tok = rolloutCorrection(lr, M, 1, 3, { ...base, rollout_is: 'token' }).weights!;
    expect(Array.from(tok)).toEqual([2, expect.closeTo(0.5, 12), 0]);
    const seq = rolloutCorrection(lr, M, 1, 3, { ...base, rollout_is: 'sequence' }).weights!;
    expect(Array.from(seq).map((x) => +x.toFixed(12))).toEqual([1.5, 1.5, 0]);
    const norm = rolloutCorrection(lr, M, 1, 3, { ...base, rollout_is: 'token', rollout_is_batch_normalize: true }).weights!;
    expect(norm[0]).toBeCloseTo(2 / 1.25, 6); // token mean (2 + 0.5) / (2 + 1e-8)
    expect(norm[1]).toBeCloseTo(0.5 / 1.25, 6);
  });

  it('rejection sampling: token_k2, token_k3, seq_sum_k1, seq_max_k3, chained options, bare k1 bound', () => {
    const M = [1, 1, 1, 1, 1, 0];
    const lr = [0.3, -0.5, 0.1, 0.2, 0.05, 9]; // rows of 3: [0.3, −0.5, 0.1], [0.2, 0.05, pad]
    const rs = (rollout_rs: string, rollout_rs_threshold: string) => Array.from(rolloutCorrection(lr, M, 2, 3, { ...base, rollout_rs, rollout_rs_threshold }).mask);
    expect(rs('token_k2', '0.1')).toEqual([1, 0, 1, 1, 1, 0]); // ½·0.25 = 0.125 > 0.1
    expect(rs('token_k3', '0.05')).toEqual([1, 0, 1, 1, 1, 0]); // e^0.3 − 1.3 = 0.0499, e^−0.5 − 0.5 = 0.1065
    // seq_sum_k1: Σ −ℓ per row = 0.1 and −0.25, kept within [log 0.8, log 1.5] = [−0.223, 0.405]
    expect(rs('seq_sum_k1', '0.8_1.5')).toEqual([1, 1, 1, 0, 0, 0]);
    expect(rs('seq_max_k3', '0.1')).toEqual([0, 0, 0, 1, 1, 0]); // row 0 max k3 0.1065
    expect(rs('token_k1,seq_mean_k2', '0.5_2,0.04')).toEqual([0, 0, 0, 1, 1, 0]); // row 0 mean k2 (0.045 + 0.125 + 0.005) / 3 = 0.0583
    expect(rs('token_k1', '1.2')).toEqual([0, 0, 1, 0, 1, 0]); // bare bound [1/1.2, 1.2]: −ℓ = −0.3, 0.5, −0.2 fall outside ±0.182
  });

  it("thresholds as verl's float() reads them: inf, underscores between digits; what verl refuses is refused", () => {
    const M = [1, 1, 1, 1, 1, 0];
    const lr = [0.3, -0.5, 0.1, 0.2, 0.05, 9];
    const rs = (rollout_rs: string, rollout_rs_threshold: string) => Array.from(rolloutCorrection(lr, M, 2, 3, { ...base, rollout_rs, rollout_rs_threshold }).mask);
    // An infinite upper bound keeps every token below it: the same as any bound past the statistics.
    expect(rs('token_k1', '0.8_inf')).toEqual(rs('token_k1', '0.8_1e30'));
    expect(rs('token_k1', '0.8_inf')).toEqual([0, 1, 1, 1, 1, 0]); // −ℓ = −0.3 below log 0.8 = −0.223: rejected
    expect(rs('token_k2', 'Infinity')).toEqual([1, 1, 1, 1, 1, 0]);
    expect(rs('token_k1', '0.5_1_0')).toEqual(rs('token_k1', '0.5_10')); // split at the first _, then float('1_0') = 10
    // A bare k1 bound u gives the lower 1/u: for inf that is 0, which verl's positivity check refuses; nan and hex are no thresholds.
    for (const bad of ['inf', 'nan', '0x10', '']) expect(() => rs('token_k1', bad), bad).toThrow(/must be positive numbers|one threshold/);
  });

  it('properties: weights in [0, threshold] and 0 on padding; the rejected mask is inside the response mask', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.double({ min: -30, max: 30, noNaN: true }), { minLength: 24, maxLength: 24 }),
        fc.array(fc.integer({ min: 0, max: 1 }), { minLength: 24, maxLength: 24 }),
        fc.constantFrom<'token' | 'sequence'>('token', 'sequence'),
        fc.constantFrom('token_k1', 'seq_mean_k3', 'seq_max_k2', 'token_k2,seq_sum_k1'),
        (B, T, lr, m, level, rs) => {
          const M = m.slice(0, B * T);
          if (!M.some((x) => x)) M[0] = 1;
          const r = rolloutCorrection(lr, M, B, T, { ...base, rollout_is: level, rollout_rs: rs, rollout_rs_threshold: rs.includes(',') ? '0.5,0.5_2' : rs.endsWith('k1') ? '0.5_2' : '0.5' });
          for (let i = 0; i < B * T; i++) {
            expect(r.weights![i]).toBeGreaterThanOrEqual(0);
            expect(r.weights![i]).toBeLessThanOrEqual(2);
            if (!M[i]) expect(r.weights![i]).toBe(0);
            expect(r.mask[i] <= M[i]).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('an all-padding batch is refused, as verl raises', () => {
    expect(() => rolloutCorrection([0, 0], [0, 0], 1, 2, { ...base, rollout_is: 'token' })).toThrow(/no valid token/);
  });
});
