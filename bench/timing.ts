// Timing for benchmark suites: GPU timestamp queries around every dispatch when the adapter has them
// (the sum of the dispatches' begin→end, so launch gaps are not counted), else wall time from submit to
// onSubmittedWorkDone. Warmup runs first (pipeline creation, first touch), then the median of `reps`.
import type { Gpu, Recorder } from '../src/gpu/context.ts';

export interface Timing {
  ms: number; // median
  timer: 'gpu-timestamp' | 'wall';
  wallMs: number; // median wall time, submit → onSubmittedWorkDone (includes launch overhead)
  dispatches: number;
}

const MAX_DISPATCHES = 64;

export async function timeKernels(gpu: Gpu, label: string, record: (rec: Recorder) => void, o: { warmup?: number; reps?: number } = {}): Promise<Timing> {
  const warmup = o.warmup ?? 1;
  const reps = o.reps ?? 5;
  for (let i = 0; i < warmup; i++) {
    const rec = gpu.recorder(label);
    record(rec);
    await rec.finish();
  }
  const querySet = gpu.hasTimestamps ? gpu.device.createQuerySet({ type: 'timestamp', count: 2 * MAX_DISPATCHES }) : null;
  const resolved = querySet ? gpu.createBuffer(`${label}:timestamps`, 16 * MAX_DISPATCHES, GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC) : null;
  const times: number[] = [];
  const walls: number[] = [];
  let dispatches = 0;
  for (let i = 0; i < reps; i++) {
    const rec = gpu.recorder(label);
    rec.timestamps = querySet;
    const t0 = performance.now();
    record(rec);
    await rec.finish();
    const wall = performance.now() - t0;
    walls.push(wall);
    dispatches = rec.kernels.length;
    if (dispatches > MAX_DISPATCHES) throw new Error(`${label}: ${dispatches} dispatches, the timer holds ${MAX_DISPATCHES}`);
    if (querySet && resolved) {
      const enc = gpu.device.createCommandEncoder({ label: `${label}:resolve` });
      enc.resolveQuerySet(querySet, 0, 2 * dispatches, resolved, 0);
      gpu.device.queue.submit([enc.finish()]);
      const ts = new BigUint64Array(await gpu.read(resolved, 16 * dispatches));
      let ns = 0n;
      for (let k = 0; k < dispatches; k++) ns += ts[2 * k + 1] - ts[2 * k];
      times.push(Number(ns) / 1e6);
    } else {
      times.push(wall);
    }
  }
  querySet?.destroy();
  resolved?.destroy();
  const median = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return { ms: median(times), timer: querySet ? 'gpu-timestamp' : 'wall', wallMs: median(walls), dispatches };
}
