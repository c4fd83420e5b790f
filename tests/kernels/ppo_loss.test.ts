// ppo_loss_forward (GPU) against its float64 twin (src/oracle/ppo_loss.ts), for every policy mode and KL
// estimator: odd shapes (T above the workgroup size, a single token), extreme inputs (log-ratios past the
// ±20 clamp and the GSPO cap, KL past its ±10 clamp, A = 0, IS weights 0, fully masked rows); and the twin's
// ∂loss/∂logp and ∂loss/∂entropy against central differences of its own Σ contrib (modes without a
// stop-gradient; gspo_token's straight-through and cispo's detached ratio are checked by the golden cases).
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { expectClose, maxAbs } from '../helpers/close.ts';
import { fdGradient } from '../helpers/fd.ts';
import { Rng } from '../../src/model/rng.ts';
import { ppo_loss_forward } from '../../src/kernels/ppo_loss.ts';
import * as ref from '../../src/oracle/ppo_loss.ts';
import { PPO_INPUTS, PPO_KL, PPO_MODES, type PpoKl, type PpoLossParams, type PpoMode } from '../../src/kernels/types.ts';

const K = PPO_INPUTS.length;

function params(mode: PpoMode, kl: PpoKl): PpoLossParams {
  return {
    mode,
    kl,
    eps_low: 0.2,
    eps_high: 0.28,
    dual_clip: mode === 'clip' || mode === 'gspo_seq' ? 3 : 0,
    ratio_clamp: mode === 'kl_cov' || mode === 'gspo_seq' ? 0 : 20,
    kl_inner: 20,
    kl_outer: 10,
    kl_coef: 0.05,
    ent_coef: 0.01,
    tau_pos: 1,
    tau_neg: 1.05,
    kl_cov_coef: 0.1,
    geo_seq_is: mode === 'geo_mean',
  };
}

interface Inputs {
  logp: Float32Array; // (B, T)
  entropy: Float32Array; // (B, T)
  inp: Float32Array; // (B, T, 8)
}

/** Random inputs; `extreme` adds log-ratios of ±25, KL differences of ±30, A = 0 and IS weights of 0. */
function makeInputs(rng: Rng, B: number, T: number, mode: PpoMode, extreme: boolean): Inputs {
  const N = B * T;
  const logp = Float32Array.from({ length: N }, () => -Math.abs(rng.normal()) * 2 - 0.01);
  const entropy = Float32Array.from({ length: N }, () => Math.abs(rng.normal()) * 3);
  const inp = new Float32Array(K * N);
  for (let b = 0; b < B; b++) {
    const rowW = 0.5 + rng.next();
    const fullyMasked = B > 2 && b === 1;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = fullyMasked || rng.next() < 0.15 ? 0 : 1;
      // GSPO_SEQ compares one ratio per row with the clip band: keep its rows' log-ratios small.
      const spread = mode === 'gspo_seq' ? 0.05 : 0.4;
      let x = rng.normal() * spread;
      let d = rng.normal() * 0.5;
      let a = rng.normal();
      let isw = 0.2 + rng.next() * 1.8;
      if (extreme && t % 5 === 2) x = t % 2 ? 25 : -25;
      if (extreme && t % 7 === 3) d = t % 2 ? 30 : -30;
      if (extreme && t % 11 === 4) a = 0;
      if (extreme && t % 13 === 5) isw = 0;
      const row = [logp[i] - x, logp[i] - d, a, isw, rng.next() < 0.3 ? 0 : 1, m, m * (mode === 'geo_mean' ? rowW : 0.5 + rng.next()), m * (0.5 + rng.next())];
      // GEO_MEAN weighs a row once: its w_pg is the row's weight at every token.
      if (mode === 'geo_mean') row[6] = rowW;
      inp.set(row, K * i);
    }
  }
  return { logp, entropy, inp };
}

async function runGpu(x: Inputs, B: number, T: number, p: PpoLossParams): Promise<{ out: Float32Array; dlogp: Float32Array; dentropy: Float32Array }> {
  const gpu = await testGpu();
  const N = B * T;
  const bufs = [gpu.upload('logp', x.logp), gpu.upload('entropy', x.entropy), gpu.upload('inp', x.inp), gpu.createBuffer('out', 16 * N), gpu.createBuffer('dlogp', 4 * N), gpu.createBuffer('dent', 4 * N)];
  const [logp, entropy, inputs, out, dlogp, dentropy] = bufs;
  const rec = gpu.recorder('ppo_loss test');
  ppo_loss_forward(rec, { logp, entropy, inputs, out, dlogp, dentropy, B, T, params: p });
  await rec.finish();
  const res = { out: await gpu.readF32(out, 4 * N), dlogp: await gpu.readF32(dlogp, N), dentropy: await gpu.readF32(dentropy, N) };
  for (const b of bufs) b.destroy();
  return res;
}

