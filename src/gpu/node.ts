// Node entry to the GPU (tests, CLI, benchmarks): Dawn through the npm `webgpu` package, WGSL read
// from shaders/ on disk. The object `create()` returns is kept at module level for the life of the
// process: if it is garbage-collected while a device lives, Dawn can crash the process.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGpu, requestBestAdapter } from './adapter.ts';
import type { Gpu } from './context.ts';

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
      return createGpu(adapter, `dawn-node${flags.length ? ` (${flags.join(',')})` : ''}`, readShader);
    })();
  }
  return shared;
}
