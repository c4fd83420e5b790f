// Node entry to the GPU (tests, CLI, benchmarks): Dawn through the npm `webgpu` package, WGSL read
// from shaders/ on disk. The object `create()` returns is kept at module level for the life of the
// process: if it is garbage-collected while a device lives, Dawn can crash the process. On CPU adapters
// Dawn's promise ticks are spaced out so that waiting for the GPU does not take a core from it (spaceDawnTicks).
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { createGpu, requestBestAdapter } from './adapter.ts';
import { isCpuAdapter, type Gpu } from './context.ts';

const SHADER_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shaders');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
let navigatorGpu: any = null; // module-level on purpose (see header)
let shared: Promise<Gpu> | null = null;

function readShader(name: string): string {
  const p = join(SHADER_DIR, `${name}.wgsl`);
  if (!existsSync(p)) throw new Error(`unknown shader "${name}" (no ${p})`);
  return readFileSync(p, 'utf8');
}

/**
 * The process-wide GPU. Honors GRPO_STUDIO_DAWN_FLAGS (comma-separated Dawn toggles, e.g.
 * "backend=opengles") for machines where only the GL backend works.
 */
export function nodeGpu(): Promise<Gpu> {
  if (!shared) {
    shared = (async () => {
      const { create, globals } = await import('webgpu');
      Object.assign(globalThis, globals);
      const flags = (process.env.GRPO_STUDIO_DAWN_FLAGS ?? '').split(',').filter(Boolean);
      navigatorGpu = create(flags);
      const compat = flags.some((f) => f.includes('opengles'));
      const adapter = await requestBestAdapter(navigatorGpu, compat ? [{ featureLevel: 'compatibility' } as GPURequestAdapterOptions] : []);
      const gpu = await createGpu(adapter, `dawn-node${flags.length ? ` (${flags.join(',')})` : ''}`, readShader);
      if (isCpuAdapter(gpu.adapter)) spaceDawnTicks();
      return gpu;
    })();
  }
  return shared;
}

// Dawn's Node binding settles its promises (mapAsync, onSubmittedWorkDone, popErrorScope) from a tick: its
// AsyncRunner::ScheduleProcessEvents (google/dawn src/dawn/node/binding/AsyncRunner.cpp) reads the global
// setImmediate on every call and queues a new unnamed N-API function through it, first when a promise is made with
// none pending, then again from inside each tick while any is pending. The main thread spins on one core for as
// long as the GPU works. On a CPU adapter (lavapipe, SwiftShader) the GPU's work runs on those same cores: on this
// project's 2-core machine a SmolLM2-shaped `--quick` update took 9.3 s with the spin and 5.1 s with the ticks
// spaced out. So on CPU adapters each wait spins for its first SPIN_MS (a short read-back answers at once), then
// Dawn's ticks go through setTimeout (about 1 ms apart). A wait starts with a tick queued from outside a tick.
// Every other setImmediate (Node's own, the test runner's, a promise's resolve) is untouched, and on a GPU nothing
// changes (the spin costs a spare core there, and no latency). A test holds this to the binding's behaviour.
const SPIN_MS = 1;

/** Dawn's ticks so far: queued at once (spun) or through setTimeout (spaced). */
export const dawnTicks = { spun: 0, spaced: 0 };

let spaced = false;

/**
 * Dawn's tick: a native function with no name and no parameters (a bound JS function prints as native too but is
 * named "bound …"; a promise's resolve and reject take one parameter). Its AsyncRunner's rejection callback looks
 * the same and is spaced like a tick, which only delays a rejection by a millisecond.
 */
const isDawnTick = (f: unknown): f is (...args: unknown[]) => void =>
  typeof f === 'function' && f.name === '' && f.length === 0 && Function.prototype.toString.call(f).endsWith('{ [native code] }');

function spaceDawnTicks(): void {
  if (spaced) return;
  spaced = true;
  const immediate = globalThis.setImmediate;
  let inTick = false;
  let waitStart = -Infinity;
  const spacing = (cb: (...args: unknown[]) => void, ...args: unknown[]) => {
    if (!isDawnTick(cb)) return immediate(cb, ...args);
    const now = performance.now();
    if (!inTick) waitStart = now; // queued from JS (a promise made with none pending): a new wait
    const tick = (...a: unknown[]) => {
      inTick = true;
      try {
        cb(...a);
      } finally {
        inTick = false;
      }
    };
    if (now - waitStart < SPIN_MS) {
      dawnTicks.spun++;
      return immediate(tick, ...args);
    }
    dawnTicks.spaced++;
    return setTimeout(tick, 0, ...args);
  };
  // util.promisify(setImmediate) keeps Node's own promise form (the custom symbol), not a wrapper of this one.
  Object.defineProperty(spacing, promisify.custom, { value: (immediate as unknown as Record<symbol, unknown>)[promisify.custom] });
  globalThis.setImmediate = spacing as unknown as typeof setImmediate;
}
