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
}

export const zeroStats = (): GpuStats => ({ dispatches: 0, computePasses: 0, submits: 0, readbacks: 0, bindGroupHits: 0, bindGroupMisses: 0, bytesRead: 0, encodeMs: 0, waitMs: 0 });

/** a − b, field by field (a stage's share of the running totals). */
export function statsSince(a: GpuStats, b: GpuStats): GpuStats {
  const d = zeroStats();
  for (const k of Object.keys(d) as (keyof GpuStats)[]) d[k] = a[k] - b[k];
  return d;
}
