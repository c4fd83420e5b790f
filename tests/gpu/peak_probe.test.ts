// The bench's peak probes (bench/peak.ts, shaders/bench_peak_*.wgsl) do the work they are credited with:
// each thread's FMA chains run exactly ITERS steps (the stored value equals the recurrence computed here in
// float64, and differs from ITERS ± 1 steps), the copy moves every vec4, and every dispatch of the dispatch
// probe's chain runs — so a GFLOP/s, GB/s or µs figure is never a kernel that the compiler cut short.
import { describe, expect, it } from 'vitest';
import { FMA_A, FMA_B, FMA_CHAINS, fmaFlops, peak_copy_forward, peak_dispatch_forward, peak_fma_forward } from '../../bench/peak.ts';
import { testGpu } from '../helpers/gpu.ts';

/** Thread i's stored value after `iters` steps of x ← a·x + b on its 4 chains × 4 lanes, float64. */
function expected(i: number, iters: number): number {
  const a = Math.fround(FMA_A);
  const b = Math.fround(FMA_B);
  const s = (i % 1024) / 1024;
  const x0 = [s, s + 0.125, s + 0.25, s + 0.375];
  const starts = [x0, x0.map((v) => v + 0.5), x0.map((v) => v - 0.5), x0.map((v) => v * 2)];
  let sum = 0;
  for (const chain of starts) for (let v of chain) {
    for (let k = 0; k < iters; k++) v = a * v + b;
    sum += v;
  }
  return sum;
}

describe('peak probes', () => {
  it('fma f32: every thread runs ITERS steps of its chains', async () => {
    const gpu = await testGpu();
    const threads = 1000; // not a multiple of the workgroup: the tail is guarded
    const iters = 37;
    const out = gpu.createBuffer('probe.out', threads * 4);
    const rec = gpu.recorder('probe');
    peak_fma_forward(rec, { out, threads, iters, f16: false });
    await rec.submit();
    const got = await gpu.readF32(out, threads);
    for (const i of [0, 1, 255, 256, 999]) {
      expect(got[i]).toBeCloseTo(expected(i, iters), 4);
      // One step more or less moves the value far beyond f32 rounding.
      expect(Math.abs(expected(i, iters + 1) - expected(i, iters))).toBeGreaterThan(1e-3);
    }
    expect(FMA_CHAINS).toBe(4);
    expect(fmaFlops(threads, iters)).toBe(threads * iters * 4 * 4 * 2);
    out.destroy();
  });

  it('fma f16 computes the same chains in half precision', async () => {
    const gpu = await testGpu();
    // Required of the test adapter (lavapipe has it) rather than returning early without it, which would pass untested.
    expect(gpu.hasF16, "the test adapter has 'shader-f16'").toBe(true);
    const out = gpu.createBuffer('probe.f16', 300 * 4);
    const rec = gpu.recorder('probe f16');
    peak_fma_forward(rec, { out, threads: 300, iters: 9, f16: true });
    await rec.submit();
    const got = await gpu.readF32(out, 300);
    for (const i of [0, 17, 299]) expect(Math.abs(got[i] - expected(i, 9))).toBeLessThan(0.05 * Math.max(1, Math.abs(expected(i, 9))));
    out.destroy();
  });

  it('copy moves every vec4, grid-stride past the grid', async () => {
    const gpu = await testGpu();
    const n4 = 5003;
    const src = gpu.upload('probe.src', Float32Array.from({ length: n4 * 4 }, (_, i) => i * 0.5 - 7));
    const dst = gpu.createBuffer('probe.dst', n4 * 16);
    const rec = gpu.recorder('probe copy');
    peak_copy_forward(rec, { src, dst, n4, workgroups: 3 }); // 768 threads: each copies ~7 vec4s
    await rec.submit();
    const got = await gpu.readF32(dst, n4 * 4);
    let bad = -1;
    for (let i = 0; i < n4 * 4 && bad < 0; i++) if (got[i] !== i * 0.5 - 7) bad = i;
    expect(bad).toBe(-1);
    src.destroy();
    dst.destroy();
  });

  it('dispatch: every one of a chain of dispatches in one submit runs, each after the one before', async () => {
    const gpu = await testGpu();
    const count = gpu.upload('probe.count', new Uint32Array([5, 0, 0, 0]));
    const rec = gpu.recorder('probe dispatch');
    for (let i = 0; i < 37; i++) peak_dispatch_forward(rec, { count });
    expect(rec.kernels.length).toBe(37);
    await rec.submit();
    // Each read what the one before wrote: a dispatch that ran early, or not at all, would leave fewer.
    expect((await gpu.readU32(count, 1))[0]).toBe(5 + 37);
    count.destroy();
  });
});
