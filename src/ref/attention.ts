// Float64 twin of shaders/attention_forward.wgsl and the two-pass attention backward: causal scaled
// dot-product attention with an attention mask and grouped-query heads. Query i sits at absolute
// position Tk − Tq + i; key j is visible iff j <= that and attention_mask[b, j] = 1; query head h reads
// kv head h / (Hq / Hkv). A query with no visible key outputs 0, its att row is 0 and its lse −inf.
import type { AttentionBackwardShape, AttentionShape } from '../kernels/types.ts';

export function attention_forward(
  q: ArrayLike<number>, // (B, Tq, Hq, D)
  k: ArrayLike<number>, // (B, TkvMax, Hkv, D)
  v: ArrayLike<number>, // (B, TkvMax, Hkv, D)
  attentionMask: ArrayLike<number>, // (B, Tk)
  s: AttentionShape,
): { out: Float64Array; att: Float64Array; lse: Float64Array } {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D, scale } = s;
  const out = new Float64Array(B * Tq * Hq * D); // (B, Tq, Hq, D)
  const att = new Float64Array(B * Hq * Tq * Tk); // (B, Hq, Tq, Tk)
  const lse = new Float64Array(B * Hq * Tq); // (B, Hq, Tq)
  const group = Hq / Hkv;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / group);
      for (let i = 0; i < Tq; i++) {
        const a = Tk - Tq + i;
        const qo = ((b * Tq + i) * Hq + h) * D;
        const ao = ((b * Hq + h) * Tq + i) * Tk;
        const score = new Float64Array(Tk).fill(-Infinity);
        let mx = -Infinity;
        for (let j = 0; j <= a; j++) {
          if (!attentionMask[b * Tk + j]) continue;
          const ko = ((b * TkvMax + j) * Hkv + kvh) * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[qo + d] * k[ko + d];
          score[j] = scale * dot;
          mx = Math.max(mx, score[j]);
        }
        lse[(b * Hq + h) * Tq + i] = -Infinity;
        if (mx === -Infinity) continue; // no visible key: out, att stay 0
        let sum = 0;
        for (let j = 0; j < Tk; j++) sum += score[j] === -Infinity ? 0 : Math.exp(score[j] - mx);
        lse[(b * Hq + h) * Tq + i] = mx + Math.log(sum);
        for (let j = 0; j < Tk; j++) {
          const pj = score[j] === -Infinity ? 0 : Math.exp(score[j] - mx) / sum;
          att[ao + j] = pj;
          if (pj === 0) continue;
          const vo = ((b * TkvMax + j) * Hkv + kvh) * D;
          for (let d = 0; d < D; d++) out[qo + d] += pj * v[vo + d];
        }
      }
    }
  }
  return { out, att, lse };
}

/** Gradients for full sequences (Tq = Tk = TkvMax = T), from the saved probabilities att. */
export function attention_backward(
  dout: ArrayLike<number>, // (B, T, Hq, D)
  q: ArrayLike<number>, // (B, T, Hq, D)
  k: ArrayLike<number>, // (B, T, Hkv, D)
  v: ArrayLike<number>, // (B, T, Hkv, D)
  att: ArrayLike<number>, // (B, Hq, T, T)
  s: AttentionBackwardShape,
): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
  const { B, T, Hq, Hkv, D, scale } = s;
  const dq = new Float64Array(B * T * Hq * D); // (B, T, Hq, D)
  const dk = new Float64Array(B * T * Hkv * D); // (B, T, Hkv, D)
  const dv = new Float64Array(B * T * Hkv * D); // (B, T, Hkv, D)
  const group = Hq / Hkv;
  const datt = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / group);
      for (let i = 0; i < T; i++) {
        const qo = ((b * T + i) * Hq + h) * D;
        const ao = ((b * Hq + h) * T + i) * T;
        let rowdot = 0;
        for (let j = 0; j < T; j++) {
          const vo = ((b * T + j) * Hkv + kvh) * D;
          let x = 0;
          for (let d = 0; d < D; d++) {
            x += dout[qo + d] * v[vo + d];
            dv[vo + d] += att[ao + j] * dout[qo + d];
          }
          datt[j] = x;
          rowdot += att[ao + j] * x;
        }
        for (let j = 0; j < T; j++) {
          const g = scale * att[ao + j] * (datt[j] - rowdot); // ∂L/∂(q·k)
          const ko = ((b * T + j) * Hkv + kvh) * D;
          for (let d = 0; d < D; d++) {
            dq[qo + d] += g * k[ko + d];
            dk[ko + d] += g * q[qo + d];
          }
        }
      }
    }
  }
  return { dq, dk, dv };
}
