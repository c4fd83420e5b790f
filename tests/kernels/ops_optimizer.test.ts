// AdamW and SGD steps over several tensors per launch (with their Σ Δθ² per tensor), the sum-of-squares
// reduction behind clip_grad_norm_ and its coefficient made on the GPU, and in-place scaling: GPU against
// the float64 twins in src/oracle/, and against the golden PyTorch float64 step: one clipped AdamW step
// on every tiny model's golden gradients (every tensor in one launch, the coefficient from the GPU's own
// norm) vs post_step.param.*, and the global gradient norm and coefficient vs grad_norm / grad_clip_coef.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { asAdapterClass, spyDispatches, testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { tally } from '../helpers/tally.ts';
import { maxAbs } from '../helpers/close.ts';
import { parseSafeTensors, toF32, toF64, type SafeTensors } from '../../src/io/safetensors.ts';
import * as optRef from '../../src/oracle/optimizer.ts';
import * as normRef from '../../src/oracle/grad_norm.ts';
import { adamw_step, sgd_step } from '../../src/kernels/optimizer.ts';
import { clip_coef_forward, sumsqSlots, sumsq_forward, sweepThreads } from '../../src/kernels/grad_norm.ts';
import { adapterClass, isCpuAdapter, statsSince, type Gpu } from '../../src/gpu/context.ts';

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

/** A clip buffer as sumsq_forward's clip_coef writes it: [coef, ok, total norm]. */
const clipOf = (gpu: Gpu, coef: number, ok = true) => gpu.upload('clip', new Float32Array([coef, ok ? 1 : 0, 0]));

/** Σ (a − b)², float64. */
const sqDist = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((s, x, i) => s + (x - b[i]) ** 2, 0);

