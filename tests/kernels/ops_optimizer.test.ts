// AdamW and SGD steps, the sum-of-squares reduction behind clip_grad_norm_, and in-place scaling: GPU
// against the float64 twins in src/oracle/, and against the golden PyTorch float64 step: one clipped
// AdamW step on every tiny model's golden gradients vs post_step.param.*, and the global gradient norm
// of the golden gradients vs grad_norm.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { tally } from '../helpers/tally.ts';
import { maxAbs } from '../helpers/close.ts';
import { parseSafeTensors, toF32, toF64, type SafeTensors } from '../../src/io/safetensors.ts';
import * as optRef from '../../src/oracle/optimizer.ts';
import * as normRef from '../../src/oracle/grad_norm.ts';
import { adamw_step, sgd_step } from '../../src/kernels/optimizer.ts';
import { clipCoef, globalNorm, scale_forward, sumsq_forward } from '../../src/kernels/grad_norm.ts';

const check = tally('ops_optimizer');
const GOLDEN = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'golden', 'models');
const MODELS = readdirSync(GOLDEN).filter((m) => existsSync(join(GOLDEN, m, 'golden.safetensors'))).sort();
const load = (file: string): SafeTensors => parseSafeTensors(new Uint8Array(readFileSync(file)), file);

/** Gradients with the awkward cases: exact zeros, values below eps, huge values (g^2 still finite in f32). */
function grads(rng: Rng, n: number): Float32Array {
  const g = rng.f32(n, 0.1);
  g.set([0, 1e-30, -1e-12, 1e-8, -1e-8, 1e15, -1e15].slice(0, n));
  return g;
}

describe('adamw_step (GPU vs float64 twin)', () => {
  for (const n of [1, 7, 29_197, 269_697]) {
    it(`n=${n}: 5 steps, weight decay, clip scale`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(n);
      const h = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradScale: 0.37 };
      const p0 = rng.f32(n);
      const [param, m, v] = [gpu.upload('param', p0), gpu.upload('m', new Float32Array(n)), gpu.upload('v', new Float32Array(n))];
      const [rp, rm, rv] = [Float64Array.from(p0), new Float64Array(n), new Float64Array(n)];
      let gmax = 0;
      for (let step = 1; step <= 5; step++) {
        const g = grads(rng, n);
        gmax = Math.max(gmax, maxAbs(g) * h.gradScale);
        const rec = gpu.recorder(`adamw step ${step}`);
        adamw_step(rec, { param, grad: gpu.upload('grad', g), m, v, n, step, ...h });
        await rec.submit();
        optRef.adamw_step(rp, g, rm, rv, { step, ...h });
        // Each step rounds p (decay, update) and m, v a few times in f32 (~4u relative each) and the
        // update lr·m̂/(√v̂ + eps) with |m̂/√v̂| ≲ 3 carries ~10u relative: after 5 steps ≲ 20u·|p| +
        // 150u·lr. So rtol 2e-6 (~30u) and atol 1e-5·lr. m can cancel to ~0 across steps of opposite
        // sign: its atol is relative to the largest gradient seen (1e-6·gmax); v sums squares: rtol only.
        check(await gpu.readF32(param, n), rp, { rtol: 2e-6, atol: 1e-5 * h.lr, label: `param n=${n} step ${step}`, key: 'adamw_step param' });
        check(await gpu.readF32(m, n), rm, { rtol: 2e-6, atol: 1e-6 * gmax, label: `m n=${n} step ${step}`, key: 'adamw_step m (exp_avg)' });
        check(await gpu.readF32(v, n), rv, { rtol: 2e-6, atol: 1e-30, label: `v n=${n} step ${step}`, key: 'adamw_step v (exp_avg_sq)' });
      }
    });
  }

  it('split into 4 KiB binding windows (29 dispatches): same tolerance against the twin', async () => {
    const gpu = await testGpu();
    const n = 29_197;
    const rng = new Rng(77);
    const h = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, gradScale: 1, step: 1 };
    const [p0, g] = [rng.f32(n), grads(rng, n)];
    const param = gpu.upload('param', p0);
    const rec = gpu.recorder('adamw windows');
    adamw_step(rec, { param, grad: gpu.upload('g', g), m: gpu.upload('m', new Float32Array(n)), v: gpu.upload('v', new Float32Array(n)), n, ...h, limit: 4096 });
    await rec.submit();
    const rp = Float64Array.from(p0);
    optRef.adamw_step(rp, g, new Float64Array(n), new Float64Array(n), h);
    check(await gpu.readF32(param, n), rp, { rtol: 2e-6, atol: 1e-5 * h.lr, label: 'param (windows)', key: 'adamw_step param' });
  });

  it('rejects a step that is not a 1-based integer', async () => {
    const gpu = await testGpu();
    const b = gpu.createBuffer('b', 16);
    const args = { param: b, grad: b, m: b, v: b, n: 4, lr: 1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, gradScale: 1 };
    expect(() => adamw_step(gpu.recorder('bad step'), { ...args, step: 0 })).toThrow(/step must be a 1-based integer, got 0/);
  });
});

