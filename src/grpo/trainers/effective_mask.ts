// The effective loss mask as a first-class per-token array, with the factor that removed each token: the
// completion mask (padding, after EOS), TRL's mask_truncated_completions, the tool mask, the entropy mask
// (top_entropy_quantile), the off-policy mask, an importance-sampling weight of 0 (vLLM *_mask modes,
// OpenRLHF icepop / seq-mask-tis) and verl's rejection sampling (rollout_rs, which shrinks its loss mask).
// The first factor in that order is the one named; a token is in the loss when none removed it.

export const MASK_FACTORS = ['kept', 'completion', 'truncation', 'tool', 'entropy', 'off-policy', 'importance sampling', 'rejection sampling'] as const;
export type MaskFactor = (typeof MASK_FACTORS)[number];

export interface MaskInputs {
  B: number;
  T: number;
  completion_mask: ArrayLike<number>; // (B, T) before truncation masking
  tool_mask: ArrayLike<number> | null; // (B, T)
  truncated: ArrayLike<number> | null; // (B) 1 where mask_truncated_completions drops the row
}

/** The masks and IS weights a trainer objective formed ((B, T); null where it forms none). */
export interface TrainerMasks {
  loss_mask: ArrayLike<number>;
  entropy_mask: ArrayLike<number> | null;
  off_policy_mask: ArrayLike<number> | null;
  importance_sampling_ratio: ArrayLike<number> | null;
}

/**
 * MASK_FACTORS index per token (0 = in the loss), (B, T). `isDrops`: a 0 importance-sampling weight removes
 * the token (every trainer's correction except TRL's vespo, which does not multiply by it).
 */
export function maskFactors(x: MaskInputs, o: TrainerMasks, isDrops: boolean): Uint8Array {
  const N = x.B * x.T;
  const f = new Uint8Array(N);
  const is = isDrops ? o.importance_sampling_ratio : null;
  for (let i = 0; i < N; i++) {
    const b = Math.floor(i / x.T);
    if (!x.completion_mask[i]) f[i] = 1;
    else if (x.truncated?.[b]) f[i] = 2;
    else if (x.tool_mask && !x.tool_mask[i]) f[i] = 3;
    else if (o.entropy_mask && !o.entropy_mask[i]) f[i] = 4;
    else if (o.off_policy_mask && !o.off_policy_mask[i]) f[i] = 5;
    else if (is && is[i] === 0) f[i] = 6;
    else if (!o.loss_mask[i]) f[i] = 7;
  }
  return f;
}
