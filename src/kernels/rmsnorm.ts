// Launchers for shaders/rmsnorm_{forward,backward}.wgsl: Llama/Qwen RMSNorm, w * x / sqrt(mean(x^2) + eps),
// also Qwen3's per-head q_norm/k_norm (N = B*T*H rows, C = head_dim). Twin: src/oracle/rmsnorm.ts.
// Weight gradient: `accumulate` adds into dweight, otherwise overwrites. dinp is overwritten unless
// `accumulateDinp`. Not in place: out must not alias inp (WebGPU rejects a buffer bound both read-only
// and writable in one dispatch; an in-place variant would need a second copy of the kernel).
import type { Recorder } from '../gpu/context.ts';
import { normBackward, normForward } from './layernorm.ts';
import { bindAll } from './windows.ts';

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
    threads?: number; // tests: threads per row instead of rowThreads'
  },
): void {
  const { N, C } = args;
  const bindings = bindAll(rec.gpu, 'rmsnorm_forward', { inp: [args.inp, N * C], weight: [args.weight, C], out: [args.out, N * C], rstd: [args.rstd, N] });
  normForward(rec, 'rmsnorm_forward', bindings, N, C, args.eps, args.threads);
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
    threads?: number; // tests: threads per row instead of rowThreads'
  },
): void {
  const { N, C } = args;
  const kernel = 'rmsnorm_backward';
  const { dout, inp, rstd, weight, dinp, dweight } = bindAll(rec.gpu, kernel, {
    dout: [args.dout, N * C], inp: [args.inp, N * C], rstd: [args.rstd, N], weight: [args.weight, C], dinp: [args.dinp, N * C], dweight: [args.dweight, C],
  });
  normBackward(rec, kernel, {
    N,
    C,
    threads: args.threads,
    accumulate: args.accumulate,
    accumulateDinp: args.accumulateDinp,
    rowBindings: { dout, inp, rstd, weight, dinp },
    partBindings: { dout, inp, rstd },
    grads: [['dweight', dweight]],
  });
}
