// KernelProfiler (src/gpu/profiler.ts): attached to the Gpu, every recorder's submit times each dispatch, per
// kernel. Checked here: call counts per kernel equal what the recorders recorded, including recorders with more
// dispatches than one query set holds (a small chunk, and the real 2048-dispatch set); times are finite and
// non-negative with a positive total (no value beyond that: timings are not asserted); the kernels' results are
// bit-identical with and without the profiler; each kernel's declared work is summed beside its time; detaching stops collection; a recorder's own profiler overrides
// the Gpu's; a failed submit's times are dropped, not counted; an adapter without 'timestamp-query' refuses
// with one line. Lavapipe has timestamp-query; where the test GPU has none, the refusal is what is asserted.
import { describe, expect, it } from 'vitest';
import { KernelProfiler, type Gpu, type KernelTime, type Recorder } from '../../src/gpu/context.ts';
import { MAX_QUERIES_PER_SET } from '../../src/gpu/profiler.ts';
import { matmul_forward } from '../../src/kernels/matmul.ts';
import { residual_accumulate, residual_forward } from '../../src/kernels/residual.ts';
import { NEEDS_TIMESTAMPS, testGpu } from '../helpers/gpu.ts';

const [M, K, N] = [8, 16, 8];
const REFUSAL = /^KernelProfiler: this adapter has no 'timestamp-query' feature[^\n]*$/;

/** The inputs, and fresh outputs, of the recorded chain. */
function buffers(gpu: Gpu) {
  const f = (n: number, s: number) => Float32Array.from({ length: n }, (_, i) => ((i * 37 + s) % 11) / 8 - 0.6);
  return {
    inp: gpu.upload('inp', f(M * K, 1)),
    weight: gpu.upload('weight', f(N * K, 2)),
    c: gpu.upload('c', f(M * N, 3)),
    mm: gpu.createBuffer('mm', 4 * M * N),
    sum: gpu.createBuffer('sum', 4 * M * N),
    acc: gpu.upload('acc', f(M * N, 4)),
  };
}
type Bufs = ReturnType<typeof buffers>;

/** matmul_forward × mm, residual_forward × 1, residual_accumulate × acc: 2–3 kernels with known call counts. */
function record(rec: Recorder, b: Bufs, mm: number, acc: number): void {
  for (let i = 0; i < mm; i++) matmul_forward(rec, { out: b.mm, inp: b.inp, weight: b.weight, M, K, N, weightLayout: 'out_in' });
  residual_forward(rec, { out: b.sum, a: b.mm, b: b.c, n: M * N });
  for (let i = 0; i < acc; i++) residual_accumulate(rec, { dst: b.acc, src: b.sum, n: M * N });
}

async function outputs(gpu: Gpu, b: Bufs): Promise<Float32Array[]> {
  return (await gpu.readAll([{ buf: b.mm }, { buf: b.sum }, { buf: b.acc }])).map((a) => new Float32Array(a));
}

const tally = (names: string[]) => {
  const t = new Map<string, number>();
  for (const k of names) t.set(k, (t.get(k) ?? 0) + 1);
  return t;
};
const callsOf = (times: KernelTime[]) => new Map(times.map((t) => [t.kernel, t.calls]));

function expectSane(times: KernelTime[]): void {
  for (const t of times) {
    expect(Number.isFinite(t.gpuMs), t.kernel).toBe(true);
    expect(t.gpuMs, t.kernel).toBeGreaterThanOrEqual(0);
    expect(t.shaders.length, t.kernel).toBeGreaterThan(0);
  }
  expect(times.reduce((s, t) => s + t.gpuMs, 0)).toBeGreaterThan(0);
}

