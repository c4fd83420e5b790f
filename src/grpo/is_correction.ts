// Importance-sampling corrections of the sampler–trainer mismatch, float64 on the host and pure: the factor
// a trainer multiplies its loss by, formed from the trainer's log-probs (old) and the sampler's (sampling /
// rollout), and the ratio its bounds are tested on — so the Doctor can say which tokens or sequences a
// correction masks or truncates, and with which ratio, from the same code the objectives use.
// - TRL's vLLM correction (huggingface/trl trl/trainer/grpo_trainer.py `_generate_and_score_completions` at
//   f2cd577). TRL's objective forms this ratio on the GPU (shaders/trl_loss_forward.wgsl); this is the host
//   statement of the same rule, for reports.
// - OpenRLHF PolicyLoss (OpenRLHF/OpenRLHF openrlhf/models/loss.py at 3c3be62): tis / icepop / seq-mask-tis;
//   its objective (trainers/openrlhf.ts) multiplies the PPO loss by `factor`.
// verl's rollout correction (truncated IS weights, rejection sampling) is settings/verl_rollout.ts.
import type { VllmIsMode } from '../kernels/types.ts';
import type { OpenrlhfConfig } from './settings/openrlhf.ts';

export interface IsCorrection {
  /** The ratio the bounds are tested on: per token, or the row's sequence ratio broadcast over it. (B, T) */
  raw: Float64Array;
  /** What multiplies the per-token loss (0 where a token or sequence is masked). (B, T) */
  factor: Float64Array;
  level: 'token' | 'sequence';
  /** mask: a ratio outside [min, max] removes the token / sequence; truncate: it is clamped into [min, max]. */
  action: 'mask' | 'truncate';
  min: number | null;
  max: number | null;
}

const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);

/**
 * TRL: r = exp(old − sampling) per token (× mask in the exponent), or exp(Σ_t (old − sampling)·mask) per
 * sequence (a sum, not a mean); *_truncate clamps r into [min, max], *_mask sets it to 0 outside. Nulls are
 * TRL's None (no bound on that side).
 */
export function trlVllmIs(old: ArrayLike<number>, sampling: ArrayLike<number>, mask: ArrayLike<number>, B: number, T: number, mode: Exclude<VllmIsMode, 'off'>, min: number | null, max: number | null): IsCorrection {
  const raw = new Float64Array(B * T); // (B, T)
  const factor = new Float64Array(B * T); // (B, T)
  const seq = mode.startsWith('sequence');
  const truncate = mode.endsWith('truncate');
  const lo = min ?? -Infinity;
  const hi = max ?? Infinity;
  for (let b = 0; b < B; b++) {
    let rowSum = 0;
    for (let t = 0; t < T; t++) rowSum += (old[b * T + t] - sampling[b * T + t]) * mask[b * T + t];
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const r = Math.exp(seq ? rowSum : (old[i] - sampling[i]) * mask[i]);
      raw[i] = r;
      factor[i] = truncate ? clamp(r, lo, hi) : r < lo || r > hi ? 0 : r;
    }
  }
  return { raw, factor, level: seq ? 'sequence' : 'token', action: truncate ? 'truncate' : 'mask', min, max };
}

/**
 * OpenRLHF PolicyLoss's vLLM IS factor, from e = exp(old − rollout) (detached): tis clamp(e, lo, hi); icepop
 * e·[lo ≤ e ≤ hi]; seq-mask-tis e·[lo ≤ exp(masked mean of log e) ≤ hi] (masked_mean without an epsilon: an
 * empty row gives NaN, which no range holds). `raw` is e, or the sequence ratio for seq-mask-tis.
 */
export function openrlhfIs(old: ArrayLike<number>, rollout: ArrayLike<number>, mask: ArrayLike<number>, B: number, T: number, type: OpenrlhfConfig['algo.advantage.is_correction_type'], [lo, hi]: readonly [number, number]): IsCorrection {
  const raw = new Float64Array(B * T); // (B, T)
  const factor = new Float64Array(B * T); // (B, T)
  for (let b = 0; b < B; b++) {
    let s = 0;
    let n = 0;
    for (let t = 0; t < T; t++) [s, n] = [s + (old[b * T + t] - rollout[b * T + t]) * mask[b * T + t], n + mask[b * T + t]];
    const seqRatio = Math.exp(s / n);
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const e = Math.exp(old[i] - rollout[i]);
      if (type === 'tis') [raw[i], factor[i]] = [e, clamp(e, lo, hi)];
      else if (type === 'icepop') [raw[i], factor[i]] = [e, e >= lo && e <= hi ? e : 0];
      else [raw[i], factor[i]] = [seqRatio, seqRatio >= lo && seqRatio <= hi ? e : 0];
    }
  }
  return { raw, factor, level: type === 'seq-mask-tis' ? 'sequence' : 'token', action: type === 'tis' ? 'truncate' : 'mask', min: lo, max: hi };
}
