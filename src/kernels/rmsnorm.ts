// Launchers for shaders/rmsnorm_{forward,backward}.wgsl: Llama/Qwen RMSNorm, w * x / sqrt(mean(x^2) + eps),
// also Qwen3's per-head q_norm/k_norm (N = B*T*H rows, C = head_dim). Twin: src/ref/rmsnorm.ts.
// Weight gradient: `accumulate` adds into dweight, otherwise overwrites. dinp is overwritten unless
// `accumulateDinp`. Not in place: out must not alias inp (WebGPU rejects a buffer bound both read-only
// and writable in one dispatch; an in-place variant would need a second copy of the kernel).
import { Gpu, packParams, type Recorder } from '../gpu/context.ts';
import { colsum_forward, rowsPerPartial } from './colsum.ts';
import { checkSizes, rowThreads } from './layernorm.ts';

export function rmsnorm_forward(
  rec: Recorder,
  args: {
    out: GPUBuffer; // (N, C)
    rstd: GPUBuffer; // (N)
    inp: GPUBuffer; // (N, C)
    weight: GPUBuffer; // (C)
    N: number;
    C: number;
    eps: number;
  },
): void {
  const { N, C } = args;
  checkSizes('rmsnorm_forward', [['out', args.out, N * C], ['rstd', args.rstd, N], ['inp', args.inp, N * C], ['weight', args.weight, C]]);
  if (N === 0) return;
  rec.dispatch({
    kernel: 'rmsnorm_forward',
    shader: 'rmsnorm_forward',
    constants: { WG: rowThreads(C) },
    bindings: [args.inp, args.weight, args.out, args.rstd],
    params: packParams([['u32', N], ['u32', C], ['f32', args.eps]]),
    workgroups: Gpu.grid(N),
  });
}

export function rmsnorm_backward(
  rec: Recorder,
  args: {
    dinp: GPUBuffer; // (N, C)
    dweight: GPUBuffer; // (C)
    dout: GPUBuffer; // (N, C)
    inp: GPUBuffer; // (N, C)
    weight: GPUBuffer; // (C)
    rstd: GPUBuffer; // (N), from rmsnorm_forward
    N: number;
    C: number;
    accumulate: boolean; // dweight += instead of =
    accumulateDinp?: boolean; // dinp += instead of =
  },
): void {
  const { N, C } = args;
  checkSizes('rmsnorm_backward', [
    ['dinp', args.dinp, N * C], ['dweight', args.dweight, C], ['dout', args.dout, N * C], ['inp', args.inp, N * C], ['weight', args.weight, C], ['rstd', args.rstd, N],
  ]);
  if (N === 0) return;
  const R = rowsPerPartial(N);
  const P = Math.ceil(N / R);
  const params = packParams([['u32', N], ['u32', C], ['u32', args.accumulateDinp ? 1 : 0], ['u32', R]]);
  rec.dispatch({
    kernel: 'rmsnorm_backward',
    shader: 'rmsnorm_backward',
    constants: { WG: rowThreads(C) },
    bindings: [args.dout, args.inp, args.rstd, args.weight, args.dinp],
    params,
    workgroups: Gpu.grid(N),
  });
  const dweightPart = rec.scratch('rmsnorm_backward:dweight_part', P * C * 4);
  rec.dispatch({
    kernel: 'rmsnorm_backward.dweight',
    shader: 'rmsnorm_backward',
    entryPoint: 'dweight',
    constants: { WG: 256 },
    bindings: [args.dout, args.inp, args.rstd, dweightPart],
    params,
    workgroups: Gpu.grid(Math.ceil((P * C) / 256)),
  });
  colsum_forward(rec, { out: args.dweight, inp: dweightPart, P, C, accumulate: args.accumulate });
}
