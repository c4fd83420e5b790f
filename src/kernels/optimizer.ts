// Launchers for shaders/adamw_step.wgsl and shaders/sgd_step.wgsl: torch.optim.AdamW / torch.optim.SGD
// semantics exactly, one parameter tensor per call (param, m, v, buf are updated in place).
// Twin: src/oracle/optimizer.ts. `gradScale` multiplies the gradient first: pass the clip_grad_norm_
// coefficient (kernels/grad_norm.ts clipCoef) instead of rewriting the gradients, or 1.
//
// The step-dependent scalars are computed here in float64 and passed as f32 uniforms, as torch computes
// them in Python floats: on the GPU, 1 - beta2^t would start from f32(0.999) = 0.99900001287, which
// already makes 1 - beta2 off by 1.3e-5 relative at t = 1, and pow() in WGSL is exp2(t * log2(b))
// with far larger error as t grows. One CPU computation also serves every element.
import { dispatchElementwise } from './elementwise.ts';
import type { Recorder } from '../gpu/context.ts';

export interface AdamWArgs {
  param: GPUBuffer; // (n), updated
  grad: GPUBuffer; // (n)
  m: GPUBuffer; // (n) exp_avg, zeros before the first step
  v: GPUBuffer; // (n) exp_avg_sq, zeros before the first step
  n: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  step: number; // 1-based: the step being taken (torch increments state['step'] before using it)
  gradScale: number; // the clip coefficient (1 for no clipping)
  limit?: number; // tests only: a lower binding size, to exercise the window split
}

/** The f64 scalars of AdamW step `step`. */
function adamwScalars(a: Pick<AdamWArgs, 'lr' | 'beta1' | 'beta2' | 'weightDecay' | 'step'>) {
  if (!Number.isInteger(a.step) || a.step < 1) throw new RangeError(`adamw_step: step must be a 1-based integer, got ${a.step}`);
  return {
    decay: 1 - a.lr * a.weightDecay,
    stepSize: a.lr / (1 - a.beta1 ** a.step),
    bc2Sqrt: Math.sqrt(1 - a.beta2 ** a.step),
  };
}

export function adamw_step(rec: Recorder, a: AdamWArgs): void {
  const s = adamwScalars(a);
  dispatchElementwise(rec, {
    kernel: 'adamw_step',
    shader: 'adamw_step',
    n: a.n,
    buffers: { param: a.param, grad: a.grad, m: a.m, v: a.v },
    limit: a.limit,
    extra: [
      ['decay', 'f32', s.decay],
      ['one_minus_beta1', 'f32', 1 - a.beta1],
      ['beta2', 'f32', a.beta2],
      ['one_minus_beta2', 'f32', 1 - a.beta2],
      ['step_size', 'f32', s.stepSize],
      ['bc2_sqrt', 'f32', s.bc2Sqrt],
      ['eps', 'f32', a.eps],
      ['grad_scale', 'f32', a.gradScale],
    ],
  });
}

export interface SgdArgs {
  param: GPUBuffer; // (n), updated
  grad: GPUBuffer; // (n)
  n: number;
  lr: number;
  weightDecay: number;
  gradScale: number;
  momentum?: number; // default 0: no buffer
  buf?: GPUBuffer; // (n) momentum_buffer, required when momentum != 0
  step?: number; // 1-based; step 1 initialises buf = d (torch: buffer is None); default 1
  dampening?: number; // default 0
  nesterov?: boolean; // default false
}

export function sgd_step(rec: Recorder, a: SgdArgs): void {
  const momentum = a.momentum ?? 0;
  if (momentum !== 0 && !a.buf) throw new RangeError('sgd_step: momentum != 0 needs a momentum buffer (buf)');
  if (a.nesterov && (momentum <= 0 || (a.dampening ?? 0) !== 0)) throw new RangeError('sgd_step: nesterov needs momentum > 0 and dampening 0 (as torch)');
  dispatchElementwise(rec, {
    kernel: 'sgd_step',
    shader: 'sgd_step',
    entryPoint: momentum !== 0 ? 'momentum' : 'main',
    n: a.n,
    buffers: momentum !== 0 ? { param: a.param, grad: a.grad, buf: a.buf! } : { param: a.param, grad: a.grad },
    extra: [
      ['lr', 'f32', a.lr],
      ['weight_decay', 'f32', a.weightDecay],
      ['momentum', 'f32', momentum],
      ['one_minus_dampening', 'f32', 1 - (a.dampening ?? 0)],
      ['nesterov', 'u32', a.nesterov ? 1 : 0],
      ['first', 'u32', (a.step ?? 1) === 1 ? 1 : 0],
      ['grad_scale', 'f32', a.gradScale],
    ],
  });
}
