// Benchmark suite `gemm`: the tiled GEMM every projection uses (src/kernels/matmul.ts matmul_forward, HF
// 'out_in' weights), at the shapes a SmolLM2-135M / Qwen2.5-0.5B step multiplies and at odd sizes, in f32
// and with packed bf16 weights (a frozen LoRA base). GFLOP/s = 2·M·N·K / time, and its fraction of the FMA
// probe measured in the same run (bench/peak.ts) — the number issue 23 asks to bring to ≥ 50%.
import type { Gpu } from '../src/gpu/context.ts';
import { matmul_forward } from '../src/kernels/matmul.ts';
import { timeKernels } from './timing.ts';
import { ofPeak, type BenchOptions, type Row } from './types.ts';

/** [label, M, K, N]: rows × inner × outputs. */
const SHAPES: Array<[string, number, number, number]> = [
  ['smol q/o proj 8×256', 2048, 576, 576],
  ['smol mlp up 8×256', 2048, 576, 1536],
  ['smol mlp down 8×256', 2048, 1536, 576],
  ['qwen0.5b mlp up 8×512', 4096, 896, 4864],
  ['odd', 1999, 577, 1031],
];
const QUICK: Array<[string, number, number, number]> = [
  ['smol q/o proj 1×128', 128, 576, 576],
  ['odd', 127, 333, 517],
];

export async function run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> {
  if (!gpu) throw new Error('gemm: needs a GPU adapter');
  const rows: Row[] = [];
  for (const [shape, M, K, N] of opts.quick ? QUICK : SHAPES) {
    for (const dtype of ['f32', 'bf16'] as const) {
      const inp = gpu.createBuffer('gemm.inp', M * K * 4);
      const weight = gpu.createBuffer('gemm.weight', Math.ceil((N * K * (dtype === 'bf16' ? 2 : 4)) / 4) * 4);
      const out = gpu.createBuffer('gemm.out', M * N * 4);
      const t = await timeKernels(gpu, `gemm ${shape} ${dtype}`, (rec) => matmul_forward(rec, { out, inp, weight, M, K, N, weightLayout: 'out_in', weightDtype: dtype }), { reps: opts.quick ? 3 : 5 });
      const gflops = (2 * M * N * K) / (t.ms / 1e3) / 1e9;
      rows.push({ shape, M, K, N, weights: dtype, ms: t.ms, timer: t.timer, dispatches: t.dispatches, 'GFLOP/s': gflops, of_fma_peak: ofPeak(gflops, opts.peak?.fma_gflops) });
      [inp, weight, out].forEach((b) => b.destroy());
    }
  }
  return rows;
}
