// Float64 twin of shaders/loss_reduce_forward.wgsl: every masked aggregation of one per-token loss (TRL's
// grpo / bnpo / dr_grpo / dapo and verl's agg_loss modes) plus the clip counts, and the weights
// ∂loss/∂per_token_loss each aggregation puts on the tokens (what grpo_loss_backward multiplies by).
// M = completion_mask, n_b = Σ_t M[b, t], N = Σ M, L_max = max_completion_length, T = padded width.
// verl's seq-mean-token-sum-norm divides by its loss_scale_factor, which defaults to the padded response
// width loss_mask.shape[-1] = T (volcengine/verl verl/trainer/ppo/core_algos.py agg_loss), not by L_max.

import { AGGREGATIONS, CLIP_HIGH, CLIP_LOW, DELTA_BINDS, type ClipCounts, type LossType } from '../kernels/types.ts';

export interface ReduceParams {
  max_completion_length: number;
  /** verl seq-mean-token-sum-norm's divisor; default the padded width T. */
  loss_scale_factor?: number;
  /** dapo's normalizer; TRL passes the generation batch's token count. Default N = Σ M. */
  num_items_in_batch?: number;
}

export interface LossReduce {
  losses: Record<LossType, number>;
  clip_counts: ClipCounts;
  sequences: number; // #(n_b > 0)
}

function rowCounts(mask: ArrayLike<number>, B: number, T: number): { nb: Float64Array; N: number; nz: number } {
  const nb = new Float64Array(B);
  let N = 0;
  let nz = 0;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) nb[b] += mask[b * T + t] ? 1 : 0;
    N += nb[b];
    nz += nb[b] > 0 ? 1 : 0;
  }
  return { nb, N, nz };
}

/** The per-row weight c_b of every aggregation: loss = Σ_b c_b Σ_t L·M. */
function rowWeight(type: LossType, nb: number, B: number, T: number, N: number, nz: number, p: ReduceParams): number {
  switch (type) {
    case 'grpo':
      return 1 / (B * Math.max(1, nb));
    case 'bnpo':
    case 'token-mean':
      return 1 / Math.max(1, N);
    case 'dr_grpo':
      return 1 / (B * p.max_completion_length);
    case 'dapo':
      return 1 / (p.num_items_in_batch ?? Math.max(1, N));
    case 'seq-mean-token-sum':
      return 1 / Math.max(1, nz);
    case 'seq-mean-token-mean':
      return 1 / ((nb + 1e-8) * Math.max(1, nz));
    case 'seq-mean-token-sum-norm':
      return 1 / (p.loss_scale_factor ?? T);
  }
}

export function loss_reduce_forward(
  loss: ArrayLike<number>, // (B, T)
  mask: ArrayLike<number>, // (B, T)
  clip: ArrayLike<number>, // (B, T) CLIP_* bits
  B: number,
  T: number,
  p: ReduceParams,
): LossReduce {
  const { nb, N, nz } = rowCounts(mask, B, T);
  const losses = Object.fromEntries(AGGREGATIONS.map((a) => [a, 0])) as Record<LossType, number>;
  const clip_counts: ClipCounts = { low: 0, high: 0, region: 0, delta_binding: 0, tokens: N };
  for (let b = 0; b < B; b++) {
    let S = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      if (!mask[i]) continue;
      S += loss[i];
      clip_counts.low += clip[i] & CLIP_LOW ? 1 : 0;
      clip_counts.high += clip[i] & CLIP_HIGH ? 1 : 0;
      clip_counts.region += clip[i] & (CLIP_LOW | CLIP_HIGH) ? 1 : 0;
      clip_counts.delta_binding += clip[i] & DELTA_BINDS ? 1 : 0;
    }
    for (const a of AGGREGATIONS) losses[a] += rowWeight(a, nb[b], B, T, N, nz, p) * S;
  }
  return { losses, clip_counts, sequences: nz };
}

/** ∂loss/∂per_token_loss for one aggregation: M[b, t]·c_b. */
export function loss_weights(mask: ArrayLike<number>, B: number, T: number, type: LossType, p: ReduceParams): Float64Array {
  const { nb, N, nz } = rowCounts(mask, B, T);
  const w = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    const c = rowWeight(type, nb[b], B, T, N, nz, p);
    for (let t = 0; t < T; t++) w[b * T + t] = mask[b * T + t] ? c : 0;
  }
  return w;
}
