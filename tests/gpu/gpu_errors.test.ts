// The GPU layer's honesty (src/gpu): a failed dispatch's error names THAT kernel, not the recorder around
// it, whatever the failure (a bad binding caught when the bind group is made, a grid too large caught
// only when the command buffer is finished, an allocation that cannot be made), and a failed submit
// releases what the recorder held (its scratch, its place among open recorders) and leaves the device
// usable. Also: consecutive dispatches share one compute pass, params bound by dynamic offset keep each
// dispatch's own values while the bind groups are hit again on the next run, read-backs reuse pooled
// staging buffers, and outgrown shared scratch is destroyed.
import { beforeAll, describe, expect, it } from 'vitest';
import { GpuError, statsSince, type Gpu, type Recorder } from '../../src/gpu/context.ts';
import { sharedScratch } from '../../src/kernels/scratch.ts';
import { testGpu } from '../helpers/gpu.ts';
import { scale } from '../helpers/scale.ts';


async function failure(p: Promise<unknown>): Promise<GpuError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(GpuError);
  return e as GpuError;
}

/** Runs `record` on a fresh recorder expecting its submit to fail; checks that everything it held was released. */
async function failingSubmit(gpu: Gpu, record: (rec: Recorder) => void): Promise<GpuError> {
  const bytes = gpu.allocatedBytes;
  const pages = gpu.paramsPages.length;
  const rec = gpu.recorder('outer recorder');
  record(rec);
  const err = await failure(rec.submit());
  expect(gpu.allocatedBytes).toBe(bytes); // scratch destroyed, no params buffer left behind
  expect(gpu.paramsPages.length).toBe(pages);
  expect(gpu.openRecorderCount).toBe(0);
  expect(err.message).not.toContain('outer recorder');
  return err;
}

/** The device still computes right after a failure: x = 1..n scaled by 2 then 3 in one recorder. */
async function stillWorks(gpu: Gpu): Promise<void> {
  const n = 1000;
  const x = gpu.upload('x', Float32Array.from({ length: n }, (_, i) => i + 1));
  const rec = gpu.recorder('after');
  scale(rec, x, n, 2, { kernel: 'scale by 2' });
  scale(rec, x, n, 3, { kernel: 'scale by 3' });
  await rec.submit();
  const out = await gpu.readF32(x);
  x.destroy();
  expect(Array.from(out.subarray(0, 3))).toEqual([6, 12, 18]);
  expect(out[n - 1]).toBe(6 * n);
}

