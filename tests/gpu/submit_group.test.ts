// SubmitGroup (src/gpu/submit_group.ts), the barrier the loss table runs its columns through: participants
// that record and read concurrently share ONE submit and ONE readback and each gets its own parts; a seat
// released without reading still lets the others finish; a failed submit rejects every reader (no hang);
// misuse (a second read, a seat too many) is refused.
import { describe, expect, it } from 'vitest';
import { GpuError, statsSince } from '../../src/gpu/context.ts';
import { SubmitGroup, type Seat } from '../../src/gpu/submit_group.ts';
import { testGpu } from '../helpers/gpu.ts';
import { scale } from '../helpers/scale.ts';


/** A participant: uploads 1..n, scales it by `factor` after a CPU pause (the trainers decide between kernels), reads it. */
async function participant(gpu: Awaited<ReturnType<typeof testGpu>>, seat: Seat, n: number, factor: number, pauseMs: number): Promise<Float32Array> {
  const x = gpu.upload('x', Float32Array.from({ length: n }, (_, i) => i + 1));
  try {
    await new Promise((r) => setTimeout(r, pauseMs));
    scale(seat.recorder, x, n, factor);
    return new Float32Array((await seat.read([{ buf: x, byteSize: 4 * n }]))[0]);
  } finally {
    x.destroy();
  }
}

describe('SubmitGroup', () => {
  it('concurrent participants share one submit and one readback; each reads its own result; a released seat does not block', async () => {
    const gpu = await testGpu();
    const sizes = [3, 300, 17, 1];
    const group = new SubmitGroup(gpu, 'test group', sizes.length + 1);
    const before = { ...gpu.stats };
    const runs = sizes.map((n, k) => {
      const seat = group.seat();
      return participant(gpu, seat, n, k + 2, 7 * (sizes.length - k)).finally(() => seat.release());
    });
    const refused = group.seat();
    const refusal = Promise.reject(new Error('refused before recording')).catch(() => refused.release());
    const got = await Promise.all(runs);
    await refusal;
    const work = statsSince(gpu.stats, before);
    expect([work.submits, work.readbacks]).toEqual([1, 1]);
    got.forEach((a, k) => expect(Array.from(a)).toEqual(Array.from({ length: sizes[k] }, (_, i) => (i + 1) * (k + 2))));
    expect(gpu.openRecorderCount).toBe(0);
  });

  it('a participant that records, then fails and retires its buffers, does not fail the others', async () => {
    const gpu = await testGpu();
    const group = new SubmitGroup(gpu, 'one fails late', 2);
    const [ok, failing] = [group.seat(), group.seat()];
    const late = (async () => {
      const y = gpu.upload('y', new Float32Array([1, 2, 3]));
      try {
        scale(failing.recorder, y, 3, 5);
        throw new Error('refused after recording');
      } finally {
        gpu.retire(y); // destroyed once the group's recorder has submitted
        failing.release();
      }
    })();
    await expect(late).rejects.toThrow(/after recording/);
    expect(Array.from(await participant(gpu, ok, 5, 3, 1))).toEqual([3, 6, 9, 12, 15]);
    expect(gpu.openRecorderCount).toBe(0);
  });

  it('a group of seats that all leave still submits (closing its recorder)', async () => {
    const gpu = await testGpu();
    const group = new SubmitGroup(gpu, 'all refused', 2);
    const [a, b] = [group.seat(), group.seat()];
    const submits = gpu.stats.submits;
    a.release();
    b.release();
    expect(gpu.stats.submits).toBe(submits + 1); // the submit is encoded at once, on the last release
    // The recorder closes once the submit's error scopes have answered (asynchronously): wait for that event.
    for (let i = 0; i < 500 && gpu.openRecorderCount > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(gpu.openRecorderCount).toBe(0);
  });

  it('a failed submit rejects every reader with the kernel-naming error', async () => {
    const gpu = await testGpu();
    const group = new SubmitGroup(gpu, 'failing group', 2);
    const [a, b] = [group.seat(), group.seat()];
    const x = gpu.upload('x', new Float32Array(4));
    scale(a.recorder, x, 4, 2, { kernel: 'too_many_groups', workgroups: gpu.limits.maxComputeWorkgroupsPerDimension + 1 });
    const reads = [a.read([{ buf: x }]), b.read([{ buf: x }])];
    for (const r of reads) {
      const e = await r.then(() => null, (err: unknown) => err);
      expect(e).toBeInstanceOf(GpuError);
      expect((e as GpuError).message).toContain('too_many_groups');
    }
    x.destroy();
  });

  it('refuses a second read of a seat and a seat beyond its participants', async () => {
    const gpu = await testGpu();
    const group = new SubmitGroup(gpu, 'misuse', 1);
    const seat = group.seat();
    expect(() => group.seat()).toThrow(/more seats than its 1 participants/);
    const x = gpu.upload('x', new Float32Array([1, 2]));
    const first = seat.read([{ buf: x, byteSize: 8 }]);
    expect(() => seat.read([{ buf: x, byteSize: 8 }])).toThrow(/reads once/);
    expect(Array.from(new Float32Array((await first)[0]))).toEqual([1, 2]);
    x.destroy();
    expect(() => new SubmitGroup(gpu, 'none', 0)).toThrow(/positive integer/);
  });
});
