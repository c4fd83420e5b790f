// Benchmark suite `profile`: where the GPU time of one real GRPO step goes, kernel by kernel. It runs exactly the
// steps the `step` suite builds (bench/step.ts: the SmolLM2-135M-shaped model at 8 × 256, V 49152, and the
// Qwen2.5-0.5B-shaped LoRA r16 update over a bf16 base at 8 × 512; --quick: their small shapes), warm-up run first,
// with a KernelProfiler (src/gpu/profiler.ts) attached to the Gpu for the measured run only. After each stage
// the profiler is settled and taken, so each dispatch's GPU time (begin→end of its own timed pass) lands in the
// stage that submitted it. Rows {model, stage, kernel, shader, calls, gpu_ms, pct_of_stage}: per stage a '(all)'
// row (the stage's GPU ms beside its wall ms), its top 12 kernels and an 'other' row for the rest; then 'total'
// with every kernel of the step. Each row also gives the rate of the work its kernels declare (FLOPs, bytes:
// src/gpu/stats.ts Work) over their GPU ms, as fractions of the FMA and copy probes (bench/types.ts rates). A
// pass per dispatch serialises what one pass would overlap a little, so the
// GPU ms are the kernels' own times, not a prediction of the unprofiled step's wall time.
import { KernelProfiler, type Gpu, type KernelTime } from '../src/gpu/context.ts';
import { loraStepCase, smolStepCase, warmStep, type StepCase } from './step.ts';
import { rates, type BenchOptions, type Peak, type Row } from './types.ts';

/** Kernels listed per stage before the rest are summed into 'other'. */
const TOP = 12;

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const build of [smolStepCase, loraStepCase]) {
    const c = build(gpu, opts.quick);
    try {
      rows.push(...(await profileStep(gpu, c, opts.peak)));
    } finally {
      c.destroy();
    }
  }
  return rows;
}

/** The measured run of `c`'s step, profiled per stage. */
async function profileStep(gpu: Gpu, c: StepCase, peak: Peak | null | undefined): Promise<Row[]> {
  const profiler = new KernelProfiler(gpu); // throws, in one line, on an adapter without timestamp-query
  const stages: { stage: string; wallMs: number; times: KernelTime[] }[] = [];
  try {
    await warmStep(gpu, c, {
      start: () => {
        gpu.profiler = profiler;
      },
      stage: async (r) => {
        await profiler.settle();
        if (profiler.dropped) throw new Error(`profile ${c.name}: the GPU times of ${profiler.dropped} dispatches of ${r.id} were lost`);
        const times = profiler.take();
        if (!r.skipped && times.length) stages.push({ stage: r.id, wallMs: r.ms, times });
      },
    });
  } finally {
    gpu.profiler = null;
    await profiler.settle();
    profiler.destroy();
  }
  const rows: Row[] = [];
  for (const s of stages) rows.push(...stageRows(c.name, s.stage, s.times, TOP, s.wallMs, peak));
  rows.push(...stageRows(c.name, 'total', merge(stages.flatMap((s) => s.times)), Infinity, stages.reduce((n, s) => n + s.wallMs, 0), peak));
  return rows;
}

/** The '(all)' row, the `top` kernels by GPU ms and an 'other' row for the rest. */
function stageRows(model: string, stage: string, times: KernelTime[], top: number, wallMs: number, peak: Peak | null | undefined): Row[] {
  const total = sum(times, 'gpuMs');
  const pct = (ms: number) => (total > 0 ? (100 * ms) / total : 0);
  const row = (kernel: string, shader: string, ts: KernelTime[]): Row => {
    const ms = sum(ts, 'gpuMs');
    return { model, stage, kernel, shader, calls: sum(ts, 'calls'), gpu_ms: ms, pct_of_stage: pct(ms), wall_ms: null, ...rates({ flops: sum(ts, 'flops'), bytesMoved: sum(ts, 'bytesMoved') }, ms, peak) };
  };
  const shown = times.slice(0, top);
  const rest = times.slice(top);
  const rows = [{ ...row('(all)', '', times), wall_ms: wallMs }, ...shown.map((t) => row(t.kernel, t.shaders.join('+'), [t]))];
  if (rest.length) rows.push(row(`other (${rest.length} kernels)`, '', rest));
  return rows;
}

const sum = (ts: KernelTime[], k: 'calls' | 'gpuMs' | 'flops' | 'bytesMoved') => ts.reduce((s, t) => s + t[k], 0);

/** Per-kernel totals over several stages, most GPU time first. */
function merge(times: KernelTime[]): KernelTime[] {
  const by = new Map<string, KernelTime>();
  for (const t of times) {
    const m = by.get(t.kernel);
    if (!m) by.set(t.kernel, { ...t, shaders: [...t.shaders] });
    else {
      m.calls += t.calls;
      m.gpuMs += t.gpuMs;
      m.flops += t.flops;
      m.bytesMoved += t.bytesMoved;
      for (const s of t.shaders) if (!m.shaders.includes(s)) m.shaders.push(s);
    }
  }
  return [...by.values()].sort((a, b) => b.gpuMs - a.gpuMs || a.kernel.localeCompare(b.kernel));
}