describe('GPU errors name the failing kernel', () => {
  // The params pages are created on first use and kept: make the first before counting bytes.
  beforeAll(async () => stillWorks(await testGpu()));

  it('a binding with the wrong usage (caught when the bind group is created)', async () => {
    const gpu = await testGpu();
    const x = gpu.createBuffer('x', 1024);
    const notStorage = gpu.createBuffer('uniform-only', 1024, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    const err = await failingSubmit(gpu, (rec) => {
      rec.scratch('scratch of the failing recorder', 4096);
      scale(rec, x, 256, 2, { kernel: 'good before' });
      scale(rec, notStorage, 256, 2, { kernel: 'bad usage' });
      scale(rec, x, 256, 2, { kernel: 'good after' });
    });
    expect(err.kernel).toBe('bad usage');
    expect(err.kind).toBe('validation');
    expect(err.message).toMatch(/^\[validation\] bad usage: /);
    x.destroy();
    notStorage.destroy();
    await stillWorks(gpu);
  });

  it('a grid larger than the device allows (caught only when the command buffer is finished)', async () => {
    const gpu = await testGpu();
    const x = gpu.createBuffer('x', 1024);
    const err = await failingSubmit(gpu, (rec) => {
      scale(rec, x, 256, 2, { kernel: 'good before' });
      scale(rec, x, 256, 2, { kernel: 'too many workgroups', workgroups: gpu.limits.maxComputeWorkgroupsPerDimension + 1 });
      scale(rec, x, 256, 2, { kernel: 'good after' });
    });
    expect(err.kernel).toBe('too many workgroups');
    expect(err.kind).toBe('validation');
    x.destroy();
    await stillWorks(gpu);
  });

  it('an allocation larger than the device allows names the kernel that binds it', async () => {
    const gpu = await testGpu();
    const x = gpu.createBuffer('x', 1024);
    const err = await failingSubmit(gpu, (rec) => {
      scale(rec, x, 256, 2, { kernel: 'good before' });
      const huge = rec.scratch('huge partials', gpu.limits.maxBufferSize + 4);
      scale(rec, huge, 256, 2, { kernel: 'needs huge partials' });
    });
    expect(err.kind).toBe('out-of-memory');
    expect(err.kernel).toBe('needs huge partials');
    expect(err.message).toContain('huge partials');
    x.destroy();
    await stillWorks(gpu);
  });

  it('a shader that does not exist names its kernel', async () => {
    const gpu = await testGpu();
    const x = gpu.createBuffer('x', 1024);
    const rec = gpu.recorder('outer recorder');
    scale(rec, x, 256, 2, { kernel: 'good before' });
    rec.dispatch({ kernel: 'missing shader', shader: 'no_such_shader', bindings: { x }, workgroups: [1] });
    // Recording is deferred: the unknown name surfaces at submit, not as an exception mid-launcher.
    await expect(rec.submit()).rejects.toThrow(/no_such_shader/);
    expect(gpu.openRecorderCount).toBe(0);
    x.destroy();
  });
});

describe('one compute pass per recorder, params by dynamic offset, cached bind groups', () => {
  it('consecutive dispatches share a pass; a copy splits it', async () => {
    const gpu = await testGpu();
    const n = 300;
    const x = gpu.upload('x', new Float32Array(n).fill(1));
    const y = gpu.createBuffer('y', n * 4);
    const s0 = { ...gpu.stats };
    const rec = gpu.recorder('passes');
    for (let i = 0; i < 5; i++) scale(rec, x, n, 2, { kernel: `scale ${i}` });
    rec.copy(x, 0, y, 0, n * 4);
    scale(rec, y, n, 0.5, { kernel: 'scale y' });
    await rec.submit();
    const d = statsSince(gpu.stats, s0);
    expect(d.dispatches).toBe(6);
    expect(d.computePasses).toBe(2);
    expect((await gpu.readF32(x))[0]).toBe(32);
    expect((await gpu.readF32(y))[n - 1]).toBe(16);
    x.destroy();
    y.destroy();
  });

  it('each dispatch reads its own params; a second run with new values hits every bind group', async () => {
    const gpu = await testGpu();
    const n = 400;
    const x = gpu.upload('x', new Float32Array(n).fill(1));
    // 300 dispatches, more than one 64 KiB params page holds at 256 B a slot. Dispatch i scales the first
    // i + 1 elements by 2 (even i) or 0.5 (odd i): element j gets the factors of i = j..299, which cancel in
    // pairs, leaving f_j when 300 − j is odd. A dispatch reading another's slot breaks the pattern.
    const D = 300;
    const run = async (flip: boolean) => {
      const rec = gpu.recorder('many');
      for (let i = 0; i < D; i++) scale(rec, x, i + 1, (i % 2 === 0) !== flip ? 2 : 0.5, { kernel: `scale ${i}` });
      const s0 = { ...gpu.stats };
      await rec.submit();
      return statsSince(gpu.stats, s0);
    };
    const expected = (flip: boolean) => Array.from({ length: n }, (_, j) => (j < D && (D - j) % 2 === 1 ? ((j % 2 === 0) !== flip ? 2 : 0.5) : 1));
    const first = await run(false);
    expect(first.dispatches).toBe(D);
    expect(first.computePasses).toBe(1);
    expect(Array.from(await gpu.readF32(x))).toEqual(expected(false));
    gpu.write(x, new Float32Array(n).fill(1));
    const second = await run(true);
    expect(Array.from(await gpu.readF32(x))).toEqual(expected(true));
    expect(second.bindGroupMisses).toBe(0);
    expect(second.bindGroupHits).toBe(D);
    x.destroy();
  });
});

describe('read-backs and scratch', () => {
  it('repeated reads reuse pooled staging buffers and count the bytes', async () => {
    const gpu = await testGpu();
    const x = gpu.upload('x', Float32Array.from({ length: 100 }, (_, i) => i));
    await gpu.readF32(x, 10);
    const created = gpu.staging.created;
    const read0 = gpu.stats.bytesRead;
    for (let i = 0; i < 5; i++) expect((await gpu.readF32(x, 10, 90))[9]).toBe(99);
    expect(gpu.staging.created).toBe(created);
    expect(gpu.stats.bytesRead - read0).toBe(5 * 40);
    x.destroy();
  });

  it('an outgrown shared scratch buffer is destroyed once the recorders that may bind it have submitted', async () => {
    const gpu = await testGpu();
    sharedScratch(gpu, 'test:grow', 1024);
    const before = gpu.allocatedBytes;
    sharedScratch(gpu, 'test:grow', 4096); // no recorder open: destroyed at once
    expect(gpu.allocatedBytes - before).toBe(4096 - 1024);

    const rec = gpu.recorder('binds the scratch');
    const mid = sharedScratch(gpu, 'test:grow', 4096);
    scale(rec, mid, 1024, 2, { kernel: 'scale scratch' });
    const bigger = sharedScratch(gpu, 'test:grow', 8192); // outgrown while `rec` holds a dispatch binding it
    expect(bigger).not.toBe(mid);
    const held = gpu.allocatedBytes;
    await rec.submit(); // would fail had `mid` been destroyed before the submit
    expect(held - gpu.allocatedBytes).toBe(4096);
  });
});
