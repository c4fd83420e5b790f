// Float64 twins of shaders/adamw_step.wgsl and shaders/sgd_step.wgsl (torch.optim.AdamW / SGD, the
// single-tensor algorithms, written out independently of the launchers), one tensor per call: they update
// the given Float64Arrays in place, like the optimizers, and return Σ Δθ² (what the launchers write to out[i]).
// gradScale is the clip coefficient the kernels read from their clip buffer (oracle/grad_norm.ts clip_coef).
import type { AdamWArgs, SgdArgs } from '../kernels/optimizer.ts';

type Scalars<T> = Omit<T, 'tensors' | 'clip' | 'out' | 'limit'> & { weightDecay: number; gradScale: number };

export function adamw_step(param: Float64Array, grad: ArrayLike<number>, m: Float64Array, v: Float64Array, h: Scalars<AdamWArgs>): number {
  const bc1 = 1 - h.beta1 ** h.step;
  const bc2 = 1 - h.beta2 ** h.step;
  let dd = 0;
  for (let i = 0; i < param.length; i++) {
    const before = param[i];
    const g = grad[i] * h.gradScale;
    param[i] *= 1 - h.lr * h.weightDecay;
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
    param[i] -= (h.lr * (m[i] / bc1)) / (Math.sqrt(v[i] / bc2) + h.eps);
    dd += (param[i] - before) ** 2;
  }
  return dd;
}

export function sgd_step(param: Float64Array, grad: ArrayLike<number>, buf: Float64Array | null, h: Scalars<SgdArgs>): number {
  const momentum = h.momentum ?? 0;
  let dd = 0;
  for (let i = 0; i < param.length; i++) {
    const before = param[i];
    let d = grad[i] * h.gradScale + h.weightDecay * param[i];
    if (momentum !== 0) {
      buf![i] = (h.step ?? 1) === 1 ? d : momentum * buf![i] + (1 - (h.dampening ?? 0)) * d;
      d = h.nesterov ? d + momentum * buf![i] : buf![i];
    }
    param[i] -= h.lr * d;
    dd += (param[i] - before) ** 2;
  }
  return dd;
}