describe('adamw_step (GPU vs float64 twin)', () => {
  // Odd sizes, one launch over all of them, with their own weight decay; 5 steps. As on a GPU: three windows
  // per dispatch (adamw_step_x3: two launches of three, the seventh alone), the per-thread run K as short as
  // MAX_PARTS allows; and as on this adapter: one window per dispatch (adamw_step).
  const SIZES = [1, 7, 29_197, 269_697, 3, 5_001, 64];
  for (const [slots, cls] of [[3, 'gpu'], [1, 'this adapter'], [1, 'swiftshader']] as const)
  it(`n=${SIZES.join(', ')} in one launch, ${slots} per dispatch (${cls}'s workgroups): 5 steps, weight decay per tensor, clip scale, Σ Δθ² per tensor`, async () => {
    const gpu = cls === 'this adapter' ? await testGpu() : asAdapterClass(await testGpu(), cls);
    const rng = new Rng(3);
    const h = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, gradScale: 0.37, slots };
    const decay = (t: number) => [0.1, 0, 0.3, 0.01, 0.2, 0, 0.05][t];
    const p0 = SIZES.map((n) => rng.f32(n));
    const gpuT = SIZES.map((n, t) => ({ param: gpu.upload('param', p0[t]), m: gpu.upload('m', new Float32Array(n)), v: gpu.upload('v', new Float32Array(n)), n, weightDecay: decay(t) }));
    const ref = p0.map((p) => ({ p: Float64Array.from(p), m: new Float64Array(p.length), v: new Float64Array(p.length) }));
    const out = gpu.createBuffer('out', SIZES.length * 4);
    const clip = clipOf(gpu, h.gradScale);
    let gmax = 0;
    for (let step = 1; step <= 5; step++) {
      const g = SIZES.map((n) => grads(rng, n));
      gmax = Math.max(gmax, ...g.map((x) => maxAbs(x) * h.gradScale));
      const before = await Promise.all(gpuT.map((t) => gpu.readF32(t.param, t.n)));
      const rec = gpu.recorder(`adamw step ${step}`);
      const work = { ...gpu.stats };
      adamw_step(rec, { tensors: gpuT.map((t, i) => ({ ...t, grad: gpu.upload('grad', g[i]) })), clip, out, step, ...h });
      await rec.submit();
      // Dispatches: the windows' (3 per x3 dispatch) and one finish.
      expect(statsSince(gpu.stats, work).dispatches).toBe((slots === 3 ? 2 + 1 : SIZES.length) + 1);
      ref.forEach((r, t) => optRef.adamw_step(r.p, g[t], r.m, r.v, { step, ...h, weightDecay: decay(t) }));
      const gotDd = await gpu.readF32(out, SIZES.length);
      for (const [t, n] of SIZES.entries()) {
        const after = await gpu.readF32(gpuT[t].param, n);
        // Each step rounds p (decay, update) and m, v a few times in f32 (~4u relative each) and the
        // update lr·m̂/(√v̂ + eps) with |m̂/√v̂| ≲ 3 carries ~10u relative: after 5 steps ≲ 20u·|p| +
        // 150u·lr. So rtol 2e-6 (~30u) and atol 1e-5·lr. m can cancel to ~0 across steps of opposite
        // sign: its atol is relative to the largest gradient seen (1e-6·gmax); v sums squares: rtol only.
        check(await gpu.readF32(gpuT[t].param, n), ref[t].p, { rtol: 2e-6, atol: 1e-5 * h.lr, label: `param n=${n} step ${step}`, key: 'adamw_step param' });
        check(await gpu.readF32(gpuT[t].m, n), ref[t].m, { rtol: 2e-6, atol: 1e-6 * gmax, label: `m n=${n} step ${step}`, key: 'adamw_step m (exp_avg)' });
        check(await gpu.readF32(gpuT[t].v, n), ref[t].v, { rtol: 2e-6, atol: 1e-30, label: `v n=${n} step ${step}`, key: 'adamw_step v (exp_avg_sq)' });
        // Σ Δθ² of the weights the kernel wrote, in float64 from the read-back θ before and after: the
        // kernel's f32 differences are exact or off by u, the f32 sum of squares by depth·u ≤ 90u (as
        // sumsq): rtol 1e-5.
        check([gotDd[t]], [sqDist(after, before[t])], { rtol: 1e-5, atol: 0, label: `Σ Δθ² n=${n} step ${step}`, key: 'adamw_step Σ Δθ²' });
      }
    }
  });

  for (const slots of [3, 1] as const)
  it(`split into 4 KiB binding windows (29 windows, ${slots} per dispatch): same tolerance against the twin`, async () => {
    const gpu = await testGpu();
    const n = 29_197;
    const rng = new Rng(77);
    const h = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, gradScale: 1, step: 1, slots };
    const [p0, g] = [rng.f32(n), grads(rng, n)];
    const param = gpu.upload('param', p0);
    const out = gpu.createBuffer('out', 4);
    const rec = gpu.recorder('adamw windows');
    adamw_step(rec, { tensors: [{ param, grad: gpu.upload('g', g), m: gpu.upload('m', new Float32Array(n)), v: gpu.upload('v', new Float32Array(n)), n, weightDecay: h.weightDecay }], clip: clipOf(gpu, 1), out, ...h, limit: 4096 });
    await rec.submit();
    const rp = Float64Array.from(p0);
    optRef.adamw_step(rp, g, new Float64Array(n), new Float64Array(n), h);
    const after = await gpu.readF32(param, n);
    check(after, rp, { rtol: 2e-6, atol: 1e-5 * h.lr, label: 'param (windows)', key: 'adamw_step param' });
    check(await gpu.readF32(out, 1), [sqDist(after, p0)], { rtol: 1e-5, atol: 0, label: 'Σ Δθ² (windows)', key: 'adamw_step Σ Δθ²' });
  });

  it('three windows per dispatch and one give bitwise the same weights, moments and Σ Δθ² (same per-thread runs)', async () => {
    const gpu = asAdapterClass(await testGpu(), 'gpu');
    const sizes = [5, 4_099, 1, 70_001, 333];
    const rng = new Rng(21);
    const p0 = sizes.map((n) => rng.f32(n));
    const g = sizes.map((n) => grads(rng, n));
    const run = async (slots: 1 | 3) => {
      const tensors = sizes.map((n, t) => ({ param: gpu.upload('param', p0[t]), grad: gpu.upload('grad', g[t]), m: gpu.upload('m', new Float32Array(n)), v: gpu.upload('v', new Float32Array(n)), n, weightDecay: [0.1, 0, 0.02, 0.3, 0][t] }));
      const out = gpu.createBuffer('out', sizes.length * 4);
      for (const step of [1, 2]) {
        const rec = gpu.recorder(`adamw ${slots}`);
        adamw_step(rec, { tensors, clip: clipOf(gpu, 0.8), out, lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, step, slots });
        await rec.submit();
      }
      const read = (b: GPUBuffer, n: number) => gpu.readF32(b, n);
      return { dd: await read(out, sizes.length), state: await Promise.all(tensors.flatMap((t) => [read(t.param, t.n), read(t.m, t.n), read(t.v, t.n)])) };
    };
    const [one, three] = [await run(1), await run(3)];
    expect(three.dd).toEqual(one.dd);
    three.state.forEach((a, k) => expect(a, `buffer ${k}`).toEqual(one.state[k]));
    expect(one.state[0]).not.toEqual(p0[0]); // it stepped
  });

  it('writes nothing when the clip buffer says the norm is not finite (ok = 0)', async () => {
    const gpu = await testGpu();
    const n = 1031;
    const p0 = new Rng(8).f32(n);
    const [param, m, v] = [gpu.upload('param', p0), gpu.upload('m', new Float32Array(n)), gpu.upload('v', new Float32Array(n))];
    const out = gpu.upload('out', new Float32Array([NaN]));
    const rec = gpu.recorder('adamw not ok');
    const g = new Rng(9).f32(n);
    adamw_step(rec, { tensors: [{ param, grad: gpu.upload('g', g), m, v, n, weightDecay: 0.1 }], clip: clipOf(gpu, NaN, false), out, lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: 1 });
    await rec.submit();
    expect(await gpu.readF32(param, n)).toEqual(p0);
    expect([...(await gpu.readF32(m, n)), ...(await gpu.readF32(v, n))].every((x) => x === 0)).toBe(true);
    expect(await gpu.readF32(out, 1)).toEqual(new Float32Array([0]));
  });

  it('rejects a step that is not a 1-based integer', async () => {
    const gpu = await testGpu();
    const b = gpu.createBuffer('b', 16);
    const args = { tensors: [{ param: b, grad: b, m: b, v: b, n: 4, weightDecay: 0 }], clip: b, out: b, lr: 1, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
    expect(() => adamw_step(gpu.recorder('bad step'), { ...args, step: 0 })).toThrow(/step must be a 1-based integer, got 0/);
  });
});

