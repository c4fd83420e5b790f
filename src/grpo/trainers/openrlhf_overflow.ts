// Where OpenRLHF's own float32 arithmetic makes its loss non-finite: PolicyLoss.forward (OpenRLHF/OpenRLHF
// openrlhf/models/loss.py at 3c3be62) takes the vLLM IS weight as torch.exp(old_log_probs − rollout_log_probs)
// on float32 tensors, which is +inf once the log-ratio passes ln(FLT_MAX) ≈ 88.72. icepop then multiplies
// inf by its in-range mask (False: inf is above any finite upper threshold): inf · 0 = NaN. seq-mask-tis
// multiplies its sequence mask by inf: NaN when the sequence is out of range, +inf · the token's loss when it
// is in. tis clamps inf to the upper threshold (finite). aggregate_loss sums loss · action_mask, and NaN · 0 is
// NaN, so a padded position counts as much as a loss token. The studio's float64 host arithmetic would keep
// these finite; the OpenRLHF objective and the Doctor use this to report the trainer's outcome instead.
import type { OpenrlhfConfig } from '../settings/openrlhf.ts';

export interface IsOverflowToken {
  b: number;
  t: number;
  /** old − rollout, rounded to float32 as OpenRLHF's rollout_log_ratio is. */
  logRatio: number;
  /** The weight OpenRLHF multiplies this token's loss by: NaN (inf · 0) or +inf (seq-mask-tis, sequence in range). */
  weight: number;
}

const f32 = Math.fround;

/** OpenRLHF's IS weights that are not finite, token by token ((B, T) row-major inputs). Empty under tis. */
export function openrlhfIsOverflow(
  old: ArrayLike<number>,
  rollout: ArrayLike<number>,
  mask: ArrayLike<number>,
  B: number,
  T: number,
  type: OpenrlhfConfig['algo.advantage.is_correction_type'],
  [lo, hi]: readonly [number, number],
): IsOverflowToken[] {
  if (type === 'tis') return [];
  const out: IsOverflowToken[] = [];
  for (let b = 0; b < B; b++) {
    const d = Float64Array.from({ length: T }, (_, t) => f32(f32(old[b * T + t]) - f32(rollout[b * T + t])));
    // seq-mask-tis: masked_mean without an epsilon (an empty row is NaN, in no range); exp in float32.
    let s = 0;
    let n = 0;
    for (let t = 0; t < T; t++) [s, n] = [s + d[t] * mask[b * T + t], n + mask[b * T + t]];
    const seqRatio = f32(Math.exp(f32(s / n)));
    const seqIn = seqRatio >= lo && seqRatio <= hi;
    for (let t = 0; t < T; t++) {
      if (f32(Math.exp(d[t])) !== Infinity) continue;
      out.push({ b, t, logRatio: d[t], weight: type === 'seq-mask-tis' && seqIn ? Infinity : NaN });
    }
  }
  return out;
}
