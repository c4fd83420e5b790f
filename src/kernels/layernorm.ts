// Launchers for shaders/layernorm_{forward,backward}.wgsl (GPT-2 LayerNorm) and the shared row-kernel
// sizing used by rmsnorm.ts. Twin: src/ref/layernorm.ts.
// Weight gradients: `accumulate` adds into dweight/dbias (micro-batches), otherwise they are overwritten.
// dinp is overwritten unless `accumulateDinp` (adds into a residual stream's gradient, as llm.c does).
// out must not alias inp: WebGPU rejects a buffer bound both read-only and writable in one dispatch.
import { Gpu, packParams, type Recorder } from '../gpu/context.ts';
import { colsum_forward, rowsPerPartial } from './colsum.ts';
import { checkSize } from './windows.ts';

/** Checks that every [field, buffer, elements] holds its elements (a clear error naming the field). */
export function checkSizes(kernel: string, fields: Array<[string, GPUBuffer, number]>): void {
  for (const [field, buf, elems] of fields) checkSize(kernel, field, buf, elems);
}

/** Threads per row for the one-workgroup-per-row kernels: a power of two in [32, 256] near C. */
export function rowThreads(C: number): number {
  let wg = 32;
  while (wg < C && wg < 256) wg *= 2;
  return wg;
}

export function layernorm_forward(
  rec: Recorder,
  args: {
    out: GPUBuffer; // (N, C)
    mean: GPUBuffer; // (N)
    rstd: GPUBuffer; // (N)
    inp: GPUBuffer; // (N, C)
    weight: GPUBuffer; // (C)
    bias: GPUBuffer; // (C)
    N: number;
    C: number;
    eps: number;
  },
): void {
  const { N, C } = args;
  checkSizes('layernorm_forward', [['out', args.out, N * C], ['mean', args.mean, N], ['rstd', args.rstd, N], ['inp', args.inp, N * C], ['weight', args.weight, C], ['bias', args.bias, C]]);
  if (N === 0) return;
  rec.dispatch({
    kernel: 'layernorm_forward',
    shader: 'layernorm_forward',
    constants: { WG: rowThreads(C) },
    bindings: [args.inp, args.weight, args.bias, args.out, args.mean, args.rstd],
    params: packParams([['u32', N], ['u32', C], ['f32', args.eps]]),
    workgroups: Gpu.grid(N),
  });
}

export function layernorm_backward(
  rec: Recorder,
  args: {
    dinp: GPUBuffer; // (N, C)
    dweight: GPUBuffer; // (C)
    dbias: GPUBuffer; // (C)
    dout: GPUBuffer; // (N, C)
    inp: GPUBuffer; // (N, C)
    weight: GPUBuffer; // (C)
    mean: GPUBuffer; // (N), from layernorm_forward
    rstd: GPUBuffer; // (N), from layernorm_forward
    N: number;
    C: number;
    accumulate: boolean; // dweight/dbias += instead of =
    accumulateDinp?: boolean; // dinp += instead of =
  },
): void {
  const { N, C } = args;
  checkSizes('layernorm_backward', [
    ['dinp', args.dinp, N * C], ['dweight', args.dweight, C], ['dbias', args.dbias, C], ['dout', args.dout, N * C],
    ['inp', args.inp, N * C], ['weight', args.weight, C], ['mean', args.mean, N], ['rstd', args.rstd, N],
  ]);
  if (N === 0) return;
  const R = rowsPerPartial(N);
  const P = Math.ceil(N / R);
  const params = packParams([['u32', N], ['u32', C], ['u32', args.accumulateDinp ? 1 : 0], ['u32', R]]);
  rec.dispatch({
    kernel: 'layernorm_backward',
    shader: 'layernorm_backward',
    constants: { WG: rowThreads(C) },
    bindings: [args.dout, args.inp, args.mean, args.rstd, args.weight, args.dinp],
    params,
    workgroups: Gpu.grid(N),
  });
  const dweightPart = rec.scratch('layernorm_backward:dweight_part', P * C * 4);
  const dbiasPart = rec.scratch('layernorm_backward:dbias_part', P * C * 4);
  rec.dispatch({
    kernel: 'layernorm_backward.dweight',
    shader: 'layernorm_backward',
    entryPoint: 'dweight',
    constants: { WG: 256 },
    bindings: [args.dout, args.inp, args.mean, args.rstd, dweightPart, dbiasPart],
    params,
    workgroups: Gpu.grid(Math.ceil((P * C) / 256)),
  });
  colsum_forward(rec, { out: args.dweight, inp: dweightPart, P, C, accumulate: args.accumulate });
  colsum_forward(rec, { out: args.dbias, inp: dbiasPart, P, C, accumulate: args.accumulate });
}
