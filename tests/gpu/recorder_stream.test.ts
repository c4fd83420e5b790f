// A streaming recorder (src/gpu/recorder.ts RecorderOptions.stream) sends its commands while it records, in
// pieces of STREAM_FIRST dispatches doubling up to STREAM_DISPATCHES. Checked here: a chain whose result depends
// on every dispatch's order and params gives exactly the CPU's values (all exact in f32) in one submit per piece,
// the same as one submit; another recorder submitting between two pieces (writing its own params
// into the shared params pages) does not change them; an invalid dispatch in a later piece is named by the
// GpuError and the recorder still closes; an attached profiler counts every dispatch of every piece.
import { describe, expect, it } from 'vitest';
import { GpuError, KernelProfiler, statsSince, type Gpu, type Recorder } from '../../src/gpu/context.ts';
import { STREAM_DISPATCHES, STREAM_FIRST } from '../../src/gpu/recorder.ts';
import { residual_accumulate } from '../../src/kernels/residual.ts';
import { NEEDS_TIMESTAMPS, testGpu } from '../helpers/gpu.ts';
import { scale } from '../helpers/scale.ts';

const n = 37;


/** Dispatch i of the chain: x ← x · f(i) (f cycles 2, 0.5, 1, each its own params), then x ← x + one. */
const factor = (i: number) => [2, 0.5, 1][i % 3];

function chain(rec: Recorder, x: GPUBuffer, one: GPUBuffer, from: number, to: number): void {
  for (let i = from; i < to; i++) {
    scale(rec, x, n, factor(i));
    residual_accumulate(rec, { dst: x, src: one, n });
  }
}

/** The chain's result on the CPU: every value a multiple of 0.5 below 2^22, exact in f32. */
function expected(steps: number): number[] {
  return Array.from({ length: n }, (_, j) => {
    let v = j + 1;
    for (let i = 0; i < steps; i++) v = v * factor(i) + 1;
    return v;
  });
}

function inputs(gpu: Gpu) {
  return { x: gpu.upload('x', Float32Array.from({ length: n }, (_, j) => j + 1)), one: gpu.upload('one', new Float32Array(n).fill(1)) };
}

async function read(gpu: Gpu, x: GPUBuffer): Promise<number[]> {
  return Array.from(await gpu.readF32(x, n));
}

describe('streaming recorder', () => {
  it('sends pieces of 16, 32, 64, then 128 dispatches as it records; the result is exactly the one-submit result', async () => {
    const gpu = await testGpu();
    const steps = 170; // 340 dispatches: pieces of 16, 32, 64, 128, then 100 sent by submit()
    expect([STREAM_FIRST, STREAM_DISPATCHES]).toEqual([16, 128]);
    for (const stream of [false, true]) {
      const { x, one } = inputs(gpu);
      const before = { ...gpu.stats };
      const rec = gpu.recorder('chain', { stream });
      chain(rec, x, one, 0, steps);
      // Sent while recording: the pieces so far are already submitted.
      expect(statsSince(gpu.stats, before).submits).toBe(stream ? 4 : 0);
      await rec.finish();
      expect(statsSince(gpu.stats, before).submits).toBe(stream ? 5 : 1);
      expect(statsSince(gpu.stats, before).dispatches).toBe(2 * steps);
      expect(await read(gpu, x)).toEqual(expected(steps));
      x.destroy();
      one.destroy();
    }
    expect(gpu.openRecorderCount).toBe(0);
  });

  it("another recorder's submit between two pieces (its params in the shared pages) changes nothing", async () => {
    const gpu = await testGpu();
    const { x, one } = inputs(gpu);
    const other = gpu.upload('other', new Float32Array(n).fill(3));
    const rec = gpu.recorder('chain', { stream: true });
    chain(rec, x, one, 0, 65); // 130 dispatches: three pieces sent (112), 18 recorded
    const between = gpu.recorder('between');
    for (let i = 0; i < 40; i++) scale(between, other, n, -2); // 40 params slots from the start of page 0
    await between.submit();
    chain(rec, x, one, 65, 200);
    await rec.finish();
    expect(await read(gpu, x)).toEqual(expected(200));
    expect(await read(gpu, other)).toEqual(new Array(n).fill(3 * 2 ** 40));
    for (const b of [x, one, other]) b.destroy();
  });

  it('an invalid dispatch in a later piece is named; the recorder closes', async () => {
    const gpu = await testGpu();
    const { x, one } = inputs(gpu);
    const rec = gpu.recorder('chain', { stream: true });
    chain(rec, x, one, 0, 100);
    scale(rec, x, n, 2, { kernel: 'too_many_groups', workgroups: gpu.limits.maxComputeWorkgroupsPerDimension + 1 }); // dispatch 201: the fourth piece (dispatches 113–240)
    chain(rec, x, one, 100, 150);
    const e = await rec.submit().then(() => null, (err: unknown) => err);
    expect(e).toBeInstanceOf(GpuError);
    expect((e as GpuError).message).toContain('too_many_groups');
    expect(gpu.openRecorderCount).toBe(0);
    // As documented: the failed piece ran nothing, the others ran (the first three pieces alone change x).
    expect(await read(gpu, x)).not.toEqual(expected(0));
    x.destroy();
    one.destroy();
  });

  it('an attached profiler counts every dispatch of every piece', async () => {
    const gpu = await testGpu();
    expect(gpu.hasTimestamps, NEEDS_TIMESTAMPS).toBe(true);
    const { x, one } = inputs(gpu);
    const profiler = new KernelProfiler(gpu, { chunk: 50 });
    const rec = gpu.recorder('chain', { stream: true });
    rec.profiler = profiler;
    chain(rec, x, one, 0, 150);
    await rec.finish();
    await profiler.settle();
    const calls = new Map(profiler.take().map((t) => [t.kernel, t.calls]));
    expect(Object.fromEntries(calls)).toEqual({ scale: 150, residual_accumulate: 150 });
    expect(await read(gpu, x)).toEqual(expected(150));
    profiler.destroy();
    x.destroy();
    one.destroy();
  });
});
