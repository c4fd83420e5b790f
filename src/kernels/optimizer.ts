// Launchers for shaders/adamw_step{,_x3}.wgsl and shaders/sgd_step.wgsl: torch.optim.AdamW / torch.optim.SGD
// semantics exactly (the single-tensor algorithms), over a list of parameter tensors in one recording: the
// tensor windows' dispatches, all in the caller's compute pass, then ONE finish dispatch that sums each
// tensor's Δθ² into out[i] (the update size ‖Δθ‖ the studio shows, taken in the same sweep as the update
// instead of copying θ_old and re-reading it). param, m, v, buf are updated in place. The gradients are
// multiplied by clip_grad_norm_'s coefficient read from `clip` on the GPU (kernels/grad_norm.ts
// clip_coef_forward writes it; a test can upload [coef, 1, 0]); with clip[1] = 0 nothing is written.
// Twin: src/oracle/optimizer.ts.
//
// Why windows per dispatch and not one dispatch over every tensor (apex's multi_tensor_apply): the
// parameters and gradients are one GPUBuffer per tensor throughout src/model (loader, LoRA adapter,
// snapshot, every backward launcher binds them whole, so one arena buffer would change all of them), WGSL
// has no arrays of buffers, and a dispatch binds at most maxStorageBuffersPerShaderStage buffers. An AdamW
// window needs 4 (param, grad, m, v) besides clip, part and items: adamw_step_x3 takes three windows per
// dispatch on GPUs that allow 15 (NVIDIA under Dawn: 16), adamw_step one (WebGPU's default 8; CPU
// adapters: adamwSlots), and the windows a launch of three leaves over. SGD stays one per dispatch.
//
// The step-dependent scalars are computed here in float64 and passed as f32 uniforms, as torch computes
// them in Python floats: on the GPU, 1 - beta2^t would start from f32(0.999) = 0.99900001287, which
// already makes 1 - beta2 off by 1.3e-5 relative at t = 1, and pow() in WGSL is exp2(t * log2(b))
// with far larger error as t grows. One CPU computation also serves every element.
import { Gpu, type Recorder } from '../gpu/context.ts';
import { bindWindow } from './elementwise.ts';
import { finishSweep, planSweep, slotLaunches, sweepParams, sweepSlots } from './grad_norm.ts';
import { checkSize } from './windows.ts';


/** One parameter tensor of a step. */
export interface StepTensor {
  param: GPUBuffer; // (n), updated
  grad: GPUBuffer; // (n)
  n: number;
  weightDecay: number; // per tensor: transformers' Trainer exempts biases and norms
}

/** What every step launch shares. */
interface StepCommon {
  clip: GPUBuffer; // [coef, ok, total norm]: sumsq_forward's clip_coef
  out: GPUBuffer; // (tensors) f32: Σ Δθ² per tensor
  limit?: number; // tests only: a lower binding size, to exercise the window split
}

export interface AdamWArgs extends StepCommon {
  tensors: (StepTensor & { m: GPUBuffer; v: GPUBuffer })[]; // m exp_avg, v exp_avg_sq: (n), zeros before the first step
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  step: number; // 1-based: the step being taken (torch increments state['step'] before using it)
  slots?: 1 | 3; // tensor windows per dispatch; default adamwSlots(gpu) (tests force each)
}

/** AdamW windows per dispatch the device can bind: 3 (adamw_step_x3) where 15 storage buffers fit in a stage, else 1. */
const slotsFit = (gpu: Gpu): 1 | 3 => (gpu.limits.maxStorageBuffersPerShaderStage >= 15 ? 3 : 1);

/**
 * AdamW tensor windows per dispatch on this adapter (sweepSlots): three where they fit on a GPU (SmolLM2-135M:
 * 273 update dispatches → 91), one on CPU adapters.
 */
export function adamwSlots(gpu: Gpu): 1 | 3 {
  return sweepSlots(gpu, slotsFit(gpu));
}

