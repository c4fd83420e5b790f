// Launchers for fused (flash-attention style) attention: shaders/attention_forward.wgsl (online
// softmax in steps of BK keys, saves the per-row lse) and the two backward passes
// attention_backward_dq.wgsl (delta_i = dout_i·out_i, then dq per query row) and
// attention_backward_dkdv.wgsl (dk, dv per key row), which recompute the probabilities from q, k and
// lse. No (B, Hq, Tq, Tk) buffer exists: the memory is O(B·T·H·D) plus (B, Hq, T) for lse and delta,
// where the materialised version needed B·Hq·T·T floats per layer (23.5 GB for 64 rows of 2,560
// tokens at Qwen2.5-0.5B's 14 heads; bench suite `attention`).
// One thread per row, BQ neighbouring rows of one head per workgroup (they read the same k / v rows
// together) and no barriers: a first version with one workgroup per row and tree reductions per key
// tile ran several times slower on the software adapter (barriers cost a coroutine switch there).
// Causal + attention mask + GQA (query head h reads kv head h / (Hq / Hkv)); deterministic (no
// atomics, fixed summation order). A query row with no visible key gets out = 0, lse = -inf, dq = 0.
import { type Binding, type Recorder, Gpu } from '../gpu/context.ts';
import type { AttentionBackwardShape, AttentionShape } from './types.ts';
import { sharedScratch } from './scratch.ts';
import { prefix } from './windows.ts';

const BQ_MAX = 64; // rows (queries, or keys in dkdv) per workgroup = threads, one row each
const BK = 16; // keys per online-softmax step of the forward

/**
 * Checks the heads, and picks the rows per workgroup: the largest power of two up to BQ_MAX whose
 * per-thread workgroup rows (`rowFloats` f32 each) fit maxComputeWorkgroupStorageSize; a head_dim too
 * wide for even one row is a clear error, not a pipeline failure.
 */
function rowsPerGroup(gpu: Gpu, kernel: string, Hq: number, Hkv: number, D: number, rowFloats: number): number {
  if (!(Hkv >= 1 && Hq % Hkv === 0)) throw new Error(`${kernel}: Hq (${Hq}) must be a multiple of Hkv (${Hkv})`);
  if (!(D >= 1 && Number.isInteger(D))) throw new Error(`${kernel}: head_dim D must be a positive integer, got ${D}`);
  const limit = gpu.limits.maxComputeWorkgroupStorageSize;
  if (rowFloats * 4 > limit) throw new Error(`${kernel}: head_dim ${D} needs ${rowFloats * 4} bytes of workgroup storage, the device allows ${limit}`);
  let bq = BQ_MAX;
  while (bq * rowFloats * 4 > limit) bq /= 2;
  return bq;
}

export function attention_forward(
  rec: Recorder,
  args: AttentionShape & {
    out: GPUBuffer; // (B, Tq, Hq, D)
    q: GPUBuffer; // (B, Tq, Hq, D)
    k: GPUBuffer; // (B, TkvMax, Hkv, D), rows [0, Tk) valid
    v: GPUBuffer; // (B, TkvMax, Hkv, D)
    attentionMask: GPUBuffer; // (B, Tk) i32, 1 = key visible
    lse: GPUBuffer; // (B, Hq, Tq) log-sum-exp of the scaled scores, saved for the backward
  },
): void {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D } = args;
  const kernel = 'attention_forward';
  const gpu = rec.gpu;
  const BQ = rowsPerGroup(gpu, kernel, Hq, Hkv, D, D + BK); // accumulator and step scores
  if (!(Tq >= 1 && Tq <= Tk && Tk <= TkvMax)) throw new Error(`${kernel}: needs 1 <= Tq (${Tq}) <= Tk (${Tk}) <= TkvMax (${TkvMax})`);
  const blocks = Math.ceil(Tq / BQ);
  const groups = B * Hq * blocks;
  rec.dispatch({
    kernel,
    shader: 'attention_forward',
    constants: { BQ, BK, DH: D },
    bindings: {
      q: prefix(gpu, kernel, 'q', args.q, B * Tq * Hq * D),
      k: prefix(gpu, kernel, 'k', args.k, B * TkvMax * Hkv * D),
      v: prefix(gpu, kernel, 'v', args.v, B * TkvMax * Hkv * D),
      attention_mask: prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * Tk),
      out: prefix(gpu, kernel, 'out', args.out, B * Tq * Hq * D),
      lse: prefix(gpu, kernel, 'lse', args.lse, B * Hq * Tq),
    },
    params: [
      ['Tq', 'u32', Tq], ['Tk', 'u32', Tk], ['TkvMax', 'u32', TkvMax], ['Hq', 'u32', Hq],
      ['Hkv', 'u32', Hkv], ['D', 'u32', D], ['blocks', 'u32', blocks], ['scale', 'f32', args.scale],
      ['neg_inf', 'f32', -Infinity], ['groups', 'u32', groups],
    ],
    workgroups: Gpu.grid(groups),
  });
}

export function attention_backward(
  rec: Recorder,
  args: AttentionBackwardShape & {
    dq: GPUBuffer; // (B, T, Hq, D)
    dk: GPUBuffer; // (B, T, Hkv, D), summed over the query heads sharing each kv head
    dv: GPUBuffer; // (B, T, Hkv, D)
    dout: GPUBuffer; // (B, T, Hq, D)
    q: GPUBuffer; // (B, T, Hq, D)
    k: GPUBuffer; // (B, T, Hkv, D)
    v: GPUBuffer; // (B, T, Hkv, D)
    out: GPUBuffer; // (B, T, Hq, D) from attention_forward
    lse: GPUBuffer; // (B, Hq, T) from attention_forward
    attentionMask: GPUBuffer; // (B, T) i32
  },
): void {
  const { B, T, Hq, Hkv, D } = args;
  const kernel = 'attention_backward';
  const gpu = rec.gpu;
  const BQ = rowsPerGroup(gpu, kernel, Hq, Hkv, D, 2 * D); // dkdv: the dk and dv accumulators (dq: 1)
  const [dq, dout, q, out] = (['dq', 'dout', 'q', 'out'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hq * D));
  const [dk, dv, k, v] = (['dk', 'dv', 'k', 'v'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hkv * D));
  const attention_mask = prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * T);
  const lse = prefix(gpu, kernel, 'lse', args.lse, B * Hq * T);
  const delta = prefix(gpu, kernel, 'delta', sharedScratch(gpu, 'attention_backward:delta', B * Hq * T * 4), B * Hq * T); // (B, Hq, T)
  // One pass per side, each over row blocks of one (b, head): queries of (b, h), keys of (b, kvh).
  const pass = (side: 'dq' | 'dkdv', heads: number, bindings: Record<string, Binding>) => {
    const blocks = Math.ceil(T / BQ);
    const groups = B * heads * blocks;
    rec.dispatch({
      kernel: `${kernel}:${side}`,
      shader: `attention_backward_${side}`,
      constants: { BQ, DH: D },
      bindings,
      params: [
        ['T', 'u32', T], ['Hq', 'u32', Hq], ['Hkv', 'u32', Hkv], ['D', 'u32', D],
        ['blocks', 'u32', blocks], ['scale', 'f32', args.scale], ['neg_inf', 'f32', -Infinity], ['groups', 'u32', groups],
      ],
      workgroups: Gpu.grid(groups),
    });
  };
  pass('dq', Hq, { q, k, v, attention_mask, out, dout, lse, delta, dq });
  pass('dkdv', Hkv, { q, k, v, attention_mask, dout, lse, delta, dk, dv });
}
