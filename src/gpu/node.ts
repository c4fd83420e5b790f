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

// Dawn's Node binding settles its promises (mapAsync, onSubmittedWorkDone, popErrorScope) from a tick, a native
// function it queues through the global setImmediate again and again while any is pending: the main thread spins
// on one core for as long as the GPU works. On a CPU adapter (lavapipe, SwiftShader) the GPU's work runs on those
// same cores: on this project's 2-core machine a SmolLM2-shaped `--quick` update took 9.3 s with the spin and 5.0 s
// with the ticks spaced out. So on CPU adapters a wait spins for its first SPIN_MS (a short read-back answers at
// once), then Dawn's ticks go through setTimeout (about 1 ms apart). Every other setImmediate (Node's own, the test
// runner's) is untouched, and on a GPU nothing changes (the spin costs a spare core there, and no latency).
const SPIN_MS = 1;
const NEW_WAIT_MS = 4; // a tick this long after the previous one belongs to a new wait

/** Dawn's ticks so far: queued at once (spun) or through setTimeout (spaced). A test holds the spacing to the binding's behaviour. */
export const dawnTicks = { spun: 0, spaced: 0 };

let spaced = false;

function spaceDawnTicks(): void {
  if (spaced) return;
  spaced = true;
  const immediate = globalThis.setImmediate;
  const native = new WeakMap<object, boolean>();
  const isNative = (f: unknown): boolean => {
    if (typeof f !== 'function') return false;
    let v = native.get(f);
    // Dawn's tick: a native, unnamed function (a bound JS function prints as native too, but is named "bound …").
    if (v === undefined) native.set(f, (v = f.name === '' && Function.prototype.toString.call(f).endsWith('{ [native code] }')));
    return v;
  };
  let waitStart = -Infinity;
  let last = -Infinity;
  const spacing = (cb: (...args: unknown[]) => void, ...args: unknown[]) => {
    if (!isNative(cb)) return immediate(cb, ...args);
    const now = performance.now();
    if (now - last > NEW_WAIT_MS) waitStart = now;
    last = now;
    if (now - waitStart < SPIN_MS) {
      dawnTicks.spun++;
      return immediate(cb, ...args);
    }
    dawnTicks.spaced++;
    return setTimeout(cb, 0, ...args);
  };
  // util.promisify(setImmediate) keeps Node's own promise form (the custom symbol), not a wrapper of this one.
  Object.defineProperty(spacing, promisify.custom, { value: (immediate as unknown as Record<symbol, unknown>)[promisify.custom] });
  globalThis.setImmediate = spacing as unknown as typeof setImmediate;
}
