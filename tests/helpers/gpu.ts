// The test GPU: the process-wide Dawn device (a software Vulkan adapter in CI). Tests never skip for
// want of a GPU: if no adapter can be had, getting it throws and the test fails.
import type { AdapterClass, Gpu, Recorder } from '../../src/gpu/context.ts';
import { adapterClass } from '../../src/gpu/context.ts';

export { nodeGpu as testGpu } from '../../src/gpu/node.ts';

/**
 * Why a test that times dispatches requires 'timestamp-query' instead of passing without it: the test adapters
 * (lavapipe from bookworm-backports, SwiftShader) have it, and a test that returned early without it would leave
 * the profiler untested while passing. The refusal without it has its own test (tests/gpu/profiler.test.ts).
 */
export const NEEDS_TIMESTAMPS = "the test adapter has 'timestamp-query' (lavapipe and SwiftShader do): the profiler's checks need it";

/** How each adapter class reports itself (adapterClass reads these). */
const REPORTS: Record<AdapterClass, Partial<Gpu['adapter']>> = {
  gpu: { vendor: 'test', architecture: 'gpu', device: 'test-gpu', description: 'a GPU', isFallback: false },
  swiftshader: { vendor: 'google', architecture: 'swiftshader', device: 'swiftshader', description: 'SwiftShader driver', isFallback: true },
  cpu: { vendor: 'mesa', architecture: 'software', device: 'llvmpipe', description: 'llvmpipe', isFallback: true },
};

/**
 * The test GPU as the launchers see an adapter of class `cls`: the same device, an adapter report that picks
 * that class's kernels (GEMM, attention, norm threads, workgroup caps), so each class's path runs here too. The
 * view counts its own allocations (peakBytes, allocatedBytes) and gets its own device-wide scratch buffers: read
 * memory figures from the Gpu the buffers were made through.
 */
export function asAdapterClass(gpu: Gpu, cls: AdapterClass): Gpu {
  const view = Object.create(gpu, { adapter: { value: { ...gpu.adapter, ...REPORTS[cls] } } }) as Gpu;
  if (adapterClass(view.adapter) !== cls) throw new Error(`asAdapterClass: the ${cls} report reads as ${adapterClass(view.adapter)}`);
  return view;
}

/**
 * What `rec`'s dispatches carry from now on, `pick(d)` of each in order (undefined skipped): which kernels, entry
 * points and constants the launchers chose. The dispatches still run.
 */
export function spyDispatches<T>(rec: Recorder, pick: (d: Parameters<Recorder['dispatch']>[0]) => T | undefined): T[] {
  const seen: T[] = [];
  const dispatch = rec.dispatch.bind(rec);
  rec.dispatch = (d) => {
    const v = pick(d);
    if (v !== undefined) seen.push(v);
    dispatch(d);
  };
  return seen;
}
