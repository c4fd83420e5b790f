// Binding windows over row-major [rows, rowElems] f32/i32 arrays, for kernels whose operands can be
// bigger than maxStorageBufferBindingSize (the Qwen2 wte/lm_head is 544 MB, its logits 1.2 GB; lavapipe
// binds 128 MiB). Unlike context.ts's splitRows, the caller chooses the row blocks (matmul aligns them
// to its tiles and has to cut several operands at the same rows), so the two primitives are: how many
// rows one window may hold, and the window of a given row range. `limit` lowers the binding size for
// tests that must exercise the split path without gigabyte buffers.
import type { Binding, Gpu } from '../gpu/context.ts';

export interface Window {
  binding: Binding;
  base: number; // element index of the window's first row inside the binding
}

export function bindingLimit(gpu: Gpu, limit?: number): number {
  const max = gpu.limits.maxStorageBufferBindingSize;
  return limit === undefined ? max : Math.min(max, limit);
}

/** Rows of `rowElems` 4-byte elements one window may hold (all of them if the whole array fits). */
export function rowsPerWindow(gpu: Gpu, limit: number, rows: number, rowElems: number): number {
  const rowBytes = rowElems * 4;
  if (rows * rowBytes <= limit) return rows;
  // A window that starts mid-array carries up to one alignment unit of slack before its first row.
  const n = Math.floor((limit - gpu.limits.minStorageBufferOffsetAlignment) / rowBytes);
  if (n < 1) throw new Error(`one row of ${rowBytes} bytes does not fit a storage binding of ${limit} bytes`);
  return n;
}

/** The aligned window holding rows [rowStart, rowStart + rowCount) of a [*, rowElems] 4-byte array. */
export function rowWindow(gpu: Gpu, buffer: GPUBuffer, rowStart: number, rowCount: number, rowElems: number): Window {
  const align = gpu.limits.minStorageBufferOffsetAlignment;
  const start = rowStart * rowElems * 4;
  const offset = Math.floor(start / align) * align;
  const size = start + rowCount * rowElems * 4 - offset;
  return { binding: { buffer, offset, size }, base: (start - offset) / 4 };
}

/** Throws a clear error if `buffer` is too small to hold `elems` 4-byte elements. */
export function checkSize(kernel: string, field: string, buffer: GPUBuffer, elems: number): void {
  if (buffer.size < elems * 4) {
    throw new Error(`${kernel}: ${field} holds ${buffer.size} bytes, needs ${elems * 4} (${elems} elements)`);
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
