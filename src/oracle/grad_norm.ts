// Float64 twins of shaders/sumsq_forward.wgsl (main + finish per tensor, and clip_coef).
export function sumsq_forward(inp: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < inp.length; i++) s += inp[i] * inp[i];
  return s;
}

/**
 * torch.nn.utils.clip_grad_norm_ from per-tensor sums of squares: the total norm and the coefficient
 * min(1, maxNorm / (norm + 1e-6)); maxNorm ≤ 0: no clipping (1). ok: the norm is finite.
 */
export function clip_coef(sumsqs: ArrayLike<number>, maxNorm: number): { coef: number; ok: boolean; norm: number } {
  let s = 0;
  for (let i = 0; i < sumsqs.length; i++) s += sumsqs[i];
  const norm = Math.sqrt(s);
  return { coef: maxNorm > 0 ? Math.min(1, maxNorm / (norm + 1e-6)) : 1, ok: Number.isFinite(norm), norm };
}
