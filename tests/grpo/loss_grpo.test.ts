// grpo_loss_forward, loss_reduce_forward and grpo_loss_backward (GPU) against their float64 twins on random
// odd-sized batches (T not a multiple of the workgroup, a fully masked row, a row with A = 0, ratios far
// from 1 on both sides), for both importance-sampling levels, with and without δ, every KL estimator and
// every aggregation; then the whole backward (grpo_loss_backward ∘ logprob_gather_backward, through
// src/grpo/loss.ts) against central finite differences of the float64 reference loss.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { expectClose, maxAbs } from '../helpers/close.ts';
import { fdGradient } from '../helpers/fd.ts';
import type { Gpu } from '../../src/gpu/context.ts';
import { grpo_loss_backward, grpo_loss_forward } from '../../src/kernels/grpo_loss.ts';
import { loss_reduce_forward, STATS } from '../../src/kernels/loss_reduce.ts';
import { AGGREGATIONS, grpo_loss, readGrpoLoss, type GrpoLossConfig } from '../../src/grpo/loss.ts';
import * as refLoss from '../../src/oracle/grpo_loss.ts';
import * as refReduce from '../../src/oracle/loss_reduce.ts';
import { CLIP_HIGH, CLIP_LOW } from '../../src/kernels/types.ts';
import { logprob_gather_forward as refGather } from '../../src/oracle/logprob_gather.ts';
import { kl_forward as refKl } from '../../src/oracle/kl.ts';

const BASE: GrpoLossConfig = {
  loss_type: 'grpo',
  beta: 0.04,
  epsilon_low: 0.2,
  epsilon_high: 0.28,
  delta: null,
  temperature: 1,
  max_completion_length: 0, // set per batch
  kl_estimator: 'k3',
  importance_sampling_level: 'token',
};

/** Configs that together cover every aggregation, both levels, δ, every estimator, β = 0 and num_items_in_batch. */
const CONFIGS: Array<Partial<GrpoLossConfig>> = [
  { loss_type: 'grpo' },
  { loss_type: 'bnpo', beta: 0, kl_estimator: 'k1' },
  { loss_type: 'dr_grpo', kl_estimator: 'k2', delta: 1.5 },
  { loss_type: 'dapo', num_items_in_batch: 1234 },
  { loss_type: 'token-mean', importance_sampling_level: 'sequence' },
  { loss_type: 'seq-mean-token-sum', kl_estimator: 'k1', importance_sampling_level: 'sequence', delta: 1.35 },
  { loss_type: 'seq-mean-token-mean', kl_estimator: 'k2' },
  { loss_type: 'seq-mean-token-sum-norm', beta: 0, epsilon_low: 3e-4, epsilon_high: 4e-4, importance_sampling_level: 'sequence' },
];

function label(c: Partial<GrpoLossConfig>): string {
  return Object.entries(c).map(([k, v]) => `${k}=${v}`).join(' ');
}

interface Batch {
  B: number;
  T: number;
  logp: Float32Array; // (B, T)
  old: Float32Array; // (B, T)
  ref: Float32Array; // (B, T)
  adv: Float32Array; // (B)
  mask: Int32Array; // (B, T)
}

/**
 * Moves old log-probs so every log-ratio (token level) or row mean (sequence level) is ≥ 1e-4 from the
 * log of a clip boundary or δ: there the flags and the gradient jump, and float32 noise (~1e-6) must not
 * decide the branch. The golden cases are built the same way.
 */
function avoidKinks(b: Batch, cfg: GrpoLossConfig, logp: ArrayLike<number> = b.logp): void {
  const bounds = [1 - cfg.epsilon_low, 1 + cfg.epsilon_high, ...(cfg.delta ? [cfg.delta] : [])].map(Math.log);
  const near = (q: number) => bounds.some((x) => Math.abs(q - x) < 1e-4);
  for (let r = 0; r < b.B; r++) {
    for (let tries = 0; tries < 50; tries++) {
      const idx = Array.from({ length: b.T }, (_, t) => r * b.T + t).filter((i) => b.mask[i]);
      const qs = cfg.importance_sampling_level === 'sequence' ? [idx.reduce((s, i) => s + logp[i] - b.old[i], 0) / Math.max(1, idx.length)] : idx.map((i) => logp[i] - b.old[i]);
      const bad = qs.findIndex(near);
      if (bad < 0) break;
      if (cfg.importance_sampling_level === 'sequence') idx.forEach((i) => (b.old[i] -= 3e-4));
      else b.old[idx[bad]] -= 3e-4;
    }
  }
}

