// Float64 twin of shaders/trl_loss_{forward,backward}.wgsl: TRL GRPOTrainer._compute_loss from the per-token
// log-probs and entropies on (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577: `_compute_loss`,
// `get_off_policy_mask`, `get_gamma_weights`, the vLLM importance-sampling block of
// `_generate_and_score_completions`). Written the way TRL writes it — whole tensors, then the loss-type
// aggregation — so it checks the kernel's per-row formulation rather than repeating it. The backward is the
// analytic gradient of `loss` with respect to the per-token log-probs and entropies (autograd's choices:
// torch.minimum halves the gradient on ties, clamp passes it for min ≤ x ≤ max, detached factors pass none).
import { TRL_GLOBAL_COUNT, type TrlLossParams } from '../kernels/types.ts';

/** The per-token inputs, each (B, T) row-major; advantages (B). */
export interface TrlLossInputs {
  logp: ArrayLike<number>; // per_token_logps
  entropy: ArrayLike<number>; // entropies
  old: ArrayLike<number> | null; // old_per_token_logps; null: per_token_logps.detach()
  ref: ArrayLike<number> | null; // ref_per_token_logps (β ≠ 0)
  sampling: ArrayLike<number> | null; // sampling_per_token_logps (vLLM)
  advantages: ArrayLike<number>; // (B)
  mask: ArrayLike<number>; // completion_mask × tool_mask
}

export interface TrlLossForward {
  per_token_loss: Float64Array; // (B, T), (B, 1) terms broadcast
  per_token_kl: Float64Array | null; // (B, T) β ≠ 0
  importance_sampling_ratio: Float64Array | null; // (B, T) vLLM correction on
  entropy_mask: Float64Array | null; // (B, T) entropy_threshold set
  off_policy_mask: Float64Array | null; // (B, T) off_policy_mask_threshold set
  ratio: Float64Array; // (B, T) coef_1 before the δ cap (sequence level: broadcast)
  phi: Float64Array | null; // (B) vespo gamma weights
  loss: number;
}

const LOG_1E8 = Math.log(1e-8);
const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

function rowCount(mask: ArrayLike<number>, b: number, T: number): number {
  let n = 0;
  for (let t = 0; t < T; t++) n += mask[b * T + t];
  return n;
}

/** The vLLM importance-sampling ratio from old and sampling log-probs (no gradient: both are inputs). */
function vllmRatio(x: TrlLossInputs, p: TrlLossParams): Float64Array | null {
  if (p.vllm_is_mode === 'off') return null;
  const { B, T } = p;
  const old = x.old ?? x.logp;
  const s = x.sampling!;
  const out = new Float64Array(B * T);
  const lo = p.vllm_is_min ?? -Infinity;
  const hi = p.vllm_is_max ?? Infinity;
  const seq = p.vllm_is_mode.startsWith('sequence');
  for (let b = 0; b < B; b++) {
    let rowSum = 0;
    for (let t = 0; t < T; t++) rowSum += (old[b * T + t] - s[b * T + t]) * x.mask[b * T + t];
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const r = Math.exp(seq ? rowSum : (old[i] - s[i]) * x.mask[i]);
      out[i] = p.vllm_is_mode.endsWith('truncate') ? clamp(r, lo, hi) : r < lo || r > hi ? 0 : r;
    }
  }
  return out;
}

/**
 * TRL's aggregation weight ∂loss/∂per_token_loss[b, t] and the entropy term's per-token weight. Each of the
 * p.ranks processes aggregates its own B/ranks consecutive rows (its micro-batch: B_r, n, N, Σ M' are that
 * rank's) and DDP averages the ranks' gradients, so every weight is that rank's ÷ ranks.
 */