describe('adamw_step on the golden gradients (clip_grad_norm_ 1.0, AdamW lr 1e-2, PyTorch float64)', () => {
  for (const model of MODELS) {
    it(model, async () => {
      const gpu = await testGpu();
      const golden = load(join(GOLDEN, model, 'golden.safetensors'));
      const weights = load(join(GOLDEN, model, 'model.safetensors'));
      const coef = toF64(golden, 'grad_clip_coef')[0];
      const h = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, gradScale: coef, step: 1 };
      const names = [...weights.tensors.keys()];
      expect(names.length).toBeGreaterThan(5);
      const rec = gpu.recorder(`golden adamw ${model}`);
      const out = names.map((name) => {
        const p = toF32(weights, name);
        const g = toF32(golden, `grad.${name}`);
        const param = gpu.upload(name, p);
        adamw_step(rec, { param, grad: gpu.upload(`grad.${name}`, g), m: gpu.upload('m', new Float32Array(p.length)), v: gpu.upload('v', new Float32Array(p.length)), n: p.length, ...h });
        return { name, param, p, g };
      });
      await rec.submit();
      for (const { name, param, p, g } of out) {
        const want = toF64(golden, `post_step.param.${name}`);
        // The README's tolerance for this stage (rtol 1e-6, atol 1e-6; its float32 replay uses 0.058).
        check(await gpu.readF32(param, p.length), want, { rtol: 1e-6, atol: 1e-6, label: `${model} ${name}`, key: 'golden AdamW step (GPU)' });
        // The float64 twin on the same f32 inputs: tests the twin itself against PyTorch.
        const rp = Float64Array.from(p);
        optRef.adamw_step(rp, g, new Float64Array(p.length), new Float64Array(p.length), h);
        check(rp, want, { rtol: 1e-6, atol: 1e-6, label: `twin ${model} ${name}`, key: 'golden AdamW step (float64 twin)' });
      }
    });
  }
});

describe('sumsq_forward and the global gradient norm', () => {
  // 1M elements: the per-thread run K grows past 1 and the finish pass sums ~1000 partials.
  for (const n of [0, 1, 255, 257, 269_697, 1_000_003]) {
    it(`n=${n} vs float64 twin`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(n + 9);
      const x = rng.f32(n);
      x.set([1e15, -1e-20, 0, 3].slice(0, n));
      const out = gpu.upload('out', new Float32Array([NaN, NaN, NaN]));
      const rec = gpu.recorder('sumsq test');
      sumsq_forward(rec, { inp: gpu.upload('x', n ? x : new Float32Array(1)), n, out, outIndex: 1 });
      await rec.submit();
      const got = await gpu.readF32(out, 3);
      // Positive terms: the f32 error is at most depth·u relative, depth = K + P/WG + 2·log2(WG) ≤ 30 here
      // (1.8e-6); rtol 1e-5. The neighbouring slots must stay untouched.
      check([got[1]], [normRef.sumsq_forward(x)], { rtol: 1e-5, atol: 0, label: `sumsq n=${n}`, key: 'sumsq_forward' });
      expect([got[0], got[2]]).toEqual([NaN, NaN]);
    });
  }

  it('n=269697 split into 64 KiB binding windows (17 dispatches, partials at offsets)', async () => {
    const gpu = await testGpu();
    const n = 269_697;
    const x = new Rng(5).f32(n, 3);
    const out = gpu.createBuffer('out', 4);
    const rec = gpu.recorder('sumsq windows');
    sumsq_forward(rec, { inp: gpu.upload('x', x), n, out, outIndex: 0, limit: 65_536 });
    await rec.submit();
    check(await gpu.readF32(out, 1), [normRef.sumsq_forward(x)], { rtol: 1e-5, atol: 0, label: 'sumsq windows', key: 'sumsq_forward' });
  });

  for (const model of MODELS) {
    it(`${model}: global norm of grad.* vs golden grad_norm, clip coefficient vs grad_clip_coef`, async () => {
      const gpu = await testGpu();
      const golden = load(join(GOLDEN, model, 'golden.safetensors'));
      const names = [...golden.tensors.keys()].filter((k) => k.startsWith('grad.'));
      const out = gpu.createBuffer('sumsq', names.length * 4);
      const rec = gpu.recorder(`grad norm ${model}`);
      names.forEach((name, i) => {
        const g = toF32(golden, name);
        sumsq_forward(rec, { inp: gpu.upload(name, g), n: g.length, out, outIndex: i });
      });
      await rec.submit();
      const norm = globalNorm(await gpu.readF32(out, names.length));
      // The README's model tolerance for grad_norm (rtol 1e-4, atol 1e-6).
      check([norm], [toF64(golden, 'grad_norm')[0]], { rtol: 1e-4, atol: 1e-6, label: `${model} grad_norm`, key: 'golden grad_norm' });
      check([clipCoef(norm, 1.0)], [toF64(golden, 'grad_clip_coef')[0]], { rtol: 1e-4, atol: 1e-6, label: `${model} clip coef`, key: 'golden grad_clip_coef' });
    });
  }

  it('clipCoef caps at 1 and refuses a non-finite norm', () => {
    expect(clipCoef(0.5, 1)).toBe(1);
    expect(clipCoef(3, 1)).toBeCloseTo(1 / (3 + 1e-6), 15);
    expect(() => clipCoef(NaN, 1)).toThrow(/gradient norm is NaN/);
    expect(() => clipCoef(Infinity, 1)).toThrow(/gradient norm is Infinity/);
  });
});