/** GPU vs twin: rtol 1e-4 and an atol of 1e-5 of the output's largest magnitude (float32 row sums, exp). */
function compare(label: string, gpu: ArrayLike<number>, want: Float64Array): void {
  expectClose(gpu, want, { rtol: 1e-4, atol: 1e-5 * Math.max(1, maxAbs(want)), label });
}

const SHAPES: Array<[number, number]> = [
  [3, 7],
  [5, 300],
  [1, 1],
];

describe('ppo_loss_forward: GPU vs float64 twin', () => {
  for (const mode of PPO_MODES) {
    for (const kl of PPO_KL) {
      it(`${mode}, KL ${kl}: odd shapes, extreme values`, async () => {
        const rng = new Rng(PPO_MODES.indexOf(mode) * 17 + PPO_KL.indexOf(kl) + 1);
        for (const [B, T] of SHAPES) {
          for (const extreme of [false, true]) {
            const x = makeInputs(rng, B, T, mode, extreme);
            const p = params(mode, kl);
            const want = ref.ppo_loss_forward(x.logp, x.entropy, x.inp, B, T, p);
            const got = await runGpu(x, B, T, p);
            const col = (k: number) => Float32Array.from({ length: B * T }, (_, i) => got.out[4 * i + k]);
            const tag = `${mode}/${kl} ${B}x${T}${extreme ? ' extreme' : ''}`;
            compare(`${tag} loss`, col(0), want.loss);
            compare(`${tag} kl`, col(1), want.kl);
            compare(`${tag} contrib`, col(2), want.contrib);
            compare(`${tag} ratio`, col(3), want.ratio);
            compare(`${tag} dlogp`, got.dlogp, want.dlogp);
            compare(`${tag} dentropy`, got.dentropy, want.dentropy);
          }
        }
      });
    }
  }

  it('applies the clamps it is given: ratio ±20, KL ±10, GSPO cap 10, dual clip', () => {
    // One token each, values checked against the formulas directly (not against the kernel's output).
    const one = (mode: PpoMode, kl: PpoKl, logp: number, old: number, refLogp: number, a: number) => {
      const inp = Float64Array.from([old, refLogp, a, 1, 1, 1, 1, 1]);
      return ref.ppo_loss_forward([logp], [0], inp, 1, 1, { ...params(mode, kl), ent_coef: 0 });
    };
    expect(one('clip', 'none', 0, -30, 0, 1).ratio[0]).toBeCloseTo(Math.exp(20), -3); // log-ratio 30 clamped to 20
    expect(one('clip', 'none', 0, -30, 0, 1).dlogp[0]).toBe(0); // beyond the clamp: no gradient
    expect(one('clip', 'none', 0, 5, 0, -1).loss[0]).toBeCloseTo(0.8, 12); // r = e^-5, A = −1: max(−A·r, −A·0.8) = 0.8 < −A·3
    expect(one('clip', 'none', 0, -5, 0, -1).loss[0]).toBeCloseTo(3, 12); // r = e^5 ≫ 3: the dual clip caps the loss at −A·3
    expect(one('clip', 'k3', 0, 0, 30, 1).kl[0]).toBe(10); // exp(20) − 21 clamped to 10
    expect(one('clip', 'k1', -1, 0, 0, 1).kl[0]).toBe(-1);
    expect(one('gspo_token', 'none', 0, -12, 0, 1).ratio[0]).toBeCloseTo(Math.exp(10), 6); // sequence log-ratio 12 capped at 10
  });
});

describe('ppo_loss_forward twin: gradients by central differences', () => {
  const FD_MODES: PpoMode[] = ['clip', 'sapo', 'pg', 'kl_cov', 'geo_mean', 'gspo_seq'];
  for (const mode of FD_MODES) {
    for (const kl of PPO_KL) {
      it(`${mode}, KL ${kl}: ∂Σcontrib/∂logp and ∂Σcontrib/∂entropy`, () => {
        const rng = new Rng(1000 + FD_MODES.indexOf(mode) * 13 + PPO_KL.indexOf(kl));
        const B = 3;
        const T = 6;
        const x = makeInputs(rng, B, T, mode, false);
        const p = params(mode, kl);
        const logp = Float64Array.from(x.logp);
        const entropy = Float64Array.from(x.entropy);
        const total = () => ref.ppo_loss_forward(logp, entropy, x.inp, B, T, p).contrib.reduce((s, v) => s + v, 0);
        const an = ref.ppo_loss_forward(logp, entropy, x.inp, B, T, p);
        expectClose(an.dlogp, fdGradient(total, logp, 1e-6), { rtol: 1e-5, atol: 1e-7, label: `${mode}/${kl} dlogp` });
        expectClose(an.dentropy, fdGradient(total, entropy, 1e-6), { rtol: 1e-5, atol: 1e-7, label: `${mode}/${kl} dentropy` });
      });
    }
  }
});
