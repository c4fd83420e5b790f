// Benchmark suite `gemm`: the GEMM every projection uses (src/kernels/matmul.ts matmul_forward, HF
// 'out_in' weights), at the shapes a SmolLM2-135M / Qwen2.5-0.5B step multiplies and at odd sizes, in f32
// and with packed bf16 weights (a frozen LoRA base), with each GEMM kernel the adapter can run (tiled and
// direct everywhere, subgroup where the subgroup size is fixed: the `kernel` column; the default is marked
// with *; the tiled kernel also without its register prefetch), so all are compared in the
// same run. GFLOP/s = 2·M·N·K / time (the launcher's declared work), and its fraction of the FMA probe measured in
// the same run (bench/peak.ts) — the number issue 23 asks to bring to ≥ 50%. On GPUs the tiled kernel also runs
// with K forced into 1, 2 and 4 slices (src/kernels/matmul.ts `slices`) at the step shapes.
// A LoRA adapter's two products (src/model/lora_adapter.ts: u = x·Aᵀ with N = r, split over K on GPUs, and
// y += u·Bᵀ with K = r, accumulating into the base's output) run in f32 only, as the adapter's weights are; they
// move more bytes than they multiply, so every row also gives GB/s (A and B read, C written, and read too when
// accumulating, a split's partials written and read) and its fraction of the copy probe.
// GEMM_SHAPES=regex keeps the shapes whose label matches (the full shapes take minutes on lavapipe).
import { adapterClass, type Gpu } from '../src/gpu/context.ts';
import { gemmKernels, matmul_forward, type GemmKernel } from '../src/kernels/matmul.ts';
import { timeKernels } from './timing.ts';
import { rates, type BenchOptions, type Row } from './types.ts';

/** [label, M, K, N] (rows × inner × outputs), and for a LoRA side: f32 weights only; its B side accumulates into C. */
type Shape = [string, number, number, number, { lora?: 'A' | 'B' }?];

const SHAPES: Shape[] = [
  ['smol q/o proj 8×256', 2048, 576, 576],
  ['smol k/v proj 8×256', 2048, 576, 192],
  ['smol mlp up 8×256', 2048, 576, 1536],
  ['smol mlp down 8×256', 2048, 1536, 576],
  ['qwen0.5b mlp up 8×512', 4096, 896, 4864],
  ['qwen0.5b k/v proj 8×512', 4096, 896, 128],
  ['qwen0.5b lora A (x·Aᵀ, q) 8×512', 4096, 896, 16, { lora: 'A' }],
  ['qwen0.5b lora A (h·Aᵀ, down) 8×512', 4096, 4864, 16, { lora: 'A' }],
  ['qwen0.5b lora B (+= u·Bᵀ, up) 8×512', 4096, 16, 4864, { lora: 'B' }],
  ['odd', 1999, 577, 1031],
];
const QUICK: Shape[] = [
  ['smol q/o proj 1×128', 128, 576, 576],
  ['smol q/o proj 4×128', 512, 576, 576],
  ['lora A 4×128', 512, 896, 16, { lora: 'A' }],
  ['lora B 4×128', 512, 16, 896, { lora: 'B' }],
  ['odd', 127, 333, 517],
];

export async function run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> {
  if (!gpu) throw new Error('gemm: needs a GPU adapter');
  const only = process.env.GEMM_SHAPES ? new RegExp(process.env.GEMM_SHAPES) : null;
  const kernels = gemmKernels(gpu);
  const rows: Row[] = [];
  for (const [shape, M, K, N, o = {}] of (opts.quick ? QUICK : SHAPES).filter(([label]) => !only || only.test(label))) {
    const accumulate = o.lora === 'B'; // the B side adds into the base's output
    for (const dtype of o.lora ? (['f32'] as const) : (['f32', 'bf16'] as const)) {
      const wBytes = dtype === 'bf16' ? 2 : 4;
      const inp = gpu.createBuffer('gemm.inp', M * K * 4);
      const weight = gpu.createBuffer('gemm.weight', Math.ceil((N * K * wBytes) / 4) * 4);
      const out = gpu.createBuffer('gemm.out', M * N * 4);
      // The tiled kernel also without its register prefetch (a narrow tile runs the same pipeline both ways), and on
      // GPUs, for every f32 shape but the LoRA sides, with K forced into 1, 2 and 4 slices (one of them repeats the
      // launcher's choice): whether more workgroups in flight (an H100 runs 2,048 × 576 outputs as 288 workgroups on
      // 132 SMs) pay for the partials, and whether the k/v projections' split (2 slices and a colsum, its own
      // dispatch) beats one dispatch: `wall ms` (submit to done, one submit) shows what the GPU times leave out.
      const split = adapterClass(gpu.adapter) === 'gpu' && !o.lora && dtype === 'f32' ? [1, 2, 4] : [];
      type Run = { kernel: GemmKernel; prefetch: boolean; slices?: number };
      const runs = kernels.flatMap((kernel): Run[] =>
        kernel === 'tiled' ? [{ kernel, prefetch: true }, { kernel, prefetch: false }, ...split.map((slices) => ({ kernel, prefetch: true, slices }))] : [{ kernel, prefetch: true }],
      );
      for (const { kernel, prefetch, slices } of runs) {
        const label = `${kernel === kernels[0] && prefetch && !slices ? `${kernel}*` : kernel}${prefetch ? '' : ' no prefetch'}${slices ? ` split ${slices}` : ''}`;
        const t = await timeKernels(gpu, `gemm ${shape} ${dtype} ${label}`, (rec) => matmul_forward(rec, { out, inp, weight, M, K, N, weightLayout: 'out_in', weightDtype: dtype, kernel, prefetch, accumulate, slices }), { reps: opts.quick ? 3 : 5 });
        // The launcher's declared work: 2·M·N·K FLOPs; A and B read, C written (and read when accumulating), a split's partials.
        rows.push({ shape, M, K, N, weights: dtype, kernel: label, ms: t.ms, 'wall ms': t.wallMs, timer: t.timer, dispatches: t.dispatches, ...rates(t.work, t.ms, opts.peak) });
      }
      [inp, weight, out].forEach((b) => b.destroy());
    }
  }
  return rows;
}