describe('scale_forward', () => {
  it('n=269697 in place', async () => {
    const gpu = await testGpu();
    const n = 269_697;
    const x = new Rng(4).f32(n, 10);
    const buf = gpu.upload('x', x);
    const rec = gpu.recorder('scale test');
    scale_forward(rec, { x: buf, n, factor: 0.123 });
    await rec.submit();
    // One f32 rounding of x·f32(factor): 1 ulp (2^-23) relative, plus f32(0.123)'s own rounding (2^-24).
    check(await gpu.readF32(buf, n), normRef.scale_forward(x, 0.123), { rtol: 1.8e-7, atol: 0, label: 'scale', key: 'scale_forward' });
  });
});

describe('sgd_step (GPU vs float64 twin)', () => {
  const configs = [
    { name: 'plain', momentum: 0, weightDecay: 0 },
    { name: 'weight decay + momentum', momentum: 0.9, weightDecay: 0.01 },
    { name: 'momentum + dampening', momentum: 0.8, dampening: 0.3, weightDecay: 0 },
    { name: 'nesterov', momentum: 0.9, nesterov: true, weightDecay: 0.05 },
  ];
  for (const c of configs) {
    it(`${c.name}: 3 steps, n=29197`, async () => {
      const gpu = await testGpu();
      const n = 29_197;
      const rng = new Rng(c.name.length);
      const h = { lr: 0.05, gradScale: 0.6, ...c };
      const p0 = rng.f32(n);
      const param = gpu.upload('param', p0);
      const buf = gpu.createBuffer('buf', n * 4);
      const rp = Float64Array.from(p0);
      const rb = new Float64Array(n);
      for (let step = 1; step <= 3; step++) {
        const g = grads(rng, n).map((v) => Math.max(-1e3, Math.min(1e3, v)));
        const rec = gpu.recorder('sgd');
        sgd_step(rec, { param, grad: gpu.upload('g', g), n, step, buf: c.momentum ? buf : undefined, ...h });
        await rec.submit();
        optRef.sgd_step(rp, g, c.momentum ? rb : null, { step, ...h });
        // A handful of f32 roundings per step on values of size |p| and lr·|d| (|d| ≤ ~2e3 with the
        // clamped extremes): rtol 2e-6, atol 1e-6·lr·max|d| over 3 steps.
        check(await gpu.readF32(param, n), rp, { rtol: 2e-6, atol: 1e-6 * h.lr * 2e3, label: `${c.name} param step ${step}`, key: 'sgd_step param' });
        if (c.momentum) check(await gpu.readF32(buf, n), rb, { rtol: 2e-6, atol: 1e-6 * 2e3, label: `${c.name} buf step ${step}`, key: 'sgd_step momentum_buffer' });
      }
    });
  }

  it('refuses momentum without a buffer, and nesterov without momentum', async () => {
    const gpu = await testGpu();
    const b = gpu.createBuffer('b', 16);
    const a = { param: b, grad: b, n: 4, lr: 1, weightDecay: 0, gradScale: 1 };
    expect(() => sgd_step(gpu.recorder('x'), { ...a, momentum: 0.9 })).toThrow(/needs a momentum buffer/);
    expect(() => sgd_step(gpu.recorder('x'), { ...a, nesterov: true, buf: b })).toThrow(/nesterov needs momentum/);
  });
});
