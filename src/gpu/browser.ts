// Browser entry to the GPU: navigator.gpu, WGSL bundled by Vite as raw strings (so the app works offline).
import { createGpu, requestBestAdapter } from './adapter.ts';
import { GpuError, type Gpu } from './context.ts';

// Kernels and the pieces they //#include (shaders/common/), named by their path under shaders/ without `.wgsl`.
const files = import.meta.glob('../../shaders/**/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
const SOURCES = new Map(Object.entries(files).map(([path, code]) => [path.replace(/^.*\/shaders\/(.*)\.wgsl$/, '$1'), code]));

/** A kernel's or a shared piece's WGSL as bundled (exported for the loader test). */
export function readShader(name: string): string {
  const code = SOURCES.get(name);
  if (code === undefined) throw new Error(`unknown shader "${name}"`);
  return code;
}

let shared: Promise<Gpu> | null = null;

export function browserGpu(): Promise<Gpu> {
  if (!shared) {
    shared = (async () => {
      const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
      if (!gpu) throw new GpuError('unsupported', 'navigator.gpu', 'this browser does not expose WebGPU (try a current Chrome/Edge, or enable WebGPU)');
      const adapter = await requestBestAdapter(gpu);
      return createGpu(adapter, 'webgpu (browser)', readShader);
    })();
  }
  return shared;
}