function weights(x: TrlLossInputs, p: TrlLossParams, emask: Float64Array | null): { w: Float64Array; we: Float64Array } {
  const { B, T, ranks } = p;
  const Br = B / ranks;
  const gas = p.gradient_accumulation_steps;
  const globalDiv = Math.max(1, p.num_items_in_batch) / p.num_processes;
  const global = TRL_GLOBAL_COUNT.includes(p.loss_type);
  const w = new Float64Array(B * T);
  const we = new Float64Array(B * T);
  for (let k = 0; k < ranks; k++) {
    const rows = Array.from({ length: Br }, (_, j) => k * Br + j);
    const n = rows.map((b) => rowCount(x.mask, b, T));
    const N = n.reduce((a, c) => a + c, 0);
    let effN = 0;
    for (const b of rows) for (let t = 0; t < T; t++) effN += x.mask[b * T + t] * (emask ? emask[b * T + t] : 1);
    rows.forEach((b, j) => {
      for (let t = 0; t < T; t++) {
        const i = b * T + t;
        const M = x.mask[i];
        switch (p.loss_type) {
          case 'grpo':
          case 'sapo':
            w[i] = M / Math.max(1, n[j]) / Br / gas;
            break;
          case 'bnpo':
            w[i] = M / Math.max(1, N) / gas;
            break;
          case 'dr_grpo':
            w[i] = M / (Br * p.max_completion_length) / gas;
            break;
          case 'dapo':
          case 'cispo':
          case 'vespo':
            w[i] = M / globalDiv;
            break;
          case 'luspo':
            w[i] = n[j] / (Br * T) / gas;
            break;
        }
        const Me = M * (emask ? emask[i] : 1);
        we[i] = global ? Me / globalDiv : Me / Math.max(1, effN) / gas;
        w[i] /= ranks;
        we[i] /= ranks;
      }
    });
  }
  return { w, we };
}

/**
 * `detached` pins the factors TRL detaches (cispo's clamped ratio, vespo's φ) at given values, so a
 * finite-difference check differentiates what autograd does; absent, they are computed from `x`.
 */
export function trl_loss_forward(x: TrlLossInputs, p: TrlLossParams, detached?: { ratio: Float64Array; phi: Float64Array | null }): TrlLossForward {
  const { B, T } = p;
  const N = B * T;
  const old = x.old ?? x.logp;
  const isr = vllmRatio(x, p);
  const seqLevel = p.importance_sampling_level === 'sequence';
  const ratio = new Float64Array(N);
  for (let b = 0; b < B; b++) {
    const nb = Math.max(1, rowCount(x.mask, b, T));
    let s = 0;
    for (let t = 0; t < T; t++) s += (x.logp[b * T + t] - old[b * T + t]) * x.mask[b * T + t];
    for (let t = 0; t < T; t++) ratio[b * T + t] = Math.exp(seqLevel ? s / nb : x.logp[b * T + t] - old[b * T + t]);
  }
  let opsm: Float64Array | null = null;
  if (p.off_policy_mask_threshold !== null) {
    const s = x.sampling ?? old;
    opsm = new Float64Array(N);
    for (let b = 0; b < B; b++) {
      let kl = 0;
      for (let t = 0; t < T; t++) kl += (s[b * T + t] - x.logp[b * T + t]) * x.mask[b * T + t];
      const keep = x.advantages[b] >= 0 || kl / Math.max(1, rowCount(x.mask, b, T)) <= p.off_policy_mask_threshold;
      for (let t = 0; t < T; t++) opsm[b * T + t] = keep ? 1 : 0;
    }
  }
  let emask: Float64Array | null = null;
  if (p.entropy_threshold !== null) {
    const thr = p.entropy_threshold;
    emask = Float64Array.from({ length: N }, (_, i) => (x.mask[i] && x.entropy[i] * x.mask[i] >= thr ? 1 : 0));
  }
  let phi: Float64Array | null = null;
  if (p.loss_type === 'vespo') {
    phi = new Float64Array(B);
    for (let b = 0; b < B; b++) {
      let s = 0;
      for (let t = 0; t < T; t++) s += clamp(x.logp[b * T + t] - old[b * T + t], -20, 20) * x.mask[b * T + t];
      if (isr) {
        // TRL sums log(ratio) over every position of the (B, T) ratio, or the one value of a (B, 1) one.
        const seq = p.vllm_is_mode.startsWith('sequence');
        for (let t = 0; t < (seq ? 1 : T); t++) s += clamp(Math.log(isr[b * T + t]), LOG_1E8, 20);
      }
      const lw = clamp(s, LOG_1E8, 20);
      const pos = x.advantages[b] >= 0;
      const k = pos ? p.vespo_k_pos : p.vespo_k_neg;
      const lam = Math.max(pos ? p.vespo_lambda_pos : p.vespo_lambda_neg, 1e-4);
      const f = Math.exp(lam + k * lw - lam * Math.exp(lw));
      phi[b] = Number.isFinite(f) ? f : 0;
    }
    if (detached?.phi) phi = detached.phi;
  }
  const kl = p.beta !== 0 ? new Float64Array(N) : null;
  const loss = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    const b = Math.floor(i / T);
    const A = x.advantages[b];
    const r = ratio[i];
    let L: number;
    switch (p.loss_type) {
      case 'cispo':
        L = -Math.min(detached ? detached.ratio[i] : r, p.epsilon_high) * A * x.logp[i];
        break;
      case 'sapo': {
        const tau = A > 0 ? p.sapo_temperature_pos : p.sapo_temperature_neg;
        L = (-sigmoid(tau * (r - 1)) * 4) / tau * A;
        break;
      }
      case 'vespo':
        L = -phi![b] * A * x.logp[i];
        break;
      default: {
        const c = clamp(r, 1 - p.epsilon_low, 1 + p.epsilon_high);
        const r1 = p.delta === null ? r : Math.min(r, p.delta);
        L = -Math.min(r1 * A, c * A);
      }
    }
    if (opsm) L *= opsm[i];
    if (emask) L *= emask[i];
    if (isr && p.loss_type !== 'vespo') L *= isr[i];
    if (kl) {
      const d = x.ref![i] - x.logp[i];
      kl[i] = (Math.exp(d) - d - 1) * (p.use_bias_correction_kl ? r : 1);
      L += p.beta * kl[i];
    }
    loss[i] = L;
  }
  const { w, we } = weights(x, p, emask);
  let total = 0;
  for (let i = 0; i < N; i++) total += w[i] * loss[i] - p.entropy_coef * we[i] * x.entropy[i];
  return { per_token_loss: loss, per_token_kl: kl, importance_sampling_ratio: isr, entropy_mask: emask, off_policy_mask: opsm, ratio, phi, loss: total };
}

