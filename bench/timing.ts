// Timing for benchmark suites: GPU timestamp queries around every dispatch when the adapter has them
// (the sum of the dispatches' begin→end, so launch gaps are not counted), else wall time from submit to
// onSubmittedWorkDone. Warmup runs first (pipeline creation, first touch), then the median of `reps`.
// The timestamps are the GPU layer's KernelProfiler (src/gpu/profiler.ts), given to the timed recorder
// alone (rec.profiler), so a profiler attached to the Gpu (the `profile` suite) neither sees nor disturbs it.
import { KernelProfiler, statsSince, zeroStats, type Gpu, type GpuStats, type Recorder } from '../src/gpu/context.ts';

export interface Timing {
  ms: number; // median
  timer: 'gpu-timestamp' | 'wall';
  wallMs: number; // median wall time, submit → onSubmittedWorkDone (includes launch overhead)
  dispatches: number;
  /** One call's GPU work (its dispatches' declared FLOPs and bytes among it), for rates(). */
  work: GpuStats;
}

export async function timeKernels(gpu: Gpu, label: string, record: (rec: Recorder) => void, o: { warmup?: number; reps?: number } = {}): Promise<Timing> {
  const warmup = o.warmup ?? 1;
  const reps = o.reps ?? 5;
  for (let i = 0; i < warmup; i++) {
    const rec = gpu.recorder(label);
    record(rec);
    await rec.finish();
  }
  const profiler = gpu.hasTimestamps ? new KernelProfiler(gpu) : null;
  const times: number[] = [];
  const walls: number[] = [];
  let dispatches = 0;
  let work = zeroStats();
  try {
    for (let i = 0; i < reps; i++) {
      const rec = gpu.recorder(label);
      rec.profiler = profiler;
      const before = { ...gpu.stats };
      const t0 = performance.now();
      record(rec);
      work = statsSince(gpu.stats, before);
      await rec.finish();
      const wall = performance.now() - t0;
      walls.push(wall);
      dispatches = rec.kernels.length;
      if (profiler) {
        await profiler.settle();
        if (profiler.dropped) throw new Error(`${label}: the GPU times of ${profiler.dropped} dispatches were lost`);
        times.push(profiler.take().reduce((s, k) => s + k.gpuMs, 0));
      } else {
        times.push(wall);
      }
    }
  } finally {
    await profiler?.settle();
    profiler?.destroy();
  }
  const median = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return { ms: median(times), timer: profiler ? 'gpu-timestamp' : 'wall', wallMs: median(walls), dispatches, work };
}