export function adamw_step(rec: Recorder, a: AdamWArgs): void {
  if (!Number.isInteger(a.step) || a.step < 1) throw new RangeError(`adamw_step: step must be a 1-based integer, got ${a.step}`);
  const slots = a.slots ?? adamwSlots(rec.gpu);
  if (slots === 3 && slotsFit(rec.gpu) !== 3) throw new RangeError(`adamw_step: 3 windows per dispatch need 15 storage buffers per shader stage, the device has ${rec.gpu.limits.maxStorageBuffersPerShaderStage}`);
  checkSize('adamw_step', 'clip', a.clip, 2);
  const stepSize = a.lr / (1 - a.beta1 ** a.step);
  const bc2Sqrt = Math.sqrt(1 - a.beta2 ** a.step);
  const plan = planSweep(rec, 'adamw_step', a.tensors.map((t) => ({ n: t.n, buffers: { param: t.param, grad: t.grad, m: t.m, v: t.v } })), a.limit);
  // Launches of three windows run adamw_step_x3; the windows left over run adamw_step, one each.
  const { launches, items } = slotLaunches(rec, plan, slots, true);
  for (const l of launches) {
    const n = l.windows.length;
    const bindings: Record<string, GPUBufferBinding | GPUBuffer> = { clip: a.clip, part: plan.part, items: items! };
    l.windows.forEach((s, k) => {
      const t = a.tensors[s.tensor];
      Object.assign(bindings, { [`param${k}`]: bindWindow(t.param, s.w), [`grad${k}`]: bindWindow(t.grad, s.w), [`m${k}`]: bindWindow(t.m, s.w), [`v${k}`]: bindWindow(t.v, s.w) });
    });
    rec.dispatch({
      kernel: 'adamw_step',
      shader: n === 3 ? 'adamw_step_x3' : 'adamw_step',
      constants: { WG: plan.wg },
      bindings,
      params: [
        ['first', 'u32', l.first],
        ['count', 'u32', n],
        // One decay per slot of the shared Params (common/adamw_step.wgsl); a slot past the launch's windows: unused.
        ...[0, 1, 2].map((k): [string, 'f32', number] => [`decay${k}`, 'f32', k < n ? 1 - a.lr * a.tensors[l.windows[k].tensor].weightDecay : 1]),
        ['one_minus_beta1', 'f32', 1 - a.beta1],
        ['beta2', 'f32', a.beta2],
        ['one_minus_beta2', 'f32', 1 - a.beta2],
        ['step_size', 'f32', stepSize],
        ['bc2_sqrt', 'f32', bc2Sqrt],
        ['eps', 'f32', a.eps],
      ],
      workgroups: Gpu.grid(l.groups),
      // Per element: param, grad, m and v read; param, m and v written (f32 each).
      work: { bytes: 28 * l.elements },
    });
  }
  finishSweep(rec, plan, a.out);
}

export interface SgdArgs extends StepCommon {
  tensors: (StepTensor & { buf?: GPUBuffer })[]; // buf: (n) momentum_buffer, required when momentum != 0
  lr: number;
  momentum?: number; // default 0: no buffer
  step?: number; // 1-based; step 1 initialises buf = d (torch: buffer is None); default 1
  dampening?: number; // default 0
  nesterov?: boolean; // default false
}

export function sgd_step(rec: Recorder, a: SgdArgs): void {
  const momentum = a.momentum ?? 0;
  if (momentum !== 0 && a.tensors.some((t) => !t.buf)) throw new RangeError('sgd_step: momentum != 0 needs a momentum buffer (buf)');
  if (a.nesterov && (momentum <= 0 || (a.dampening ?? 0) !== 0)) throw new RangeError('sgd_step: nesterov needs momentum > 0 and dampening 0 (as torch)');
  checkSize('sgd_step', 'clip', a.clip, 2);
  const plan = planSweep(rec, 'sgd_step', a.tensors.map((t): { n: number; buffers: Record<string, GPUBuffer> } => ({ n: t.n, buffers: momentum ? { param: t.param, grad: t.grad, buf: t.buf! } : { param: t.param, grad: t.grad } })), a.limit);
  // Without momentum the shader never touches `buf`: a 16-byte stand-in fills the binding.
  const standIn = { buffer: rec.gpu.zeros(16), offset: 0, size: 16 };
  for (const s of plan.windows) {
    const t = a.tensors[s.tensor];
    rec.dispatch({
      kernel: 'sgd_step',
      shader: 'sgd_step',
      constants: { WG: plan.wg, MOMENTUM: momentum !== 0 },
      bindings: { param: bindWindow(t.param, s.w), grad: bindWindow(t.grad, s.w), buf: momentum ? bindWindow(t.buf!, s.w) : standIn, clip: a.clip, part: plan.part },
      params: [
        ...sweepParams(s),
        ['lr', 'f32', a.lr],
        ['weight_decay', 'f32', t.weightDecay],
        ['momentum', 'f32', momentum],
        ['one_minus_dampening', 'f32', 1 - (a.dampening ?? 0)],
        ['nesterov', 'u32', a.nesterov ? 1 : 0],
        ['first', 'u32', (a.step ?? 1) === 1 ? 1 : 0],
      ],
      workgroups: Gpu.grid(s.groups),
      work: { bytes: 4 * s.w.count * (momentum ? 5 : 3) }, // param and the buffer read and written, grad read
    });
  }
  finishSweep(rec, plan, a.out);
}