function makeBatch(rng: Rng, B: number, T: number, spread: number): Batch {
  const N = B * T;
  const logp = Float32Array.from({ length: N }, () => -Math.abs(rng.normal()) * 3);
  // A shift per row as well as per token, so row means (sequence level) also land outside the clip range.
  const shift = Array.from({ length: B }, () => rng.normal() * 2 * spread);
  const old = Float32Array.from(logp, (x, i) => x + shift[Math.floor(i / T)] + rng.normal() * spread);
  const ref = Float32Array.from(logp, (x) => x + rng.normal() * 0.2);
  const adv = Float32Array.from({ length: B }, (_, b) => (b === 1 ? 0 : rng.normal()));
  const lens = Array.from({ length: B }, (_, b) => (b === 2 ? 0 : rng.int(1, T)));
  const mask = Int32Array.from({ length: N }, (_, i) => (i % T < lens[Math.floor(i / T)] ? 1 : 0));
  return { B, T, logp, old, ref, adv, mask };
}

async function runKernels(gpu: Gpu, b: Batch, cfg: GrpoLossConfig) {
  const N = b.B * b.T;
  const up = (name: string, a: Float32Array | Int32Array) => gpu.upload(name, a);
  const [logp, old, ref, advantages, mask] = [up('logp', b.logp), up('old', b.old), up('ref', b.ref), up('adv', b.adv), up('mask', b.mask)];
  const klRef = refKl(b.logp, b.ref, cfg.kl_estimator);
  const kl = up('kl', Float32Array.from(klRef));
  const out = (n: string, bytes = N * 4) => gpu.createBuffer(n, bytes);
  const [loss, ratio, clip, stats, dlogp, token_weight] = [out('loss'), out('ratio'), out('clip'), out('stats', STATS.size * 4), out('dlogp'), out('token_weight')];
  const rec = gpu.recorder('grpo loss test');
  grpo_loss_forward(rec, { logp, oldLogp: old, kl, advantages, mask, loss, ratio, clip, B: b.B, T: b.T, params: cfg });
  loss_reduce_forward(rec, { loss, mask, clip, out: stats, B: b.B, T: b.T, ...cfg });
  grpo_loss_backward(rec, { logp, refLogp: ref, advantages, mask, ratio, stats, dlogp, token_weight, B: b.B, T: b.T, params: cfg });
  await rec.submit();
  return {
    klRef,
    loss: await gpu.readF32(loss, N),
    ratio: await gpu.readF32(ratio, N),
    clip: await gpu.readU32(clip, N),
    stats: await gpu.readF32(stats, STATS.size),
    dlogp: await gpu.readF32(dlogp, N),
    token_weight: await gpu.readF32(token_weight, N),
  };
}

