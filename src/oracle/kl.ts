// Float64 twin of shaders/kl_forward.wgsl: per-token KL estimators (Schulman's k1/k2/k3, as TRL uses them).
import type { KlEstimator } from '../kernels/types.ts';

export function kl_forward(logp: ArrayLike<number>, refLogp: ArrayLike<number>, estimator: KlEstimator): Float64Array {
  const out = new Float64Array(logp.length);
  for (let i = 0; i < out.length; i++) {
    const d = logp[i] - refLogp[i];
    out[i] = estimator === 'k1' ? d : estimator === 'k2' ? 0.5 * d * d : Math.expm1(-d) + d;
  }
  return out;
}
