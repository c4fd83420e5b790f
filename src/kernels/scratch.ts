// Device-wide scratch buffers for the launchers' intermediates (reduction partials, embedding link
// chains, attention's dP/g): one grow-only buffer per label and device, reused by every call instead
// of a fresh allocation per dispatch. Sharing is safe because dispatches run in queue order (WebGPU makes
// a dispatch's writes visible to the next, in the same compute pass or not) and every user writes its
// scratch before reading it. An outgrown buffer is retired: destroyed once no recorder that may have
// bound it is still open (Gpu.retire).
import type { Gpu } from '../gpu/context.ts';

const cache = new WeakMap<Gpu, Map<string, GPUBuffer>>();

/** A storage buffer of at least `byteSize` bytes, shared by every launch that asks for `label` on `gpu`. */
export function sharedScratch(gpu: Gpu, label: string, byteSize: number): GPUBuffer {
  let m = cache.get(gpu);
  if (!m) cache.set(gpu, (m = new Map()));
  let b = m.get(label);
  if (!b || b.size < byteSize) {
    if (b) gpu.retire(b);
    m.set(label, (b = gpu.createBuffer(label, byteSize)));
  }
  return b;
}