describe('grpo_loss_forward + loss_reduce_forward + grpo_loss_backward', () => {
  for (const c of CONFIGS) {
    it(`matches the float64 reference: ${label(c)}`, async () => {
      const gpu = await testGpu();
      const B = 7;
      const T = 301; // > 2 × WG (128), not a multiple of it
      const cfg: GrpoLossConfig = { ...BASE, max_completion_length: 320, ...c };
      const b = makeBatch(new Rng(T + CONFIGS.indexOf(c)), B, T, cfg.epsilon_low < 0.01 ? 0.003 : 0.3);
      avoidKinks(b, cfg);
      const got = await runKernels(gpu, b, cfg);
      const want = refLoss.grpo_loss_forward(b.logp, b.old, got.klRef, b.adv, b.mask, B, T, cfg);
      // f32 ratio: exp of an f32 log-ratio (sequence level: a 301-term f32 mean) is good to ~1e-6 relative;
      // the README's per-token tolerances (rtol 1e-4, atol 1e-5) apply unchanged.
      expectClose(got.ratio, want.ratio, { rtol: 1e-4, atol: 1e-5, label: 'ratio' });
      expectClose(got.loss, want.loss, { rtol: 1e-4, atol: 1e-5, label: 'per_token_loss' });
      // Away from the kinks (avoidKinks) the branch is decided the same way: flags match exactly.
      expect(Array.from(got.clip)).toEqual(Array.from(want.clip));
      const clipped = want.clip.reduce((n, f, i) => n + (b.mask[i] && f & (CLIP_LOW | CLIP_HIGH) ? 1 : 0), 0);
      expect(clipped, 'the batch must exercise clipping').toBeGreaterThan(0);

      const red = refReduce.loss_reduce_forward(want.loss, b.mask, want.clip, B, T, cfg);
      // Scale of each aggregation's rounding: the same aggregation of |L|. f32 sums over T = 301 tokens
      // then a tree over B carry at most ~(T + log2 B)·2^-24 ≈ 2e-5 of it.
      const absRed = refReduce.loss_reduce_forward(want.loss.map(Math.abs), b.mask, want.clip, B, T, cfg);
      AGGREGATIONS.forEach((a, i) => expectClose([got.stats[i]], [red.losses[a]], { rtol: 0, atol: 2e-5 * Math.abs(absRed.losses[a]), label: `loss.${a}` }));
      const cc = red.clip_counts;
      expect(Array.from(got.stats.subarray(STATS.tokens, STATS.delta_binding + 1))).toEqual([cc.tokens, red.sequences, cc.low, cc.high, cc.region, cc.delta_binding]);

      const w = refReduce.loss_weights(b.mask, B, T, cfg.loss_type, cfg);
      expectClose(got.token_weight, w, { rtol: 1e-6, atol: 0, label: 'token_weight' });
      const dlogp = refLoss.grpo_loss_backward(b.logp, b.ref, b.adv, b.mask, want.ratio, w, B, T, cfg);
      // README's dlogits tolerance: rtol 1e-4, atol 1e-5·max|grad|.
      expectClose(got.dlogp, dlogp, { rtol: 1e-4, atol: 1e-5 * maxAbs(dlogp), label: 'dlogp' });
      for (let i = 0; i < B * T; i++) if (!b.mask[i]) expect(got.dlogp[i], `dlogp[${i}] on a masked token`).toBe(0);
    });
  }
});

describe('loss_reduce_forward', () => {
  it('rejects undersized buffers, naming the kernel and the field (also grpo_loss_forward / _backward)', async () => {
    const gpu = await testGpu();
    const [B, T] = [5, 3];
    const buf = (elems: number) => gpu.createBuffer('b', elems * 4); // at least 16 bytes
    const red = { loss: buf(B * T), mask: buf(B * T), clip: buf(B * T), out: buf(STATS.size), B, T, max_completion_length: T };
    expect(() => loss_reduce_forward(gpu.recorder('x'), { ...red, out: buf(8) })).toThrow('loss_reduce_forward: out holds 32 bytes, needs 64 (16 elements)');
    const bt = () => buf(B * T);
    const fwd = { logp: bt(), oldLogp: bt(), kl: bt(), advantages: buf(B), mask: bt(), loss: bt(), ratio: bt(), clip: bt(), B, T, params: { ...BASE, max_completion_length: T } };
    expect(() => grpo_loss_forward(gpu.recorder('x'), { ...fwd, advantages: buf(1) })).toThrow('grpo_loss_forward: advantages holds 16 bytes, needs 20 (5 elements)');
    const back = { logp: bt(), refLogp: bt(), advantages: buf(B), mask: bt(), ratio: bt(), stats: buf(STATS.size), dlogp: bt(), token_weight: bt(), B, T, params: fwd.params };
    expect(() => grpo_loss_backward(gpu.recorder('x'), { ...back, stats: buf(8) })).toThrow('grpo_loss_backward: stats holds 32 bytes, needs 64 (16 elements)');
  });

  it('gives every aggregation for any number of lanes per sequence (1, 8, 256: one to 70 passes)', async () => {
    const gpu = await testGpu();
    const B = 70;
    const T = 45;
    const cfg: GrpoLossConfig = { ...BASE, max_completion_length: 50 };
    const rng = new Rng(70);
    const b = makeBatch(rng, B, T, 0.3);
    const loss = rng.f32(B * T);
    const clip = Uint32Array.from({ length: B * T }, () => rng.int(0, 7) & 7);
    const want = refReduce.loss_reduce_forward(loss, b.mask, clip, B, T, cfg);
    const absWant = refReduce.loss_reduce_forward(loss.map(Math.abs), b.mask, clip, B, T, cfg);
    const [L, M, C] = [gpu.upload('loss', loss), gpu.upload('mask', b.mask), gpu.upload('clip', clip)];
    for (const lanes of [1, 8, 256]) {
      const out = gpu.createBuffer('stats', STATS.size * 4);
      const rec = gpu.recorder('reduce lanes');
      loss_reduce_forward(rec, { loss: L, mask: M, clip: C, out, B, T, ...cfg, lanes });
      await rec.submit();
      const got = await gpu.readF32(out, STATS.size);
      // f32 sums of ≤ 45 tokens then a tree: ≤ ~50·2^-24 of the aggregation of |L|.
      AGGREGATIONS.forEach((a, i) => expectClose([got[i]], [want.losses[a]], { rtol: 0, atol: 5e-6 * Math.abs(absWant.losses[a]), label: `lanes ${lanes} loss.${a}` }));
      const cc = want.clip_counts;
      expect(Array.from(got.subarray(STATS.tokens, STATS.delta_binding + 1)), `lanes ${lanes} counts`).toEqual([cc.tokens, want.sequences, cc.low, cc.high, cc.region, cc.delta_binding]);
    }
  });
});

