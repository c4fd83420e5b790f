// grpo_loss_from_logps (src/grpo/loss.ts), the what-if's loss: per-token KL, ratio, loss, clip flags, every
// aggregation, the aggregation weights and dloss/dlogp from log-probs already computed, against the float64 twins (src/oracle) on an
// odd-sized batch with a fully masked row, a row with A = 0 and ratios beyond both clip bounds; for
// settings a what-if switches between (loss type, β, KL estimator, IS level, δ, old = policy).
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { expectClose, maxAbs } from '../helpers/close.ts';
import { Rng } from '../../src/model/rng.ts';
import { AGGREGATIONS, type GrpoLossConfig } from '../../src/grpo/loss.ts';
import { grpo_loss_from_logps } from '../../src/grpo/loss_from_logps.ts';
import * as refLoss from '../../src/oracle/grpo_loss.ts';
import * as refReduce from '../../src/oracle/loss_reduce.ts';
import { kl_forward as refKl } from '../../src/oracle/kl.ts';

const BASE: GrpoLossConfig = { loss_type: 'dapo', beta: 0.04, epsilon_low: 0.2, epsilon_high: 0.28, delta: null, temperature: 1, max_completion_length: 40, kl_estimator: 'k3', importance_sampling_level: 'token' };

const SWITCHES: Array<Partial<GrpoLossConfig> & { ownOld?: boolean }> = [
  {},
  { loss_type: 'grpo', kl_estimator: 'k1' },
  { loss_type: 'dr_grpo', beta: 0, delta: 1.6 },
  { loss_type: 'seq-mean-token-mean', importance_sampling_level: 'sequence', kl_estimator: 'k2' },
  { loss_type: 'bnpo', ownOld: true },
];

describe('grpo_loss_from_logps', () => {
  for (const sw of SWITCHES) {
    it(`matches the float64 twins: ${JSON.stringify(sw)}`, async () => {
      const gpu = await testGpu();
      const [B, T] = [6, 37];
      const rng = new Rng(17 + SWITCHES.indexOf(sw));
      const N = B * T;
      const logp = Float32Array.from({ length: N }, () => -Math.abs(rng.normal()) * 3);
      const old = Float32Array.from(logp, (x, i) => x + (i % 3 === 0 ? 0.9 : i % 3 === 1 ? -0.9 : rng.normal() * 0.05));
      const ref = Float32Array.from(logp, (x) => x + rng.normal() * 0.3);
      const adv = Float32Array.from({ length: B }, (_, b) => (b === 1 ? 0 : rng.normal()));
      const lens = [T, 9, 0, 20, 1, 33];
      const mask = Int32Array.from({ length: N }, (_, i) => (i % T < lens[Math.floor(i / T)] ? 1 : 0));
      const { ownOld, ...c } = sw;
      const cfg: GrpoLossConfig = { ...BASE, ...c };
      const got = await grpo_loss_from_logps(gpu, { B, T, per_token_logps: logp, completion_mask: mask, advantages: adv, old_per_token_logps: ownOld ? null : old, ref_per_token_logps: ref }, cfg);

      const kl = refKl(logp, ref, cfg.kl_estimator);
      expectClose(got.per_token_kl!, kl, { rtol: 1e-4, atol: 1e-5, label: 'per_token_kl' });
      const want = refLoss.grpo_loss_forward(logp, ownOld ? logp : old, kl, adv, mask, B, T, cfg);
      expectClose(got.importance_ratio, want.ratio, { rtol: 1e-4, atol: 1e-5, label: 'ratio' });
      expectClose(got.per_token_loss, want.loss, { rtol: 1e-4, atol: 1e-5, label: 'per_token_loss' });
      expect(Array.from(got.clip)).toEqual(Array.from(want.clip));
      const red = refReduce.loss_reduce_forward(want.loss, mask, want.clip, B, T, cfg);
      for (const a of AGGREGATIONS) expectClose([got.losses[a]], [red.losses[a]], { rtol: 1e-4, atol: 1e-6, label: `loss.${a}` });
      expect(got.loss).toBe(got.losses[cfg.loss_type]);
      expect(got.clip_counts.low + got.clip_counts.high).toBe(red.clip_counts.low + red.clip_counts.high);
      if (!ownOld && cfg.importance_sampling_level === 'token') expect(red.clip_counts.region, 'the batch must exercise clipping').toBeGreaterThan(0);
      const w = refReduce.loss_weights(mask, B, T, cfg.loss_type, cfg);
      expectClose(got.token_weight, w, { rtol: 1e-5, atol: 0, label: 'token_weight' });
      const dlogp = refLoss.grpo_loss_backward(logp, ref, adv, mask, want.ratio, w, B, T, cfg);
      expectClose(got.dlogp, dlogp, { rtol: 1e-4, atol: 1e-5 * maxAbs(dlogp), label: 'dlogp' });
    });
  }

  it('refuses β > 0 without reference log-probs, naming it', async () => {
    const gpu = await testGpu();
    const z = new Float32Array(4);
    await expect(grpo_loss_from_logps(gpu, { B: 2, T: 2, per_token_logps: z, completion_mask: new Int32Array(4).fill(1), advantages: new Float32Array(2), old_per_token_logps: null, ref_per_token_logps: null }, BASE)).rejects.toThrow('beta = 0.04 needs ref_per_token_logps');
  });
});
