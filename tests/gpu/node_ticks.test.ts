// Waiting for the GPU in Node (src/gpu/node.ts spaceDawnTicks): on a CPU adapter (lavapipe, SwiftShader: the test
// GPU in CI), Dawn's promise ticks are spaced out once a wait passes its first millisecond, so the main thread does
// not spin on a core the adapter computes on; every other setImmediate (a JS callback, a promise's resolve) still
// runs as one. Held here to the binding's
// behaviour: a long GPU job must see spaced ticks (if a webgpu release stopped queueing its ticks through
// setImmediate, this fails instead of the spacing silently doing nothing); on a GPU adapter none are touched.
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { isCpuAdapter } from '../../src/gpu/context.ts';
import { dawnTicks } from '../../src/gpu/node.ts';
import { matmul_forward } from '../../src/kernels/matmul.ts';
import { testGpu } from '../helpers/gpu.ts';

describe("Dawn's ticks while waiting for the GPU", () => {
  it('are spaced out on a CPU adapter during a long wait, and never on a GPU; other immediates stay immediates', async () => {
    const gpu = await testGpu();
    const before = { ...dawnTicks };
    // A product of 2 · 384³ ≈ 0.11 GFLOP, a few times over: far past the spin's first millisecond on a CPU adapter.
    const n = 384;
    const [out, inp, weight] = [gpu.createBuffer('out', n * n * 4), gpu.createBuffer('inp', n * n * 4), gpu.createBuffer('w', n * n * 4)];
    const rec = gpu.recorder('long job');
    for (let i = 0; i < 4; i++) matmul_forward(rec, { out, inp, weight, M: n, K: n, N: n, weightLayout: 'out_in' });
    await rec.finish();
    for (const b of [out, inp, weight]) b.destroy();
    if (isCpuAdapter(gpu.adapter)) {
      expect(dawnTicks.spaced).toBeGreaterThan(before.spaced);
      expect(dawnTicks.spun).toBeGreaterThan(before.spun); // each wait's first ticks
    } else {
      expect(dawnTicks).toEqual({ spun: 0, spaced: 0 });
    }
    // A JS callback and a promise's resolve are not Dawn's tick: they stay immediates, not counted.
    const counted = { ...dawnTicks };
    const handle = setImmediate(() => {});
    expect(handle.constructor.name).toBe('Immediate');
    let resolveHandle: unknown;
    await new Promise((resolve) => (resolveHandle = setImmediate(resolve)));
    expect((resolveHandle as object).constructor.name).toBe('Immediate');
    expect(dawnTicks).toEqual(counted);
    // ... and util.promisify(setImmediate) is still Node's own (a value, through the custom promise form).
    expect(await promisify(setImmediate)('v')).toBe('v');
  });
});