describe('KernelProfiler', () => {
  it('times every dispatch of every recorder per kernel, across query sets, without changing results; detaching stops it', async () => {
    const gpu = await testGpu();
    expect(gpu.hasTimestamps, NEEDS_TIMESTAMPS).toBe(true);
    // The results without a profiler.
    const ref = buffers(gpu);
    const plain = gpu.recorder('plain');
    record(plain, ref, 3, 300);
    await plain.finish();
    const want = await outputs(gpu, ref);

    const profiler = new KernelProfiler(gpu, { chunk: 64 });
    gpu.profiler = profiler;
    const got = buffers(gpu);
    const recorded: string[] = [];
    try {
      // Two recorders in flight at once, one of 304 dispatches (5 query sets of 64), one of a few.
      const big = gpu.recorder('big');
      record(big, got, 3, 300);
      const small = buffers(gpu);
      const few = gpu.recorder('few');
      record(few, small, 2, 1);
      recorded.push(...big.kernels, ...few.kernels);
      await Promise.all([big.submit(), few.submit()]);
      await profiler.settle();
    } finally {
      gpu.profiler = null;
    }
    const times = profiler.take();
    expect(callsOf(times)).toEqual(tally(recorded));
    expect(times.find((t) => t.kernel === 'residual_accumulate')?.shaders).toEqual(['residual_backward']);
    // Beside each kernel's time, the work its dispatches declared: 5 products of 2·M·N·K FLOPs; 301 in-place
    // adds reading src and reading and writing dst, 2 adds reading two tensors and writing one (4 bytes each).
    const work = new Map(times.map((t) => [t.kernel, t]));
    expect(times.reduce((f, t) => f + t.flops, 0)).toBe(5 * 2 * M * N * K); // the products (matmul_forward, or a GPU's few-row kernel)
    expect(work.get('residual_accumulate')?.bytesMoved).toBe(301 * 3 * 4 * M * N);
    expect(work.get('residual_forward')?.bytesMoved).toBe(2 * 3 * 4 * M * N);
    expect(work.get('residual_forward')?.flops).toBe(0);
    expectSane(times);
    expect(profiler.dropped).toBe(0);
    expect(profiler.querySets).toBeGreaterThanOrEqual(5);
    expect(await outputs(gpu, got)).toEqual(want);

    // Detached: nothing more is collected, and take() started afresh.
    const after = gpu.recorder('after');
    record(after, got, 1, 1);
    await after.finish();
    await profiler.settle();
    expect(profiler.peek()).toEqual([]);
    profiler.destroy();
  });

  it('fills the real 2048-dispatch query set and goes on in a second one', async () => {
    const gpu = await testGpu();
    expect(gpu.hasTimestamps, NEEDS_TIMESTAMPS).toBe(true);
    const profiler = new KernelProfiler(gpu);
    expect(2 * profiler.chunk).toBe(MAX_QUERIES_PER_SET);
    const b = buffers(gpu);
    gpu.profiler = profiler;
    try {
      const rec = gpu.recorder('past one set');
      record(rec, b, 1, profiler.chunk + 50);
      const recorded = [...rec.kernels];
      await rec.finish();
      await profiler.settle();
      const times = profiler.take();
      expect(callsOf(times)).toEqual(tally(recorded));
      expectSane(times);
      expect(profiler.querySets).toBe(2);
    } finally {
      gpu.profiler = null;
      await profiler.settle();
      profiler.destroy();
    }
  });

  it("a recorder's own profiler times that recorder only; a failed submit's times are dropped", async () => {
    const gpu = await testGpu();
    expect(gpu.hasTimestamps, NEEDS_TIMESTAMPS).toBe(true);
    const own = new KernelProfiler(gpu, { chunk: 4 });
    const b = buffers(gpu);
    const mine = gpu.recorder('mine');
    mine.profiler = own;
    record(mine, b, 1, 9);
    const other = gpu.recorder('other');
    record(other, b, 2, 2);
    await Promise.all([mine.finish(), other.finish()]);
    await own.settle();
    expect(callsOf(own.take())).toEqual(tally(mine.kernels));

    // A buffer destroyed before submit: queue.submit refuses the whole command buffer, nothing ran.
    const doomed = gpu.upload('doomed', new Float32Array(M * N));
    const bad = gpu.recorder('bad');
    bad.profiler = own;
    residual_accumulate(bad, { dst: doomed, src: b.sum, n: M * N });
    residual_accumulate(bad, { dst: doomed, src: b.sum, n: M * N });
    doomed.destroy();
    await expect(bad.submit()).rejects.toThrow();
    await own.settle();
    expect(own.peek()).toEqual([]);
    expect(own.dropped).toBe(2);
    own.destroy();
  });

  it("refuses with one line on an adapter without 'timestamp-query'", async () => {
    const gpu = await testGpu();
    const noTimestamps = Object.create(gpu, { hasTimestamps: { value: false } }) as Gpu;
    expect(() => new KernelProfiler(noTimestamps)).toThrow(REFUSAL);
    expect(() => new KernelProfiler(gpu, { chunk: MAX_QUERIES_PER_SET })).toThrow(gpu.hasTimestamps ? /chunk must be an integer/ : REFUSAL);
  });
});