/** ∂loss/∂per_token_logps and ∂loss/∂entropies (null when no entropy bonus). */
export function trl_loss_backward(x: TrlLossInputs, f: TrlLossForward, p: TrlLossParams): { dlogp: Float64Array; dentropy: Float64Array | null } {
  const { B, T } = p;
  const { w, we } = weights(x, p, f.entropy_mask);
  const dlogp = new Float64Array(B * T);
  const seqLevel = p.importance_sampling_level === 'sequence';
  for (let b = 0; b < B; b++) {
    const A = x.advantages[b];
    let dr = 0; // Σ_t w_t·∂L_t/∂r_b (sequence level)
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const r = f.ratio[i];
      const g = (f.off_policy_mask ? f.off_policy_mask[i] : 1) * (f.entropy_mask ? f.entropy_mask[i] : 1) * (f.importance_sampling_ratio && p.loss_type !== 'vespo' ? f.importance_sampling_ratio[i] : 1);
      let dPdr = 0;
      let direct = 0;
      switch (p.loss_type) {
        case 'cispo':
          direct = -Math.min(r, p.epsilon_high) * A;
          break;
        case 'vespo':
          direct = -f.phi![b] * A;
          break;
        case 'sapo': {
          const tau = A > 0 ? p.sapo_temperature_pos : p.sapo_temperature_neg;
          const s = sigmoid(tau * (r - 1));
          dPdr = -4 * A * s * (1 - s);
          break;
        }
        default: {
          const lo = 1 - p.epsilon_low;
          const hi = 1 + p.epsilon_high;
          const r1 = p.delta === null ? r : Math.min(r, p.delta);
          const u = r1 * A;
          const c = clamp(r, lo, hi) * A;
          const du = p.delta === null || r <= p.delta ? -A : 0;
          const dc = r >= lo && r <= hi ? -A : 0;
          dPdr = u < c ? du : c < u ? dc : (du + dc) / 2;
        }
      }
      let dRatio = dPdr * g;
      let dDirect = direct * g;
      if (p.beta !== 0) {
        const d = x.ref![i] - x.logp[i];
        dDirect += p.beta * (1 - Math.exp(d)) * (p.use_bias_correction_kl ? r : 1);
        if (p.use_bias_correction_kl) dRatio += p.beta * (Math.exp(d) - d - 1);
      }
      dlogp[i] = w[i] * dDirect;
      if (seqLevel) dr += w[i] * dRatio;
      else dlogp[i] += w[i] * dRatio * r;
    }
    if (seqLevel) {
      const nb = Math.max(1, rowCount(x.mask, b, T));
      const rb = f.ratio[b * T];
      for (let t = 0; t < T; t++) dlogp[b * T + t] += (dr * rb * x.mask[b * T + t]) / nb;
    }
  }
  const dentropy = p.entropy_coef !== 0 ? Float64Array.from(we, (v) => -p.entropy_coef * v) : null;
  return { dlogp, dentropy };
}
