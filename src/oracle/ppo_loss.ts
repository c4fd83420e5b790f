// Float64 twin of shaders/ppo_loss_forward.wgsl: verl's and OpenRLHF's per-token policy terms, KL estimator,
// each token's weighted share of the loss and ∂loss/∂logp, ∂loss/∂entropy, same calling convention
// (inputs packed 8 per token: old, ref, A, isw, sel, M, w_pg, w_aux). Formulas and sources: the shader header.
import type { PpoLossParams } from '../kernels/types.ts';

export interface PpoLossOut {
  loss: Float64Array; // (B, T) policy term L
  kl: Float64Array; // (B, T)
  contrib: Float64Array; // (B, T) share of the final loss; Σ = loss
  ratio: Float64Array; // (B, T) the ratio the term used
  dlogp: Float64Array; // (B, T)
  dentropy: Float64Array; // (B, T)
}

const clamp = (x: number, lo: number, hi: number): number => Math.min(Math.max(x, lo), hi);

function surrogate(p: PpoLossParams, r: number, a: number, dual: number): [number, number] {
  const lo = 1 - p.eps_low;
  const hi = 1 + p.eps_high;
  const l1 = -a * r;
  const l2 = -a * clamp(r, lo, hi);
  let v = Math.max(l1, l2);
  let d = l1 >= l2 ? -a : r >= lo && r <= hi ? -a : 0;
  if (dual > 0 && a < 0 && -a * dual < v) {
    v = -a * dual;
    d = 0;
  }
  return [v, d];
}

function klTerm(p: PpoLossParams, lp: number, rf: number): [number, number] {
  const d = lp - rf;
  let v = 0;
  let g = 0;
  if (p.kl === 'k1') [v, g] = [d, 1];
  else if (p.kl === 'abs') [v, g] = [Math.abs(d), Math.sign(d)];
  else if (p.kl === 'k2') [v, g] = [0.5 * d * d, d];
  else if (p.kl === 'k3') {
    const k = clamp(-d, -p.kl_inner, p.kl_inner);
    v = Math.expm1(k) - k;
    g = -d >= -p.kl_inner && -d <= p.kl_inner ? -Math.expm1(k) : 0;
  }
  if (v < -p.kl_outer || v > p.kl_outer) g = 0;
  return [clamp(v, -p.kl_outer, p.kl_outer), g];
}

function geoClip(p: PpoLossParams, x: number, a: number): [number, number] {
  const s = Math.sign(a);
  const xc = clamp(x, -p.eps_low, p.eps_high);
  const takesX = s * x < s * xc || (x >= -p.eps_low && x <= p.eps_high);
  return [s * Math.min(s * x, s * xc), takesX ? s * s : 0];
}

export function ppo_loss_forward(
  logp: ArrayLike<number>, // (B, T)
  entropy: ArrayLike<number>, // (B, T)
  inp: ArrayLike<number>, // (B, T, 8)
  B: number,
  T: number,
  p: PpoLossParams,
): PpoLossOut {
  const o: PpoLossOut = {
    loss: new Float64Array(B * T),
    kl: new Float64Array(B * T),
    contrib: new Float64Array(B * T),
    ratio: new Float64Array(B * T),
    dlogp: new Float64Array(B * T),
    dentropy: new Float64Array(B * T),
  };
  for (let b = 0; b < B; b++) {
    let n = 0;
    let sx = 0;
    let sa = 0;
    let sl = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = inp[8 * i + 5];
      const x = logp[i] - inp[8 * i];
      const a = inp[8 * i + 2];
      n += m;
      sx += m * (p.mode === 'geo_mean' ? geoClip(p, x, a)[0] : x);
      sa += m * a;
      sl += m * Math.log(inp[8 * i + 3] + 1e-10);
    }
    const seqX = sx / Math.max(1, n);
    const geoRatio = Math.exp(sx / (n + 1e-8));
    const geoAdv = sa / (n + 1e-8);
    const geoIs = p.geo_seq_is ? Math.exp(sl / (n + 1e-8)) : 1;
    const seqR = Math.exp(seqX);
    let gSeq = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const lp = logp[i];
      const x = lp - inp[8 * i];
      const a = inp[8 * i + 2];
      const isw = inp[8 * i + 3];
      const sel = inp[8 * i + 4];
      const m = inp[8 * i + 5];
      const wPg = inp[8 * i + 6];
      const wAux = inp[8 * i + 7];
      const xc = p.ratio_clamp > 0 ? clamp(x, -p.ratio_clamp, p.ratio_clamp) : x;
      const dxc = p.ratio_clamp > 0 && (x < -p.ratio_clamp || x > p.ratio_clamp) ? 0 : 1;
      const r = Math.exp(xc);
      let L = 0;
      let dL = 0;
      let shown = r;
      if (p.mode === 'clip') {
        const [v, d] = surrogate(p, r, a, p.dual_clip);
        L = v * sel * isw;
        dL = d * r * dxc * sel * isw;
      } else if (p.mode === 'gspo_token') {
        const rs = Math.exp(Math.min(seqX, 10));
        const [v, d] = surrogate(p, rs, a, 0);
        L = v * isw;
        dL = d * (seqX <= 10 ? rs : 0) * isw;
        shown = rs;
      } else if (p.mode === 'sapo') {
        const tau = a > 0 ? p.tau_pos : p.tau_neg;
        const sg = 1 / (1 + Math.exp(-tau * (r - 1)));
        L = -a * sg * (4 / tau) * isw;
        dL = -a * 4 * sg * (1 - sg) * r * dxc * isw;
      } else if (p.mode === 'cispo') {
        const rc = clamp(r, 1 - p.eps_low, 1 + p.eps_high);
        L = -rc * a * lp * isw;
        dL = -rc * a * isw;
      } else if (p.mode === 'pg') {
        L = -a * lp * isw;
        dL = -a * isw;
      } else if (p.mode === 'kl_cov') {
        L = (-a * r + sel * p.kl_cov_coef * Math.abs(x)) * isw;
        dL = (-a * r + sel * p.kl_cov_coef * Math.sign(x)) * isw;
      } else if (p.mode === 'geo_mean') {
        L = -geoAdv * geoRatio * geoIs;
        dL = (-geoAdv * geoIs * geoRatio * m * geoClip(p, x, a)[1]) / (n + 1e-8);
        shown = geoRatio;
      } else {
        const rt = seqR * m;
        const [v, d] = surrogate(p, rt, a, p.dual_clip);
        L = v;
        gSeq += wPg * m * d;
        shown = rt;
      }
      const wL = p.mode === 'geo_mean' ? (t === 0 ? wPg : 0) : wPg;
      const [k, dk] = klTerm(p, lp, inp[8 * i + 1]);
      o.loss[i] = L;
      o.kl[i] = k;
      o.contrib[i] = wL * L + p.kl_coef * wAux * k - p.ent_coef * wAux * entropy[i];
      o.ratio[i] = shown;
      o.dlogp[i] = wPg * dL + p.kl_coef * wAux * dk;
      o.dentropy[i] = -p.ent_coef * wAux;
    }
    if (p.mode === 'gspo_seq') {
      for (let t = 0; t < T; t++) {
        const i = b * T + t;
        o.dlogp[i] += (inp[8 * i + 5] / Math.max(1, n)) * seqR * gSeq;
      }
    }
  }
  return o;
}
