// Work counters of the GPU layer, kept by `Gpu.stats` as running totals: the step pipeline reports a
// stage's share (statsSince) and `npm run bench` prints them, so a change that adds passes, misses the
// bind-group cache or reads back more than the page shows is visible as a number.

export interface GpuStats {
  dispatches: number;
  computePasses: number;
  submits: number; // recorder submits (work sent to the queue; a readback's copy is counted in readbacks)
  readbacks: number; // GPU → CPU round trips (one per readAll, however many buffers it reads)
  bindGroupHits: number;
  bindGroupMisses: number;
  bytesRead: number; // GPU → CPU
  encodeMs: number; // CPU time spent recording, encoding and submitting
  waitMs: number; // wall time spent awaiting the GPU (a recorder's submit checks and finish(), a read-back's map): the rest of a stage's wall time is the CPU's
  flops: number; // arithmetic the recorded dispatches declared (Dispatch.work): 2 per multiply-add
  bytesMoved: number; // GPU memory traffic they declared: each operand read once, each output written once
}

export const zeroStats = (): GpuStats => ({ dispatches: 0, computePasses: 0, submits: 0, readbacks: 0, bindGroupHits: 0, bindGroupMisses: 0, bytesRead: 0, encodeMs: 0, waitMs: 0, flops: 0, bytesMoved: 0 });

/** a − b, field by field (a stage's share of the running totals). */
export function statsSince(a: GpuStats, b: GpuStats): GpuStats {
  const d = zeroStats();
  for (const k of Object.keys(d) as (keyof GpuStats)[]) d[k] = a[k] - b[k];
  return d;
}

/**
 * A dispatch's work as its launcher counts it from the shapes (what the CPU knows: rows a mask lets a kernel skip
 * count too): `flops` the multiply-adds of the kernels judged against the FMA probe (GEMMs, attention: 2 per
 * multiply-add, the probe's unit; a split product's partials are summed by a pass that declares only bytes),
 * `bytes` the memory traffic as the launcher plans it (each operand element read once, each output element
 * written once, a read-modify-write counted both ways, a split's partials written and read). Benchmarks divide
 * them by time: a GEMM as a fraction of the FMA probe, a memory-bound kernel as a fraction of the copy probe.
 */
export interface Work {
  flops?: number;
  bytes?: number;
}
