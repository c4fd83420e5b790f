// Benchmark suite `peak`: what the adapter can do at all, measured in the same run as every other suite —
// f32 FMA throughput (and f16 where `shader-f16` exists) from register-only FMA chains, copy bandwidth
// from a grid-stride vec4 copy, and the cost of a dispatch from a chain of dependent one-thread dispatches in one
// submit (wall µs each, and the CPU's share: recording, encoding and submitting them). bench/run.ts measures it first and hands it to the other suites, which
// report GEMM and model rows as a fraction of the FMA probe and memory-bound kernels as a fraction of the
// copy probe (issue 23: no kernel is judged without its ceiling). Shaders: shaders/bench_peak_*.wgsl.
import { Gpu, type Recorder } from '../src/gpu/context.ts';
import { timeKernels } from './timing.ts';
import type { BenchOptions, Peak, Row } from './types.ts';

const WG = 256;
/** Independent vec4 chains per thread in bench_peak_fma (its CHAINS). */
export const FMA_CHAINS = 4;
/** The chain's coefficients: |a| < 1 keeps x bounded, and x after ITERS steps still depends on ITERS. */
export const FMA_A = 0.999;
export const FMA_B = 0.001;

/** FLOPs one probe dispatch performs: 2 per lane-FMA, 4 lanes, FMA_CHAINS chains, `iters` steps, per thread. */
export const fmaFlops = (threads: number, iters: number) => threads * iters * FMA_CHAINS * 4 * 2;

export function peak_fma_forward(rec: Recorder, args: { out: GPUBuffer; threads: number; iters: number; f16: boolean }): void {
  rec.dispatch({
    kernel: args.f16 ? 'bench_peak_fma_f16' : 'bench_peak_fma',
    shader: args.f16 ? 'bench_peak_fma_f16' : 'bench_peak_fma',
    constants: { WG, ITERS: args.iters },
    bindings: { out: args.out },
    params: [['a', 'f32', FMA_A], ['b', 'f32', FMA_B], ['threads', 'u32', args.threads]],
    workgroups: Gpu.grid(Math.ceil(args.threads / WG)),
  });
}

export function peak_copy_forward(rec: Recorder, args: { src: GPUBuffer; dst: GPUBuffer; n4: number; workgroups: number }): void {
  const grid = Gpu.grid(args.workgroups);
  rec.dispatch({
    kernel: 'bench_peak_copy',
    shader: 'bench_peak_copy',
    constants: { WG },
    bindings: { src: args.src, dst: args.dst },
    params: [['n4', 'u32', args.n4], ['stride', 'u32', grid[0] * grid[1] * WG]],
    workgroups: grid,
  });
}

export function peak_dispatch_forward(rec: Recorder, args: { count: GPUBuffer }): void {
  rec.dispatch({ kernel: 'bench_peak_dispatch', shader: 'bench_peak_dispatch', bindings: { count: args.count }, workgroups: [1] });
}

/**
 * Wall µs per dispatch of `n` dependent dispatches in one submit (submit to done, the median of 3 after a warmup),
 * and the CPU µs per dispatch of recording, encoding and submitting them (GpuStats encodeMs). The rest is the GPU's
 * launch and barrier cost; the step suite multiplies it by each stage's dispatches (its `dispatch floor ms`).
 */
async function dispatchCost(gpu: Gpu, n: number): Promise<{ us: number; cpuUs: number }> {
  const count = gpu.createBuffer('peak.count', 16);
  const once = async () => {
    const rec = gpu.recorder('peak dispatch');
    const [t0, e0] = [performance.now(), gpu.stats.encodeMs];
    for (let i = 0; i < n; i++) peak_dispatch_forward(rec, { count });
    await rec.finish();
    return { us: ((performance.now() - t0) * 1e3) / n, cpuUs: ((gpu.stats.encodeMs - e0) * 1e3) / n };
  };
  await once();
  const runs = [await once(), await once(), await once()].sort((a, b) => a.us - b.us);
  count.destroy();
  return runs[1];
}

/** The probes, with the sizes a run takes (quick: a software adapter in seconds). */
export async function measurePeak(gpu: Gpu, opts: BenchOptions): Promise<{ peak: Peak; rows: Row[] }> {
  const threads = opts.quick ? 16384 : 262144;
  const iters = opts.quick ? 256 : 2048;
  const out = gpu.createBuffer('peak.out', threads * 4);
  const rows: Row[] = [];
  const fma = async (f16: boolean) => {
    const t = await timeKernels(gpu, f16 ? 'peak fma f16' : 'peak fma', (rec) => peak_fma_forward(rec, { out, threads, iters, f16 }), { reps: 3 });
    const gflops = fmaFlops(threads, iters) / (t.ms / 1e3) / 1e9;
    rows.push({ probe: f16 ? 'fma f16' : 'fma f32', threads, iters, ms: t.ms, timer: t.timer, 'GFLOP/s': gflops, 'GB/s': null });
    return gflops;
  };
  const fma_gflops = await fma(false);
  const fma_f16_gflops = gpu.hasF16 ? await fma(true) : null;
  out.destroy();
  // Copy: as large as one binding allows, up to 256 MiB (64 MiB when quick), so caches do not hold it.
  const bytes = Math.min(opts.quick ? 64 * 2 ** 20 : 256 * 2 ** 20, Math.floor(gpu.limits.maxStorageBufferBindingSize / 16) * 16);
  const n4 = bytes / 16;
  const src = gpu.createBuffer('peak.src', bytes);
  const dst = gpu.createBuffer('peak.dst', bytes);
  const workgroups = Math.min(Math.ceil(n4 / WG), 8192);
  const t = await timeKernels(gpu, 'peak copy', (rec) => peak_copy_forward(rec, { src, dst, n4, workgroups }), { reps: 3 });
  const copy_gbps = (2 * bytes) / (t.ms / 1e3) / 1e9;
  rows.push({ probe: 'copy', threads: workgroups * WG, iters: null, ms: t.ms, timer: t.timer, 'GFLOP/s': null, 'GB/s': copy_gbps, 'MiB': bytes / 2 ** 20 });
  src.destroy();
  dst.destroy();
  const n = opts.quick ? 256 : 1024;
  const d = await dispatchCost(gpu, n);
  rows.push({ probe: 'dispatch', threads: 1, iters: n, ms: (d.us * n) / 1e3, timer: 'wall', 'GFLOP/s': null, 'GB/s': null, 'µs/dispatch': d.us, 'cpu µs/dispatch': d.cpuUs });
  return { peak: { fma_gflops, fma_f16_gflops, copy_gbps, dispatch_us: d.us }, rows };
}

export async function run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> {
  if (!gpu) throw new Error('peak: needs a GPU adapter');
  return (await measurePeak(gpu, opts)).rows;
}
