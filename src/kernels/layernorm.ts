// Launchers for shaders/layernorm_{forward,backward}.wgsl (GPT-2 LayerNorm), and the plumbing both
// norms share (rmsnorm.ts uses it): row-kernel sizing and the two-pass deterministic backward.
// Twin: src/oracle/layernorm.ts.
// Weight gradients: `accumulate` adds into dweight/dbias (micro-batches), otherwise they are overwritten.
// dinp is overwritten unless `accumulateDinp` (adds into a residual stream's gradient, as llm.c does).
// out must not alias inp: WebGPU rejects a buffer bound both read-only and writable in one dispatch.
import { adapterClass, Gpu, type AdapterClass, type Binding, type ParamWord, type Recorder } from '../gpu/context.ts';
import { colsum_forward, rowsPerPartial } from './colsum.ts';
import { sharedScratch } from './scratch.ts';
import { bindAll, boundBytes } from './windows.ts';

// Threads per row on a CPU adapter: its SIMD width in invocations (lavapipe's AVX2 8, SwiftShader's 4). At 512 rows
// of 64, the RMSNorm forward / backward took on SwiftShader 1.45 / 2.05 ms at 4 threads, 2.03 / 2.95 at 8 and
// 1.81 / 2.89 at 2; on lavapipe 0.46 / 0.78 at 8, 0.73 / 1.16 at 4 and 0.75 / 1.28 at 16.
const CPU_ROW_THREADS: Record<Exclude<AdapterClass, 'gpu'>, number> = { cpu: 8, swiftshader: 4 };

/**
 * Threads per row for the one-workgroup-per-row kernels: on a GPU a power of two in [32, 256] near C; on a CPU
 * adapter its CPU_ROW_THREADS, since every barrier of the tree reduction switches each invocation's coroutine there
 * (RMSNorm at the embedded model's 640 × 64: 12× faster forward and 8× backward on SwiftShader, 2× on lavapipe, at
 * 8 than at 64).
 */
export function rowThreads(gpu: Gpu, C: number): number {
  const cls = adapterClass(gpu.adapter);
  return cls === 'gpu' ? gpuRowThreads(C) : CPU_ROW_THREADS[cls];
}

/** rowThreads on a GPU (tests run the norms with it on CPU adapters too). */
export function gpuRowThreads(C: number): number {
  let wg = 32;
  while (wg < C && wg < 256) wg *= 2;
  return wg;
}

/** A norm forward: one workgroup per row of `shader`, params (N, C, eps). */
export function normForward(rec: Recorder, shader: string, bindings: Record<string, Binding>, N: number, C: number, eps: number, threads = rowThreads(rec.gpu, C)): void {
  if (N === 0) return;
  rec.dispatch({
    kernel: shader,
    shader,
    constants: { WG: threads },
    bindings,
    params: [['N', 'u32', N], ['C', 'u32', C], ['eps', 'f32', eps]],
    workgroups: Gpu.grid(N),
    work: { bytes: boundBytes(bindings) },
  });
}

/**
 * A norm backward in two deterministic passes of `shader`: 'main' writes dinp, one workgroup per row;
 * 'dweight' writes (P, C) partial sums over R-row chunks, one partial per gradient in `grads` (bound
 * as `<gradient>_part` beside `partBindings`), and colsum adds each gradient's P partials in a fixed
 * order (no atomics).
 */
export function normBackward(
  rec: Recorder,
  shader: string,
  o: {
    N: number;
    C: number;
    accumulate: boolean;
    accumulateDinp?: boolean;
    rowBindings: Record<string, Binding>;
    partBindings: Record<string, Binding>;
    grads: Array<[string, Binding]>;
    threads?: number; // tests: threads per row instead of rowThreads'
  },
): void {
  const { N, C } = o;
  if (N === 0) return;
  const R = rowsPerPartial(N);
  const P = Math.ceil(N / R);
  const params: ParamWord[] = [['N', 'u32', N], ['C', 'u32', C], ['accumulate', 'u32', o.accumulateDinp ? 1 : 0], ['R', 'u32', R]];
  const rowWork = { bytes: boundBytes(o.rowBindings, o.accumulateDinp ? ['dinp'] : []) };
  rec.dispatch({ kernel: shader, shader, constants: { WG: o.threads ?? rowThreads(rec.gpu, C) }, bindings: o.rowBindings, params, workgroups: Gpu.grid(N), work: rowWork });
  const parts = o.grads.map(([field]) => [`${field}_part`, sharedScratch(rec.gpu, `${shader}:${field}_part`, P * C * 4)] as const); // (P, C) each
  rec.dispatch({
    kernel: `${shader}.dweight`,
    shader,
    entryPoint: 'dweight',
    constants: { WG: 256 },
    bindings: { ...o.partBindings, ...Object.fromEntries(parts) },
    params,
    workgroups: Gpu.grid(Math.ceil((P * C) / 256)),
    work: { bytes: boundBytes(o.partBindings) + 4 * P * C * parts.length }, // the scratch may be bigger than the (P, C) written
  });
  o.grads.forEach(([, out], i) => colsum_forward(rec, { out, inp: parts[i][1], P, C, accumulate: o.accumulate }));
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
    threads?: number; // tests: threads per row instead of rowThreads'
  },
): void {
  const { N, C } = args;
  const bindings = bindAll(rec.gpu, 'layernorm_forward', {
    inp: [args.inp, N * C], weight: [args.weight, C], bias: [args.bias, C], out: [args.out, N * C], mean: [args.mean, N], rstd: [args.rstd, N],
  });
  normForward(rec, 'layernorm_forward', bindings, N, C, args.eps, args.threads);
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
    threads?: number; // tests: threads per row instead of rowThreads'
  },
): void {
  const { N, C } = args;
  const kernel = 'layernorm_backward';
  const { dout, inp, mean, rstd, weight, dinp, dweight, dbias } = bindAll(rec.gpu, kernel, {
    dout: [args.dout, N * C], inp: [args.inp, N * C], mean: [args.mean, N], rstd: [args.rstd, N],
    weight: [args.weight, C], dinp: [args.dinp, N * C], dweight: [args.dweight, C], dbias: [args.dbias, C],
  });
  normBackward(rec, kernel, {
    N,
    C,
    threads: args.threads,
    accumulate: args.accumulate,
    accumulateDinp: args.accumulateDinp,
    rowBindings: { dout, inp, mean, rstd, weight, dinp },
    partBindings: { dout, inp, mean, rstd },
    grads: [['dweight', dweight], ['dbias', dbias]],
  });
}
