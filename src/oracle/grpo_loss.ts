// Float64 twin of shaders/grpo_loss_{forward,backward}.wgsl: TRL GRPOTrainer._compute_loss per token.
// ratio r = exp(logp − old) (token level) or r_b = exp(Σ_t M·(logp − old) / max(1, n_b)) broadcast over
// the row (sequence level, GSPO); r̃ = min(r, δ) when δ is set;
// per_token_loss = −min(r̃·A, clip(r, 1 − ε_low, 1 + ε_high)·A) + β·KL (the KL term only when β ≠ 0).
// The backward follows autograd exactly: torch.minimum splits the gradient in halves on a tie (which is
// every in-range token), clamp passes gradient where min ≤ x ≤ max.
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS, type ImportanceSamplingLevel, type KlEstimator, type PolicyLossParams } from '../kernels/types.ts';

export interface GrpoLossForward {
  ratio: Float64Array; // (B, T) r before the δ cap
  loss: Float64Array; // (B, T) per_token_loss
  clip: Uint32Array; // (B, T) CLIP_LOW | CLIP_HIGH | DELTA_BINDS
}

/** Per-row log importance weight: token level is per token, so this is only used for sequence level. */
function seqLogRatio(logp: ArrayLike<number>, old: ArrayLike<number>, mask: ArrayLike<number>, b: number, T: number): { lw: number; nb: number } {
  let s = 0;
  let nb = 0;
  for (let t = 0; t < T; t++) {
    const i = b * T + t;
    if (mask[i]) {
      s += logp[i] - old[i];
      nb++;
    }
  }
  return { lw: s / Math.max(1, nb), nb };
}

function ratioOf(logp: ArrayLike<number>, old: ArrayLike<number>, mask: ArrayLike<number>, B: number, T: number, level: ImportanceSamplingLevel): Float64Array {
  const r = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    const rb = level === 'sequence' ? Math.exp(seqLogRatio(logp, old, mask, b, T).lw) : 0;
    for (let t = 0; t < T; t++) r[b * T + t] = level === 'sequence' ? rb : Math.exp(logp[b * T + t] - old[b * T + t]);
  }
  return r;
}

export function grpo_loss_forward(
  logp: ArrayLike<number>, // (B, T)
  old: ArrayLike<number>, // (B, T)
  kl: ArrayLike<number>, // (B, T)
  advantages: ArrayLike<number>, // (B)
  mask: ArrayLike<number>, // (B, T)
  B: number,
  T: number,
  p: PolicyLossParams,
): GrpoLossForward {
  const ratio = ratioOf(logp, old, mask, B, T, p.importance_sampling_level);
  const loss = new Float64Array(B * T);
  const clip = new Uint32Array(B * T);
  for (let i = 0; i < B * T; i++) {
    const A = advantages[Math.floor(i / T)];
    const r = ratio[i];
    const rt = p.delta === null ? r : Math.min(r, p.delta);
    const c = Math.min(Math.max(r, 1 - p.epsilon_low), 1 + p.epsilon_high);
    loss[i] = -Math.min(rt * A, c * A) + (p.beta !== 0 ? p.beta * kl[i] : 0);
    clip[i] = (rt < 1 - p.epsilon_low && A < 0 ? CLIP_LOW : 0) | (rt > 1 + p.epsilon_high && A > 0 ? CLIP_HIGH : 0) | (p.delta !== null && r > p.delta && rt * A < c * A ? DELTA_BINDS : 0);
  }
  return { ratio, loss, clip };
}

/** ∂(−min(r̃·A, clip(r)·A))/∂r as autograd computes it. */
function dpg_dr(r: number, A: number, p: PolicyLossParams): number {
  const rt = p.delta === null ? r : Math.min(r, p.delta);
  const c = Math.min(Math.max(r, 1 - p.epsilon_low), 1 + p.epsilon_high);
  const l1 = rt * A;
  const l2 = c * A;
  const w1 = l1 < l2 ? 1 : l1 === l2 ? 0.5 : 0;
  const d1 = p.delta === null || r <= p.delta ? A : 0;
  const d2 = r >= 1 - p.epsilon_low && r <= 1 + p.epsilon_high ? A : 0;
  return -(w1 * d1 + (1 - w1) * d2);
}

/** ∂KL/∂logp for d = logp − ref. */
export function dkl_dlogp(d: number, estimator: KlEstimator): number {
  return estimator === 'k1' ? 1 : estimator === 'k2' ? d : -Math.expm1(-d);
}

/**
 * dlogp[b, t] = ∂loss/∂logp given weights[b, t] = ∂loss/∂per_token_loss[b, t] (oracle/loss_reduce.ts loss_weights).
 * Sequence level couples the row: r_b depends on every masked-in logp of row b.
 */
export function grpo_loss_backward(
  logp: ArrayLike<number>, // (B, T)
  ref: ArrayLike<number>, // (B, T)
  advantages: ArrayLike<number>, // (B)
  mask: ArrayLike<number>, // (B, T)
  ratio: ArrayLike<number>, // (B, T) from the forward
  weights: ArrayLike<number>, // (B, T)
  B: number,
  T: number,
  p: PolicyLossParams & { kl_estimator: KlEstimator },
): Float64Array {
  const dlogp = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    const A = advantages[b];
    let nb = 0;
    let W = 0; // Σ_t weights: how much the row's shared pg term counts
    for (let t = 0; t < T; t++) {
      nb += mask[b * T + t] ? 1 : 0;
      W += weights[b * T + t];
    }
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      let g = 0;
      if (p.importance_sampling_level === 'sequence') {
        g = mask[i] ? (W * dpg_dr(ratio[i], A, p) * ratio[i]) / Math.max(1, nb) : 0;
      } else {
        g = weights[i] * dpg_dr(ratio[i], A, p) * ratio[i];
      }
      if (p.beta !== 0) g += weights[i] * p.beta * dkl_dlogp(logp[i] - ref[i], p.kl_estimator);
      dlogp[i] = g;
    }
  }
  return dlogp;
}
