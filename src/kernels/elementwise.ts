// Shared launcher plumbing for flat elementwise kernels (gelu, silu_gate, residual, optimizers, sumsq,
// scale). A flat f32 tensor can be larger than one storage binding (the Qwen2-0.5B embedding is
// 151936 x 896 f32 = 544 MB; lavapipe binds at most 128 MiB), so every such kernel runs once per
// window. Unlike the row windows of windows.ts, flat windows start at multiples of the offset
// alignment, so every operand is bound at the same byte offset and the shader indexes from 0.
import { Gpu, type Binding, type Constants, type ParamWord, type Recorder } from '../gpu/context.ts';
import { bindingLimit, boundBytes, checkSize } from './windows.ts';

export interface FlatWindow {
  elemStart: number; // first element of the window in the whole tensor
  count: number; // elements in the window
}

/** Splits n f32 elements into windows of at most maxBindingBytes starting at aligned offsets (none for n = 0). */
export function windows(n: number, maxBindingBytes: number, offsetAlignment: number): FlatWindow[] {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`element count must be a non-negative integer, got ${n}`);
  const align = Math.max(4, offsetAlignment);
  const per = (Math.floor(maxBindingBytes / align) * align) / 4;
  const out: FlatWindow[] = [];
  for (let s = 0; s < n; s += per) out.push({ elemStart: s, count: Math.min(per, n - s) });
  return out;
}

/** The flat windows of an n-element tensor on this device; `limit` lowers the binding size (tests). */
export function flatWindows(rec: Recorder, kernel: string, n: number, buffers: Record<string, GPUBuffer>, limit?: number): FlatWindow[] {
  for (const [field, buf] of Object.entries(buffers)) checkSize(kernel, field, buf, n);
  return windows(n, bindingLimit(rec.gpu, limit), rec.gpu.limits.minStorageBufferOffsetAlignment);
}

/** The byte window of `buf` that holds elements [w.elemStart, w.elemStart + w.count). */
export function bindWindow(buf: GPUBuffer, w: FlatWindow): Binding {
  return { buffer: buf, offset: w.elemStart * 4, size: w.count * 4 };
}

/**
 * Dispatches `shader` over n elements, one thread per element, window by window. `buffers` are bound
 * by the shader's variable names (each through the same window, each checked to hold n elements, the
 * error naming the field); the uniform params are [n: the window's count, ...extra].
 */
export function dispatchElementwise(
  rec: Recorder,
  d: {
    kernel: string;
    shader: string;
    entryPoint?: string;
    n: number;
    buffers: Record<string, GPUBuffer>;
    extra?: ParamWord[];
    constants?: Constants;
    limit?: number; // lowers the binding size, so tests can exercise the window split
    /** Buffers read and written (an in-place update): twice in the dispatch's bytes; the others once each. */
    readWrite?: string[];
  },
): void {
  const wg = 256;
  for (const w of flatWindows(rec, d.kernel, d.n, d.buffers, d.limit)) {
    const bindings = Object.fromEntries(Object.entries(d.buffers).map(([name, b]) => [name, bindWindow(b, w)]));
    rec.dispatch({
      kernel: d.kernel,
      shader: d.shader,
      entryPoint: d.entryPoint,
      constants: { WG: wg, ...d.constants },
      bindings,
      params: [['n', 'u32', w.count], ...(d.extra ?? [])],
      workgroups: Gpu.grid(Math.ceil(w.count / wg)),
      work: { bytes: boundBytes(bindings, d.readWrite) },
    });
  }
}
