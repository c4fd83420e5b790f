// Binding windows over row-major [rows, rowElems] arrays (f32/i32, or f16 logits), for kernels whose
// operands can be bigger than maxStorageBufferBindingSize (the Qwen2 wte/lm_head is 544 MB, its logits
// 1.2 GB; lavapipe binds 128 MiB). The caller chooses the row blocks (matmul aligns them to its tiles
// and has to cut several operands at the same rows; logprob_gather cuts f16 logits at the rows of its
// f32 gradient), so the two primitives are: how many rows one window may hold, and the window of a
// given row range. `limit` lowers the binding size for tests that must exercise the split path
// without gigabyte buffers. Also the size checks every launcher runs before binding a buffer.
import type { Binding, Gpu } from '../gpu/context.ts';

export interface Window {
  binding: Binding;
  base: number; // element index of the window's first row inside the binding
}

export function bindingLimit(gpu: Gpu, limit?: number): number {
  const max = gpu.limits.maxStorageBufferBindingSize;
  return limit === undefined ? max : Math.min(max, limit);
}

/** Rows of `rowElems` elements (`elemBytes` each) one window may hold (all of them if the whole array fits). */
export function rowsPerWindow(gpu: Gpu, limit: number, rows: number, rowElems: number, elemBytes = 4): number {
  const rowBytes = rowElems * elemBytes;
  if (rows * rowBytes <= limit) return rows;
  // A window that starts mid-array carries up to one alignment unit of slack before its first row.
  const n = Math.floor((limit - gpu.limits.minStorageBufferOffsetAlignment) / rowBytes);
  if (n < 1) throw new Error(`one row of ${rowBytes} bytes does not fit a storage binding of ${limit} bytes`);
  return n;
}

/**
 * The aligned window holding rows [rowStart, rowStart + rowCount) of a [*, rowElems] array of
 * `elemBytes`-byte elements. Its size is rounded up to whole 4-byte words (bindings are word-sized;
 * buffers from gpu.createBuffer are too, so the rounding never runs past the buffer).
 */
export function rowWindow(gpu: Gpu, buffer: GPUBuffer, rowStart: number, rowCount: number, rowElems: number, elemBytes = 4): Window {
  const align = gpu.limits.minStorageBufferOffsetAlignment;
  const start = rowStart * rowElems * elemBytes;
  const offset = Math.floor(start / align) * align;
  const end = start + rowCount * rowElems * elemBytes;
  return { binding: { buffer, offset, size: Math.ceil((end - offset) / 4) * 4 }, base: (start - offset) / elemBytes };
}

/** Bytes a binding spans: a window's size, or the buffer from its offset on. */
const spanBytes = (b: Binding): number => ('buffer' in b ? (b.size ?? b.buffer.size - (b.offset ?? 0)) : b.size);

/**
 * A dispatch's memory traffic (Dispatch.work.bytes) where each of `bindings` is exactly what it reads or writes
 * (prefix / bindAll windows): every binding once, those named in `twice` (read and written) twice. A launcher
 * whose bindings hold more than it touches (a whole table, a dummy) counts its bytes itself.
 */
export function boundBytes(bindings: Record<string, Binding>, twice: readonly string[] = []): number {
  let bytes = 0;
  for (const [name, b] of Object.entries(bindings)) bytes += spanBytes(b) * (twice.includes(name) ? 2 : 1);
  return bytes;
}

/** Throws a clear error if a buffer (or a window of one) is too small to hold `elems` elements of `elemBytes` bytes. */
export function checkSize(kernel: string, field: string, binding: Binding, elems: number, elemBytes = 4): void {
  const bytes = spanBytes(binding);
  if (bytes < elems * elemBytes) {
    throw new Error(`${kernel}: ${field} holds ${bytes} bytes, needs ${elems * elemBytes} (${elems} elements)`);
  }
}

/**
 * Binds the first `elems` 4-byte elements of `buffer` (not the whole buffer, which may be a bigger
 * pooled allocation), after checking that they exist and fit one storage binding.
 */
export function prefix(gpu: Gpu, kernel: string, field: string, buffer: GPUBuffer, elems: number): Binding {
  checkSize(kernel, field, buffer, elems);
  const size = Math.max(4, elems * 4);
  const limit = gpu.limits.maxStorageBufferBindingSize;
  if (size > limit) throw new Error(`${kernel}: ${field} (${size} bytes) exceeds maxStorageBufferBindingSize ${limit}`);
  return { buffer, offset: 0, size };
}

/**
 * prefix() for each shader variable name → [buffer, elements, the launcher's argument name where it
 * differs], in order: a launcher's named bindings, every size checked (errors name the argument).
 */
export function bindAll(gpu: Gpu, kernel: string, fields: Record<string, [GPUBuffer, number, string?]>): Record<string, Binding> {
  const out: Record<string, Binding> = {};
  for (const [name, [buf, elems, arg]] of Object.entries(fields)) out[name] = prefix(gpu, kernel, arg ?? name, buf, elems);
  return out;
}
