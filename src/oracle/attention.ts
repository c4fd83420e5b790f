// Float64 twin of the fused attention kernels (shaders/attention_forward.wgsl,
// attention_backward_dq.wgsl + attention_backward_dkdv.wgsl), same calling convention: the forward
// returns out and the per-row lse, the backward recomputes the probabilities p_ij = exp(s_ij − lse_i)
// and uses delta_i = dout_i·out_i. Causal scaled dot-product attention with an attention mask and
// grouped-query heads: query i sits at absolute position Tk − Tq + i; key j is visible iff j <= that
// and attention_mask[b, j] = 1; query head h reads kv head h / (Hq / Hkv). A query with no visible key
// outputs 0, its lse is −inf and it passes no gradient. Plain two-pass softmax, not the kernels'
// online order: the twin is the math, the kernels' rounding is what the tests bound.
import type { AttentionBackwardShape, AttentionShape } from '../kernels/types.ts';

/** s_ij = scale·q_i·k_j for every visible key j of query row (b, h, i), −inf elsewhere; (Tk). */
function scores(q: ArrayLike<number>, k: ArrayLike<number>, mask: ArrayLike<number>, s: AttentionShape, b: number, h: number, i: number): Float64Array {
  const { Tq, Tk, TkvMax, Hq, Hkv, D, scale } = s;
  const kvh = Math.floor(h / (Hq / Hkv));
  const qo = ((b * Tq + i) * Hq + h) * D;
  const out = new Float64Array(Tk).fill(-Infinity);
  for (let j = 0; j <= Tk - Tq + i; j++) {
    if (!mask[b * Tk + j]) continue;
    const ko = ((b * TkvMax + j) * Hkv + kvh) * D;
    let dot = 0;
    for (let d = 0; d < D; d++) dot += q[qo + d] * k[ko + d];
    out[j] = scale * dot;
  }
  return out;
}

export function attention_forward(
  q: ArrayLike<number>, // (B, Tq, Hq, D)
  k: ArrayLike<number>, // (B, TkvMax, Hkv, D)
  v: ArrayLike<number>, // (B, TkvMax, Hkv, D)
  attentionMask: ArrayLike<number>, // (B, Tk)
  s: AttentionShape,
): { out: Float64Array; lse: Float64Array } {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D } = s;
  const out = new Float64Array(B * Tq * Hq * D); // (B, Tq, Hq, D)
  const lse = new Float64Array(B * Hq * Tq).fill(-Infinity); // (B, Hq, Tq)
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / (Hq / Hkv));
      for (let i = 0; i < Tq; i++) {
        const sc = scores(q, k, attentionMask, s, b, h, i);
        const mx = Math.max(...sc);
        if (mx === -Infinity) continue; // no visible key: out stays 0, lse −inf
        let sum = 0;
        for (let j = 0; j < Tk; j++) sum += Math.exp(sc[j] - mx);
        const l = mx + Math.log(sum);
        lse[(b * Hq + h) * Tq + i] = l;
        const qo = ((b * Tq + i) * Hq + h) * D;
        for (let j = 0; j < Tk; j++) {
          const pj = Math.exp(sc[j] - l);
          if (pj === 0) continue;
          const vo = ((b * TkvMax + j) * Hkv + kvh) * D;
          for (let d = 0; d < D; d++) out[qo + d] += pj * v[vo + d];
        }
      }
    }
  }
  return { out, lse };
}

/** Gradients for full sequences (Tq = Tk = TkvMax = T), from the forward's out and lse. */
export function attention_backward(
  dout: ArrayLike<number>, // (B, T, Hq, D)
  q: ArrayLike<number>, // (B, T, Hq, D)
  k: ArrayLike<number>, // (B, T, Hkv, D)
  v: ArrayLike<number>, // (B, T, Hkv, D)
  out: ArrayLike<number>, // (B, T, Hq, D)
  lse: ArrayLike<number>, // (B, Hq, T)
  attentionMask: ArrayLike<number>, // (B, T)
  s: AttentionBackwardShape,
): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
  const { B, T, Hq, Hkv, D, scale } = s;
  const fs: AttentionShape = { B, Tq: T, Tk: T, TkvMax: T, Hq, Hkv, D, scale };
  const dq = new Float64Array(B * T * Hq * D); // (B, T, Hq, D)
  const dk = new Float64Array(B * T * Hkv * D); // (B, T, Hkv, D)
  const dv = new Float64Array(B * T * Hkv * D); // (B, T, Hkv, D)
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / (Hq / Hkv));
      for (let i = 0; i < T; i++) {
        const l = lse[(b * Hq + h) * T + i];
        if (l === -Infinity) continue;
        const qo = ((b * T + i) * Hq + h) * D;
        let delta = 0;
        for (let d = 0; d < D; d++) delta += dout[qo + d] * out[qo + d];
        const sc = scores(q, k, attentionMask, fs, b, h, i);
        for (let j = 0; j <= i; j++) {
          if (sc[j] === -Infinity) continue;
          const p = Math.exp(sc[j] - l);
          const vo = ((b * T + j) * Hkv + kvh) * D;
          let dp = 0;
          for (let d = 0; d < D; d++) dp += dout[qo + d] * v[vo + d];
          const g = scale * p * (dp - delta); // ∂L/∂(q·k)
          for (let d = 0; d < D; d++) {
            dq[qo + d] += g * k[vo + d];
            dk[vo + d] += g * q[qo + d];
            dv[vo + d] += p * dout[qo + d];
          }
        }
      }
    }
  }
  return { dq, dk, dv };
}
