// Gradient norms for clip_grad_norm_: sumsq_forward writes sum(x^2) of one tensor into out[outIndex]
// (deterministic two-kernel reduction, shaders/sumsq_forward.wgsl); after one small readback of the
// per-tensor sums, globalNorm and clipCoef give torch's total norm and clip coefficient on the CPU,
// and the coefficient goes to the optimizer as gradScale. scale_forward scales a tensor in place
// (for when the clipped gradient itself is wanted). Twin: src/oracle/grad_norm.ts.
import { Gpu, type Recorder } from '../gpu/context.ts';
import { sharedScratch } from './scratch.ts';
import { checkSize } from './windows.ts';
import { bindWindow, dispatchElementwise, flatWindows } from './elementwise.ts';

const WG = 256;
const MAX_PARTS = 1024; // partials per tensor before the per-thread run K grows (see the shader)

export function sumsq_forward(
  rec: Recorder,
  args: {
    inp: GPUBuffer; // (n)
    n: number;
    out: GPUBuffer; // f32, at least outIndex + 1 elements; out[outIndex] = sum(inp^2)
    outIndex: number;
    limit?: number; // tests only: a lower binding size, to exercise the window split
  },
): void {
  const { inp, n } = args;
  checkSize('sumsq_forward', 'out', args.out, args.outIndex + 1);
  const K = Math.max(1, Math.ceil(n / (WG * MAX_PARTS)));
  const ws = flatWindows(rec, 'sumsq_forward', n, { inp }, args.limit);
  const counts = ws.map((w) => Math.ceil(w.count / (WG * K)));
  const P = counts.reduce((a, b) => a + b, 0);
  const part = sharedScratch(rec.gpu, 'sumsq_forward:part', Math.max(1, P) * 4); // (P) partial sums
  let base = 0;
  ws.forEach((w, i) => {
    rec.dispatch({
      kernel: 'sumsq_forward',
      shader: 'sumsq_forward',
      constants: { WG },
      bindings: { inp: bindWindow(inp, w), part },
      params: [['n', 'u32', w.count], ['K', 'u32', K], ['part_base', 'u32', base]],
      workgroups: Gpu.grid(counts[i]),
    });
    base += counts[i];
  });
  rec.dispatch({
    kernel: 'sumsq_forward.finish',
    shader: 'sumsq_forward',
    entryPoint: 'finish',
    constants: { WG },
    bindings: { parts: part, out: args.out },
    params: [['P', 'u32', P], ['out_index', 'u32', args.outIndex]],
    workgroups: [1],
  });
}

/** x *= factor, in place. */
export function scale_forward(rec: Recorder, args: { x: GPUBuffer /* (n) */; n: number; factor: number }): void {
  dispatchElementwise(rec, { kernel: 'scale_forward', shader: 'scale_forward', n: args.n, buffers: { x: args.x }, extra: [['factor', 'f32', args.factor]] });
}

/** torch's total 2-norm from per-tensor sums of squares (summed in float64). */
export function globalNorm(sumsqs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < sumsqs.length; i++) s += sumsqs[i];
  return Math.sqrt(s);
}

/**
 * clip_grad_norm_'s coefficient min(1, maxNorm / (norm + 1e-6)). A non-finite norm is an error here
 * (torch would silently scale every gradient by NaN): the message says so instead of corrupting weights.
 */
export function clipCoef(norm: number, maxNorm: number): number {
  if (!Number.isFinite(norm)) throw new RangeError(`gradient norm is ${norm}: some gradient is NaN or infinite; refusing to clip and step`);
  return Math.min(1, maxNorm / (norm + 1e-6));
}
