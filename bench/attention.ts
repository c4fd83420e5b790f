// Benchmark suite `attention`: the fused (flash-style) attention forward and backward at Qwen2.5-0.5B's
// heads (Hq 14, Hkv 2, D 64) on left-padded rows, with the bytes the materialised llm.c-style version
// needed for its (B, Hq, T, T) probabilities (plus, in training, the same-sized dP/g scratch) next to
// the fused version's (B, Hq, T) lse and delta (and the tile set's dkdv partials where it splits heads), once per kernel set the adapter runs (its default starred).
// A row without timing gives the memory of the case: scoring 64 rows of 2,560 tokens. Kernel time from timestamps when the adapter has them;
// each pass's rate is its declared FLOPs (the causal pairs: src/kernels/attention.ts causalPairs) as a fraction of the FMA probe.
import type { Gpu } from '../src/gpu/context.ts';
import { attentionBackwardScratchBytes, attentionKernels, attention_backward, attention_forward, type AttentionKernel } from '../src/kernels/attention.ts';
import { timeKernels } from './timing.ts';
import { rates, type BenchOptions, type Peak, type Row } from './types.ts';

const HEADS = { Hq: 14, Hkv: 2, D: 64 }; // Qwen2.5-0.5B
const MB = 2 ** 20;

function memoryColumns(B: number, T: number): Row {
  const att = B * HEADS.Hq * T * T * 4;
  const lseDelta = 2 * B * HEADS.Hq * T * 4;
  // The tile set's backward also keeps dk / dv partials where it splits dkdv's query heads (beside delta).
  const tilePartials = attentionBackwardScratchBytes({ B, T, ...HEADS }) - B * HEADS.Hq * T * 4;
  return { att_materialised_MiB: att / MB, att_and_g_MiB: (2 * att) / MB, fused_lse_delta_MiB: lseDelta / MB, tile_dkdv_partials_MiB: tilePartials / MB };
}

function randomBuffer(gpu: Gpu, label: string, n: number, seed: number): GPUBuffer {
  const a = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    a[i] = (s >>> 8) / (1 << 24) - 0.5;
  }
  return gpu.upload(label, a);
}

async function measure(gpu: Gpu, B: number, T: number, kernel: AttentionKernel, first: boolean, peak: Peak | null | undefined): Promise<Row> {
  const { Hq, Hkv, D } = HEADS;
  const shape = { B, T, Hq, Hkv, D, scale: 1 / Math.sqrt(D) };
  const mask = new Int32Array(B * T).fill(1);
  for (let b = 1; b < B; b++) mask.fill(0, b * T, b * T + Math.floor(T / 4)); // left padding
  const [q, dout] = [randomBuffer(gpu, 'q', B * T * Hq * D, 1), randomBuffer(gpu, 'dout', B * T * Hq * D, 2)];
  const [k, v] = [randomBuffer(gpu, 'k', B * T * Hkv * D, 3), randomBuffer(gpu, 'v', B * T * Hkv * D, 4)];
  const attentionMask = gpu.upload('mask', mask);
  const out = gpu.createBuffer('out', B * T * Hq * D * 4);
  const lse = gpu.createBuffer('lse', B * Hq * T * 4);
  const [dq, dk, dv] = [gpu.createBuffer('dq', B * T * Hq * D * 4), gpu.createBuffer('dk', B * T * Hkv * D * 4), gpu.createBuffer('dv', B * T * Hkv * D * 4)];
  const fwd = await timeKernels(gpu, `attention forward ${kernel}`, (rec) => attention_forward(rec, { out, q, k, v, attentionMask, lse, ...shape, Tq: T, Tk: T, TkvMax: T, kernel }), { reps: 3 });
  const bwd = await timeKernels(gpu, `attention backward ${kernel}`, (rec) => attention_backward(rec, { dq, dk, dv, dout, q, k, v, out, lse, attentionMask, ...shape, kernel }), { reps: 3 });
  for (const b of [q, dout, k, v, attentionMask, out, lse, dq, dk, dv]) b.destroy();
  const rate = (t: typeof fwd) => rates(t.work, t.ms, peak);
  const [f, b] = [rate(fwd), rate(bwd)];
  return {
    shape: `${B}x${T}`, kernel: first ? `${kernel}*` : kernel, forward_ms: fwd.ms, backward_ms: bwd.ms, timer: fwd.timer,
    forward_of_fma_peak: f.of_fma_peak, backward_of_fma_peak: b.of_fma_peak, 'forward GFLOP/s': f['GFLOP/s'], 'backward GFLOP/s': b['GFLOP/s'], ...memoryColumns(B, T),
  };
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const sizes: Array<[number, number]> = opts.quick ? [[2, 128]] : [[2, 256], [1, 1024]];
  const rows: Row[] = [];
  const kernels = attentionKernels(gpu);
  for (const [B, T] of sizes) for (const kernel of kernels) rows.push(await measure(gpu, B, T, kernel, kernel === kernels[0], opts.peak));
  rows.push({ shape: '64x2560 (memory only)', kernel: null, forward_ms: null, backward_ms: null, timer: null, forward_of_fma_peak: null, backward_of_fma_peak: null, 'forward GFLOP/s': null, 'backward GFLOP/s': null, ...memoryColumns(64, 2560) });
  return rows;
}