describe('dlogits = grpo_loss_backward ∘ logprob_gather_backward vs finite differences', () => {
  const B = 3;
  const T = 5;
  const V = 11;
  const cases: Array<Partial<GrpoLossConfig> & { noOld?: boolean }> = [
    ...CONFIGS,
    { loss_type: 'dapo', temperature: 0.7, delta: 1.3, kl_estimator: 'k2' },
    { loss_type: 'grpo', temperature: 0.7, noOld: true }, // old = logp.detach(): r = 1, gradient r·A
  ];
  for (const c of cases) {
    it(`central differences of the float64 loss: ${label(c)}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(99 + cases.indexOf(c));
      const { noOld, ...rest } = c;
      const cfg: GrpoLossConfig = { ...BASE, max_completion_length: 6, ...rest };
      const logits = rng.f32(B * T * V, 2);
      const ids = Int32Array.from({ length: B * T }, () => rng.int(0, V - 1));
      const b = makeBatch(rng, B, T, cfg.epsilon_low < 0.01 ? 0.003 : 0.3);
      const logp0 = refGather(logits, ids, null, B * T, V, cfg.temperature).logp;
      if (noOld) b.old.set(logp0); // the detached value: a constant equal to logp at this point
      else {
        b.old = Float32Array.from(logp0, (x) => x + rng.normal() * (cfg.epsilon_low < 0.01 ? 0.003 : 0.3));
        avoidKinks(b, cfg, logp0);
      }
      b.ref = Float32Array.from(logp0, (x) => x + rng.normal() * 0.2);

      const lossAt = (x: ArrayLike<number>): number => {
        const lp = refGather(x, ids, null, B * T, V, cfg.temperature).logp;
        const kl = refKl(lp, b.ref, cfg.kl_estimator);
        const f = refLoss.grpo_loss_forward(lp, b.old, kl, b.adv, b.mask, B, T, cfg);
        return refReduce.loss_reduce_forward(f.loss, b.mask, f.clip, B, T, cfg).losses[cfg.loss_type];
      };
      const x = Float64Array.from(logits);
      // f64 central difference, h = 1e-6: truncation ~h², rounding ~1e-16/h: both ≪ the f32 tolerance.
      const fd = fdGradient(() => lossAt(x), x, 1e-6);

      const res = await grpo_loss(gpu, {
        B, T, V,
        logits: gpu.upload('logits', logits),
        completion_ids: gpu.upload('ids', ids),
        completion_mask: gpu.upload('mask', b.mask),
        advantages: gpu.upload('adv', b.adv),
        old_per_token_logps: noOld ? null : gpu.upload('old', b.old),
        ref_per_token_logps: gpu.upload('ref', b.ref),
      }, cfg);
      const r = await readGrpoLoss(gpu, res, { dlogits: true });
      expect(maxAbs(fd), 'the loss must depend on the logits').toBeGreaterThan(0);
      // README's dlogits tolerance (rtol 1e-4, atol 1e-5·max|grad|); the FD error (~1e-10) is negligible.
      expectClose(r.dlogits!, fd, { rtol: 1e-4, atol: 1e-5 * maxAbs(fd), label: 'dlogits vs finite differences' });
      expectClose([r.loss], [lossAt(logits)], { rtol: 1e-4, atol: 1e-6, label: 'loss' });
      res.destroy();
    });
  }
});
