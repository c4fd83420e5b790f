// src/grpo/optimizer.ts on random odd-sized tensors against float64 twins: the global and per-group
// gradient norms, clip_grad_norm_'s coefficient (made on the GPU: oracle/grad_norm.ts clip_coef), AdamW
// over three steps (state kept between steps) and SGD with weight decay and momentum (src/oracle/optimizer.ts),
// the update sizes ‖Δθ‖ per group, reset(), the refusal to step on a non-finite gradient (nothing written),
// and the step's GPU work: one submit, one compute pass, P + 2 dispatches (the gradient sweep adds ⌈P/6⌉ + 1
// when step() takes the norms itself), one readback.
import { describe, expect, it } from 'vitest';
import { Optimizer, parseOptimizerConfig, type OptimizerConfig } from '../../src/grpo/optimizer.ts';
import { adamwSlots } from '../../src/kernels/optimizer.ts';
import { isCpuAdapter, statsSince, type Gpu } from '../../src/gpu/context.ts';
import { clip_coef } from '../../src/oracle/grad_norm.ts';
import type { Param } from '../../src/model/layer_ops.ts';
import * as ref from '../../src/oracle/optimizer.ts';
import { tally } from '../helpers/tally.ts';
import { asAdapterClass, testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';

const check = tally('step_optimizer');

// Odd sizes (none a multiple of the 256-thread workgroup); two tensors share a group. The last column: whether
// transformers' Trainer decays the tensor (not biases, not norm weights: trainer.py get_decay_parameter_names).
const SHAPES: [string, number[], string, boolean][] = [
  ['embed.weight', [37, 13], 'embedding', true],
  ['layers.0.q.weight', [13, 13], 'layers.0.attention', true],
  ['layers.0.q.bias', [13], 'layers.0.attention', false],
  ['layers.0.norm.weight', [13], 'layers.0.norms', false],
  ['head.weight', [1031], 'lm_head', true],
];

function setup(seed: number, gradScale = 1) {
  const rng = new Rng(seed);
  const theta = SHAPES.map(([, shape]) => rng.f32(shape.reduce((a, b) => a * b, 1), 0.2));
  // Gradients of mixed magnitudes, some elements tiny (where AdamW's eps matters).
  const grads = SHAPES.map(([, shape], i) => Float32Array.from(rng.f32(shape.reduce((a, b) => a * b, 1), gradScale), (g, k) => (k % 17 === i ? g * 1e-7 : g)));
  return { theta, grads };
}

async function gpuParams(theta: Float32Array[]): Promise<Param[]> {
  const gpu = await testGpu();
  return SHAPES.map(([name, shape, group], i) => ({ name, shape, group, buffer: gpu.upload(name, theta[i]) }));
}

/** Float64 group norms of per-tensor arrays. */
function groupNorms(arrays: ArrayLike<number>[]): Record<string, number> {
  const acc: Record<string, number> = {};
  arrays.forEach((a, i) => {
    let s = 0;
    for (let k = 0; k < a.length; k++) s += a[k] * a[k];
    acc[SHAPES[i][2]] = (acc[SHAPES[i][2]] ?? 0) + s;
  });
  for (const g of Object.keys(acc)) acc[g] = Math.sqrt(acc[g]);
  return acc;
}

const cases: [string, OptimizerConfig, number][] = [
  ['AdamW with weight decay, clipped', { name: 'adamw', lr: 1e-2, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.1, momentum: 0 }, 1.0],
  ['AdamW with weight decay except biases and norms (transformers Trainer groups)', { name: 'adamw', lr: 1e-2, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.3, momentum: 0, no_decay: 'biases_and_norms' }, 1.0],
  ['AdamW, no clipping (max_grad_norm 0)', { name: 'adamw', lr: 3e-3, betas: [0.8, 0.99], eps: 1e-6, weight_decay: 0, momentum: 0 }, 0],
  ['SGD with momentum and weight decay, clipped', { name: 'sgd', lr: 0.05, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.01, momentum: 0.9 }, 0.5],
  ['plain SGD, clip inactive (norm below max)', { name: 'sgd', lr: 0.1, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, momentum: 0 }, 1e6],
];

describe.each(cases)('%s', (_name, cfg, maxGradNorm) => {
  it('three steps match the float64 twin: norms, clip coefficient, weights and ‖Δθ‖ per group', async () => {
    const gpu = await testGpu();
    const { theta, grads } = setup(7);
    const params = await gpuParams(theta);
    const opt = new Optimizer(gpu, params, cfg);
    const p64 = theta.map((t) => Float64Array.from(t));
    const m64 = theta.map((t) => new Float64Array(t.length));
    const v64 = theta.map((t) => new Float64Array(t.length));
    for (let step = 1; step <= 3; step++) {
      // A different gradient each step (scaled), so the state carried between steps matters.
      const g = grads.map((a) => Float32Array.from(a, (x) => x * (1 + 0.5 * step)));
      const gbufs = new Map(params.map((p, i) => [p.name, gpu.upload(`g.${p.name}`, g[i])]));
      const norms = await opt.gradNorms(gbufs);
      const want = groupNorms(g);
      const total = Math.sqrt(Object.values(want).reduce((s, x) => s + x * x, 0));
      // Norms are float32 sums of squares of up to ~1000 terms added in float64 per tensor: rtol 1e-5 is ~100 ulps of headroom.
      check([norms.grad_norm], [total], { rtol: 1e-5, atol: 0, label: 'grad_norm' });
      for (const grp of Object.keys(want)) check([norms.group_grad_norms[grp]], [want[grp]], { rtol: 1e-5, atol: 0, label: `group_grad_norms ${grp}`, key: 'group_grad_norms' });
      // The coefficient the step applied was made on the GPU in float32 from the same sums: a few ulps of the float64 one.
      const coef = clip_coef(g.map((a) => a.reduce((s, x) => s + x * x, 0)), maxGradNorm).coef;
      expect(coef).toBeCloseTo(maxGradNorm > 0 ? Math.min(1, maxGradNorm / (total + 1e-6)) : 1, 12);
      const u = await opt.step(gbufs, maxGradNorm);
      check([u.clip_coef], [coef], { rtol: 1e-6, atol: 0, label: `clip_coef step ${step}`, key: 'clip_coef (GPU)' });
      expect(u.step).toBe(step);

      const before = p64.map((p) => Float64Array.from(p));
      p64.forEach((p, i) => {
        const weightDecay = cfg.no_decay === 'biases_and_norms' && !SHAPES[i][3] ? 0 : cfg.weight_decay;
        if (cfg.name === 'adamw') ref.adamw_step(p, g[i], m64[i], v64[i], { lr: cfg.lr, beta1: cfg.betas[0], beta2: cfg.betas[1], eps: cfg.eps, weightDecay, step, gradScale: coef });
        else ref.sgd_step(p, g[i], cfg.momentum ? m64[i] : null, { lr: cfg.lr, weightDecay, gradScale: coef, momentum: cfg.momentum, step });
      });
      for (let i = 0; i < params.length; i++) {
        // README's AdamW tolerance (rtol 1e-6, atol 1e-6) for the weights: f32 state over three steps stays far inside it.
        check(await gpu.readF32(params[i].buffer, theta[i].length), p64[i], { rtol: 1e-6, atol: 1e-6, label: `${params[i].name} step ${step}`, key: `${cfg.name} weights` });
      }
      // ‖Δθ‖ of float32 weights: each Δ element carries the rounding of θ_new (ulp(0.2)/2 ≈ 7e-9) against a Δ of
      // ~1e-3, so ~1e-5 relative per element; rtol 1e-4 covers it.
      const delta = p64.map((p, i) => p.map((x, k) => x - before[i][k]));
      const wantU = groupNorms(delta);
      for (const grp of Object.keys(wantU)) check([u.group_update_norms[grp]], [wantU[grp]], { rtol: 1e-4, atol: 1e-9, label: `update ${grp} step ${step}`, key: 'group_update_norms' });
      check([u.update_norm], [Math.sqrt(Object.values(wantU).reduce((s, x) => s + x * x, 0))], { rtol: 1e-4, atol: 1e-9, label: 'update_norm' });
      for (const b of gbufs.values()) b.destroy();
    }
    opt.destroy();
    for (const p of params) p.buffer.destroy();
  });
});

describe('Optimizer state and errors', () => {
  it('reset() forgets the moments: the next step is step 1 again', async () => {
    const gpu = await testGpu();
    const { theta, grads } = setup(11);
    const cfg: OptimizerConfig = { name: 'adamw', lr: 1e-2, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, momentum: 0 };
    const a = await gpuParams(theta);
    const b = await gpuParams(theta);
    const gbufs = (ps: Param[]) => new Map(ps.map((p, i) => [p.name, gpu.upload(`g.${p.name}`, grads[i])]));
    const optA = new Optimizer(gpu, a, cfg);
    await optA.step(gbufs(a), 0);
    for (const [i, p] of a.entries()) gpu.write(p.buffer, theta[i]); // same weights again
    optA.reset();
    const uA = await optA.step(gbufs(a), 0);
    const uB = await new Optimizer(gpu, b, cfg).step(gbufs(b), 0);
    expect(uA.step).toBe(1);
    for (let i = 0; i < a.length; i++) expect(await gpu.readF32(a[i].buffer)).toEqual(await gpu.readF32(b[i].buffer));
    expect(uA.update_norm).toBe(uB.update_norm);
  });

  it('refuses to step on a non-finite gradient, naming the tensor', async () => {
    const gpu = await testGpu();
    const { theta, grads } = setup(3);
    grads[2][4] = NaN;
    const params = await gpuParams(theta);
    const opt = new Optimizer(gpu, params, parseOptimizerConfig({ name: 'adamw', lr: 0.1 }));
    await expect(opt.gradNorms(new Map(params.map((p, i) => [p.name, gpu.upload('g', grads[i])])))).rejects.toThrow(/gradient norm is NaN: non-finite gradient in layers\.0\.q\.bias/);
  });

  it('step() alone (its own gradient norms, in the same pass) refuses a non-finite gradient and writes nothing', async () => {
    const gpu = await testGpu();
    const { theta, grads } = setup(5);
    grads[3][2] = Infinity;
    const params = await gpuParams(theta);
    const opt = new Optimizer(gpu, params, parseOptimizerConfig({ name: 'adamw', lr: 0.1, weight_decay: 0.1 }));
    const gbufs = new Map(params.map((p, i) => [p.name, gpu.upload('g', grads[i])]));
    await expect(opt.step(gbufs, 1)).rejects.toThrow(/gradient norm is Infinity: non-finite gradient in layers\.0\.norm\.weight/);
    expect(opt.t).toBe(0);
    for (let i = 0; i < params.length; i++) expect(await gpu.readF32(params[i].buffer)).toEqual(theta[i]);
  });

  it('one step is one submit and one compute pass: clip coefficient, the updates (3 tensors per dispatch on a GPU), one finish; one readback of P + 3 words', async () => {
    const device = await testGpu();
    const { theta, grads } = setup(13);
    const run = async (gpu: Gpu, withNorms: boolean) => {
      const params = await gpuParams(theta);
      const opt = new Optimizer(gpu, params, parseOptimizerConfig({ name: 'adamw', lr: 1e-2, weight_decay: 0.1 }));
      const gbufs = new Map(params.map((p, i) => [p.name, gpu.upload('g', grads[i])]));
      if (withNorms) await opt.gradNorms(gbufs);
      const before = { ...gpu.stats };
      const u = await opt.step(gbufs, 0.5);
      const work = statsSince(gpu.stats, before);
      const weights = await Promise.all(params.map((p) => gpu.readF32(p.buffer)));
      return { u, work, weights };
    };
    const P = SHAPES.length;
    const here = await run(device, true);
    // This adapter's kernels, and a GPU's (adamw_step_x3: three tensors per dispatch, the rest one each).
    for (const gpu of [device, asAdapterClass(device, 'gpu')]) {
      const slots = adamwSlots(gpu);
      const updates = Math.floor(P / slots) + (P % slots);
      const after = await run(gpu, true); // reuses gradNorms' sums
      expect([after.work.computePasses, after.work.dispatches, after.work.bytesRead]).toEqual([1, 1 + updates + 1, (P + 3) * 4]);
      const alone = await run(gpu, false); // + the gradient sweep (six tensors per dispatch on a GPU, one on a CPU adapter) and its finish, same pass
      expect([alone.work.computePasses, alone.work.dispatches]).toEqual([1, Math.ceil(P / (gpu === device && isCpuAdapter(gpu.adapter) ? 1 : 6)) + 1 + 1 + updates + 1]);
      // The same kernels on the same gradients: bitwise the same step.
      expect(alone.u).toEqual(after.u);
      expect(alone.weights).toEqual(after.weights);
      if (gpu === device) continue;
      // A GPU's kernels: the elementwise update is the same arithmetic, but the gradient norm (so the clip
      // coefficient) and the update norm sum their partials in another order (its shorter per-thread run):
      // within f32 rounding of this adapter's step. Adam's m / √v barely sees the coefficient's last bits.
      expect(slots).toBe(device.limits.maxStorageBuffersPerShaderStage >= 15 ? 3 : 1);
      for (const [k, w] of alone.weights.entries()) {
        const scale = Math.max(...here.weights[k].map(Math.abs));
        expect(Math.max(...w.map((x, i) => Math.abs(x - here.weights[k][i]))), `weights ${k}`).toBeLessThanOrEqual(1e-6 * scale);
      }
      expect(Math.abs(alone.u.clip_coef - here.u.clip_coef)).toBeLessThanOrEqual(1e-6 * here.u.clip_coef);
      expect(Math.abs(alone.u.update_norm - here.u.update_norm)).toBeLessThanOrEqual(1e-5 * here.u.update_norm);
    }
  });

  it('parseOptimizerConfig fills torch defaults and names a bad field', () => {
    expect(parseOptimizerConfig({ name: 'sgd', lr: 0.5 })).toEqual({ name: 'sgd', lr: 0.5, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, momentum: 0, no_decay: 'none' });
    expect(() => parseOptimizerConfig({ no_decay: 'norms' })).toThrow(/config\.optimizer\.no_decay: expected one of "none", "biases_and_norms", "openrlhf", got "norms"/);
    expect(() => parseOptimizerConfig({ betas: [0.9] })).toThrow(/config\.optimizer\.betas: expected two numbers/);
    expect(() => parseOptimizerConfig({ lr: -1 })).toThrow(/config\.optimizer\.lr: expected a number >= 0, got -1/);
  });
});
