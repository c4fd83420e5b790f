// Launchers for fused (flash-attention style) attention: shaders/attention_forward.wgsl (online
// softmax over key tiles, saves the per-row lse) and the two backward passes
// attention_backward_dq.wgsl (delta_i = dout_i·out_i, then dq per query row) and
// attention_backward_dkdv.wgsl (dk, dv per key row), which recompute the probabilities from q, k and
// lse. No (B, Hq, Tq, Tk) buffer exists: the memory is O(B·T·H·D) plus (B, Hq, T) for lse and delta,
// where the materialised version needed 6.7 GB for 64 rows of 2,560 tokens at 14 heads.
// Causal + attention mask + GQA (query head h reads kv head h / (Hq / Hkv)); deterministic (no
// atomics, fixed summation order). A query row with no visible key gets out = 0, lse = -inf, dq = 0.
import { packParams, type Recorder, Gpu } from '../gpu/context.ts';
import type { AttentionBackwardShape, AttentionShape } from './types.ts';
import { sharedScratch } from './scratch.ts';
import { prefix } from './windows.ts';

const WG = 64; // keys (forward, dq) or queries (dkdv) per tile = threads per workgroup
const ROWS_FORWARD = 2; // workgroup rows of D floats: q and the output accumulator
const ROWS_BACKWARD = 4; // dkdv: k, v and the dk / dv accumulators (dq uses 3)

/** Checks the heads and that the shader's workgroup arrays (rows × D floats + 2 × WG) fit the device. */
function checkHeads(gpu: Gpu, kernel: string, Hq: number, Hkv: number, D: number, rows: number): void {
  if (!(Hkv >= 1 && Hq % Hkv === 0)) throw new Error(`${kernel}: Hq (${Hq}) must be a multiple of Hkv (${Hkv})`);
  if (!(D >= 1 && Number.isInteger(D))) throw new Error(`${kernel}: head_dim D must be a positive integer, got ${D}`);
  const bytes = (rows * D + 2 * WG) * 4;
  const limit = gpu.limits.maxComputeWorkgroupStorageSize;
  if (bytes > limit) throw new Error(`${kernel}: head_dim ${D} needs ${bytes} bytes of workgroup storage, the device allows ${limit}`);
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
  checkHeads(gpu, kernel, Hq, Hkv, D, ROWS_FORWARD);
  if (!(Tq >= 1 && Tq <= Tk && Tk <= TkvMax)) throw new Error(`${kernel}: needs 1 <= Tq (${Tq}) <= Tk (${Tk}) <= TkvMax (${TkvMax})`);
  const rows = B * Hq * Tq;
  rec.dispatch({
    kernel,
    shader: 'attention_forward',
    constants: { WG, DH: D },
    bindings: [
      prefix(gpu, kernel, 'q', args.q, B * Tq * Hq * D),
      prefix(gpu, kernel, 'k', args.k, B * TkvMax * Hkv * D),
      prefix(gpu, kernel, 'v', args.v, B * TkvMax * Hkv * D),
      prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * Tk),
      prefix(gpu, kernel, 'out', args.out, B * Tq * Hq * D),
      prefix(gpu, kernel, 'lse', args.lse, rows),
    ],
    params: packParams([
      ['u32', Tq], ['u32', Tk], ['u32', TkvMax], ['u32', Hq],
      ['u32', Hkv], ['u32', D], ['u32', rows], ['f32', args.scale],
      ['f32', -Infinity],
    ]),
    workgroups: Gpu.grid(rows),
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
  checkHeads(gpu, kernel, Hq, Hkv, D, ROWS_BACKWARD);
  const [dq, dout, q, out] = (['dq', 'dout', 'q', 'out'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hq * D));
  const [dk, dv, k, v] = (['dk', 'dv', 'k', 'v'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hkv * D));
  const mask = prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * T);
  const lse = prefix(gpu, kernel, 'lse', args.lse, B * Hq * T);
  const delta = prefix(gpu, kernel, 'delta', sharedScratch(gpu, 'attention_backward:delta', B * Hq * T * 4), B * Hq * T); // (B, Hq, T)
  const params = (rows: number) => packParams([['u32', T], ['u32', Hq], ['u32', Hkv], ['u32', D], ['u32', rows], ['f32', args.scale], ['f32', -Infinity]]);
  const qRows = B * Hq * T;
  rec.dispatch({
    kernel: `${kernel}:dq`,
    shader: 'attention_backward_dq',
    constants: { WG, DH: D },
    bindings: [q, k, v, mask, out, dout, lse, delta, dq],
    params: params(qRows),
    workgroups: Gpu.grid(qRows),
  });
  const kRows = B * T * Hkv;
  rec.dispatch({
    kernel: `${kernel}:dkdv`,
    shader: 'attention_backward_dkdv',
    constants: { WG, DH: D },
    bindings: [q, k, v, mask, dout, lse, delta, dk, dv],
    params: params(kRows),
    workgroups: Gpu.grid(kRows),
  });
}