describe('adamw_step on the golden gradients (clip_grad_norm_ 1.0, AdamW lr 1e-2, PyTorch float64)', () => {
  for (const model of MODELS) {
    it(`${model}: every tensor in one launch, the clip coefficient made on the GPU`, async () => {
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
        return { name, p, g, param: gpu.upload(name, p), grad: gpu.upload(`grad.${name}`, g), m: gpu.upload('m', new Float32Array(p.length)), v: gpu.upload('v', new Float32Array(p.length)), n: p.length, weightDecay: 0 };
      });
      const sums = gpu.createBuffer('sumsq', names.length * 4);
      const clip = gpu.createBuffer('clip', 12);
      sumsq_forward(rec, { inputs: out.map((t) => ({ inp: t.grad, n: t.n })), out: sums });
      clip_coef_forward(rec, { sumsq: sums, P: names.length, maxNorm: 1.0, clip });
      adamw_step(rec, { tensors: out, clip, out: gpu.createBuffer('dd', names.length * 4), ...h });
      await rec.submit();
      check([(await gpu.readF32(clip, 1))[0]], [coef], { rtol: 1e-4, atol: 1e-6, label: `${model} clip coef (GPU)`, key: 'golden grad_clip_coef' });
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

describe('sumsq_forward, clip_coef and the global gradient norm', () => {
  // 1M elements: the per-thread run K is 64 on a CPU adapter (MIN_RUN; the finish sums 62 partials), 4 on a
  // GPU (977 partials); SwiftShader's workgroups of 16 (sweepThreads) write 977 of 64 each; n = 0 sums to 0.
  const SIZES = [0, 1, 255, 257, 269_697, 1_000_003];
  for (const cls of ['this adapter', 'gpu', 'swiftshader'] as const)
  it(`n=${SIZES.join(', ')} in one launch vs float64 twin (${cls}'s run K and workgroup)`, async () => {
    const gpu = cls === 'this adapter' ? await testGpu() : asAdapterClass(await testGpu(), cls);
    expect(sweepThreads(gpu)).toBe(adapterClass(gpu.adapter) === 'swiftshader' ? 16 : 256);
    const xs = SIZES.map((n) => {
      const x = new Rng(n + 9).f32(n);
      // Extremes in the small tensors only: a 1e30 square would hide a large tensor's missing elements.
      if (n < 1000) x.set([1e15, -1e-20, 0, 3].slice(0, n));
      return x;
    });
    const out = gpu.upload('out', new Float32Array(SIZES.length + 1).fill(NaN));
    const rec = gpu.recorder('sumsq test');
    sumsq_forward(rec, { inputs: xs.map((x) => ({ inp: gpu.upload('x', x.length ? x : new Float32Array(1)), n: x.length })), out });
    await rec.submit();
    const got = await gpu.readF32(out, SIZES.length + 1);
    // Positive terms: the f32 error is at most depth·u relative, depth = K + P/WG + 2·log2(WG) ≤ 133 here
    // (K = 64, WG = 256: 5.4e-6; K = 4: 24 → 1.4e-6; WG = 16: 64 + 61 + 8 → 7.9e-6); rtol 1e-5. The slot past the last tensor stays untouched.
    check(got.subarray(0, SIZES.length), xs.map((x) => normRef.sumsq_forward(x)), { rtol: 1e-5, atol: 0, label: 'sumsq', key: 'sumsq_forward' });
    expect(got[SIZES.length]).toBeNaN();
  });

  it('n=269697 split into 64 KiB binding windows (17 dispatches, partials at offsets), beside a small tensor', async () => {
    const gpu = await testGpu();
    const n = 269_697;
    const x = new Rng(5).f32(n, 3);
    const y = new Rng(6).f32(301);
    const out = gpu.createBuffer('out', 8);
    const rec = gpu.recorder('sumsq windows');
    sumsq_forward(rec, { inputs: [{ inp: gpu.upload('x', x), n }, { inp: gpu.upload('y', y), n: y.length }], out, limit: 65_536 });
    await rec.submit();
    check(await gpu.readF32(out, 2), [normRef.sumsq_forward(x), normRef.sumsq_forward(y)], { rtol: 1e-5, atol: 0, label: 'sumsq windows', key: 'sumsq_forward' });
  });

  it('one to six windows per dispatch give bitwise the same sums (same per-thread runs); CPU adapters take one, GPUs six; other counts refused', async () => {
    const gpu = await testGpu();
    const sizes = [7, 70_001, 1, 4_099, 333, 12_345, 2, 99_999, 5];
    const rng = new Rng(33);
    const inputs = sizes.map((n) => ({ inp: gpu.upload('x', rng.f32(n, 2)), n }));
    const sums = async (slots?: number) => {
      const out = gpu.createBuffer('out', sizes.length * 4);
      const rec = gpu.recorder(`sumsq ${slots}`);
      sumsq_forward(rec, { inputs, out, slots, limit: 65_536 }); // windows of 16,384 elements: 70,001 and 99,999 take several
      const d = rec.kernels.length;
      await rec.submit();
      return { got: await gpu.readF32(out, sizes.length), dispatches: d };
    };
    const windows = sizes.reduce((w, n) => w + Math.ceil(n / 16_384), 0);
    const one = await sums(1);
    expect(one.dispatches).toBe(windows + 1); // a window each, and the finish
    for (const slots of [2, 3, 4, 5, 6]) {
      const r = await sums(slots);
      expect(r.got, `${slots} slots`).toEqual(one.got);
      expect(r.dispatches, `${slots} slots`).toBe(Math.ceil(windows / slots) + 1);
    }
    expect(sumsqSlots(gpu)).toBe(isCpuAdapter(gpu.adapter) ? 1 : 6);
    expect(sumsqSlots(asAdapterClass(gpu, 'gpu'))).toBe(6);
    const out = gpu.createBuffer('out', sizes.length * 4);
    const bad = gpu.recorder('bad slots');
    for (const slots of [0, 7, 2.5]) expect(() => sumsq_forward(bad, { inputs, out, slots })).toThrow(/^sumsq_forward: slots must be an integer in \[1, 6\], got [^\n]*$/);
    await bad.submit();
  });

  it("n = 2^24 + 3: the run K grows past 64 so that the tensor writes at most ~1024 partials at 256 threads; SwiftShader's 16 keep that K and write 16× as many", async () => {
    const base = await testGpu();
    const n = 2 ** 24 + 3;
    const x = Float32Array.from({ length: n }, (_, i) => ((i * 7919) % 1999) / 1000 - 1);
    x[n - 1] = 64; // 7e-4 of the sum, past the tolerance: a lost tail or last partial fails at either width
    const want = [normRef.sumsq_forward(x)];
    const inp = base.upload('x', x);
    for (const gpu of [base, asAdapterClass(base, 'swiftshader')]) {
      const wg = sweepThreads(gpu);
      const out = gpu.createBuffer('out', 4);
      const rec = gpu.recorder('sumsq big');
      const groups = spyDispatches(rec, (d) => (d.entryPoint ? undefined : (d.workgroups[0] * (d.workgroups[1] ?? 1)))); // the sweep's (main), not the finish's
      sumsq_forward(rec, { inputs: [{ inp, n }], out });
      await rec.submit();
      // K = ceil(n / (256 · 1024)) = 65 at any width: a workgroup per ceil(n / (wg · 65)) partials (1,009 at 256, 16,132 at 16).
      const P = Math.ceil(n / (wg * 65));
      expect(groups).toEqual([P]);
      // depth = K + P/wg + 2·log2(wg): 65 + 4 + 16 = 85 (5.1e-6) at 256; 65 + 1,009 + 8 = 1,082 (6.4e-5) at 16.
      const rtol = 1.5 * (65 + P / wg + 2 * Math.log2(wg)) * 2 ** -24;
      check(await gpu.readF32(out, 1), want, { rtol: Math.max(rtol, 1e-5), atol: 0, label: `sumsq 2^24 + 3 at ${wg} threads`, key: 'sumsq_forward' });
    }
  });

  for (const model of MODELS) {
    it(`${model}: global norm of grad.* vs golden grad_norm, clip coefficient vs grad_clip_coef (on the GPU)`, async () => {
      const gpu = await testGpu();
      const golden = load(join(GOLDEN, model, 'golden.safetensors'));
      const names = [...golden.tensors.keys()].filter((k) => k.startsWith('grad.'));
      const sums = gpu.createBuffer('sumsq', names.length * 4);
      const clip = gpu.createBuffer('clip', 12);
      const rec = gpu.recorder(`grad norm ${model}`);
      sumsq_forward(rec, { inputs: names.map((name) => ({ inp: gpu.upload(name, toF32(golden, name)), n: toF32(golden, name).length })), out: sums });
      clip_coef_forward(rec, { sumsq: sums, P: names.length, maxNorm: 1.0, clip });
      await rec.submit();
      const [coef, ok, norm] = await gpu.readF32(clip, 3);
      expect(ok).toBe(1);
      // The README's model tolerance for grad_norm (rtol 1e-4, atol 1e-6).
      check([norm], [toF64(golden, 'grad_norm')[0]], { rtol: 1e-4, atol: 1e-6, label: `${model} grad_norm`, key: 'golden grad_norm' });
      check([coef], [toF64(golden, 'grad_clip_coef')[0]], { rtol: 1e-4, atol: 1e-6, label: `${model} clip coef`, key: 'golden grad_clip_coef' });
    });
  }

  it('clip_coef vs its twin: capped at 1, max_norm 0 means 1, ~700 tensors, and ok = 0 for an infinite or NaN sum', async () => {
    const gpu = await testGpu();
    const rng = new Rng(21);
    const many = Float32Array.from(rng.f32(700, 1), (x) => x * x * 1e4); // 700 > WG: the strided pre-sum runs
    const cases: [Float32Array, number][] = [
      [many, 1],
      [many, 1e9], // coefficient capped at 1
      [many, 0], // no clipping
      [Float32Array.from([4, 5]), 0.5],
      [Float32Array.from([4, Infinity, 1]), 1],
      [Float32Array.from([NaN, 1]), 1],
    ];
    for (const [sums, maxNorm] of cases) {
      const clip = gpu.createBuffer('clip', 12);
      const rec = gpu.recorder('clip');
      clip_coef_forward(rec, { sumsq: gpu.upload('sums', sums), P: sums.length, maxNorm, clip });
      await rec.submit();
      const [coef, ok, norm] = await gpu.readF32(clip, 3);
      const want = normRef.clip_coef(sums, maxNorm);
      expect(ok, `ok for ${sums.length} sums`).toBe(want.ok ? 1 : 0);
      if (!want.ok) continue;
      // A float32 tree sum of ≤ 700 positive terms (≤ 12 levels, ~1e-6) then √ and a division: rtol 2e-6.
      check([coef, norm], [want.coef, want.norm], { rtol: 2e-6, atol: 0, label: `clip max_norm ${maxNorm}`, key: 'clip_coef' });
    }
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
      const [out, clip] = [gpu.createBuffer('out', 4), clipOf(gpu, h.gradScale)];
      const rp = Float64Array.from(p0);
      const rb = new Float64Array(n);
      for (let step = 1; step <= 3; step++) {
        const g = grads(rng, n).map((v) => Math.max(-1e3, Math.min(1e3, v)));
        const before = await gpu.readF32(param, n);
        const rec = gpu.recorder('sgd');
        sgd_step(rec, { tensors: [{ param, grad: gpu.upload('g', g), n, weightDecay: c.weightDecay, buf: c.momentum ? buf : undefined }], clip, out, step, ...h });
        await rec.submit();
        optRef.sgd_step(rp, g, c.momentum ? rb : null, { step, ...h });
        // A handful of f32 roundings per step on values of size |p| and lr·|d| (|d| ≤ ~2e3 with the
        // clamped extremes): rtol 2e-6, atol 1e-6·lr·max|d| over 3 steps.
        check(await gpu.readF32(param, n), rp, { rtol: 2e-6, atol: 1e-6 * h.lr * 2e3, label: `${c.name} param step ${step}`, key: 'sgd_step param' });
        // Σ Δθ² from the read-back weights before and after, as for AdamW: rtol 1e-5.
        check(await gpu.readF32(out, 1), [sqDist(await gpu.readF32(param, n), before)], { rtol: 1e-5, atol: 0, label: `${c.name} Σ Δθ² step ${step}`, key: 'sgd_step Σ Δθ²' });
        if (c.momentum) check(await gpu.readF32(buf, n), rb, { rtol: 2e-6, atol: 1e-6 * 2e3, label: `${c.name} buf step ${step}`, key: 'sgd_step momentum_buffer' });
      }
    });
  }

  it('refuses momentum without a buffer, and nesterov without momentum', async () => {
    const gpu = await testGpu();
    const b = gpu.createBuffer('b', 16);
    const a = { clip: b, out: b, lr: 1 };
    const t = { param: b, grad: b, n: 4, weightDecay: 0 };
    expect(() => sgd_step(gpu.recorder('x'), { ...a, tensors: [t], momentum: 0.9 })).toThrow(/needs a momentum buffer/);
    expect(() => sgd_step(gpu.recorder('x'), { ...a, tensors: [{ ...t, buf: b }], nesterov: true })).toThrow(/nesterov needs momentum/);
  });
});
