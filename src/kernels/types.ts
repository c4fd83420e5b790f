// Shared types and constants of the GRPO kernels: the names and bit layouts that a WGSL kernel, its
// launcher, its float64 twin in src/oracle/ and the layers above (grpo, worker, UI) must agree on. Kept here,
// at the kernel layer, so production code never imports the test oracle (src/oracle) for a constant.
// Nothing in this file computes.

/** Every aggregation the studio shows, in the order loss_reduce_forward writes them (TRL + verl). */
export const AGGREGATIONS = [
  'grpo', // mean_b[Σ_t L·M / max(1, n_b)]
  'bnpo', // Σ L·M / max(1, N)
  'dr_grpo', // Σ L·M / (B·L_max)
  'dapo', // Σ L·M / num_items_in_batch (default N)
  'token-mean', // Σ L·M / N
  'seq-mean-token-sum', // Σ_b Σ_t L·M / #(n_b > 0)
  'seq-mean-token-mean', // Σ_b [Σ_t L·M / (n_b + 1e-8)] / #(n_b > 0)
  'seq-mean-token-sum-norm', // Σ L·M / loss_scale_factor (verl's default: the padded width T)
] as const;
export type LossType = (typeof AGGREGATIONS)[number];

/** Clip flag bits per token (shaders/grpo_loss_forward.wgsl writes them). */
export const CLIP_LOW = 1; // r̃ < 1 − ε_low and A < 0
export const CLIP_HIGH = 2; // r̃ > 1 + ε_high and A > 0
export const DELTA_BINDS = 4; // r > δ and the min takes δ·A: the cap changed this token's loss

/** Schulman's per-token KL estimators, as TRL names them (d = logp − ref): k1 d, k2 ½d², k3 exp(−d) + d − 1. */
export type KlEstimator = 'k1' | 'k2' | 'k3';
export const KL_ESTIMATORS: readonly KlEstimator[] = ['k1', 'k2', 'k3'];

/** TRL importance_sampling_level: a ratio per token, or one per sequence (GSPO). */
export type ImportanceSamplingLevel = 'token' | 'sequence';

/** The clipped-surrogate settings the per-token loss kernel takes (TRL GRPOConfig meaning). */
export interface PolicyLossParams {
  beta: number;
  epsilon_low: number;
  epsilon_high: number;
  delta: number | null;
  importance_sampling_level: ImportanceSamplingLevel;
}

/** Clip counts over completion_mask = 1 tokens. */
export interface ClipCounts {
  low: number;
  high: number;
  region: number; // low or high
  delta_binding: number;
  tokens: number; // N
}

/** The attention forward's dimensions (launcher and twin). */
export interface AttentionShape {
  B: number;
  Tq: number; // query rows: the last Tq of the Tk positions
  Tk: number; // visible key positions
  TkvMax: number; // rows of the k/v buffers (a KV cache's capacity), Tk <= TkvMax
  Hq: number; // query heads
  Hkv: number; // key/value heads, dividing Hq (grouped-query attention)
  D: number; // head_dim
  scale: number; // multiplies q·k (usually 1 / sqrt(D))
}

/** The attention backward's dimensions: full sequences, Tq = Tk = TkvMax = T. */
export type AttentionBackwardShape = Pick<AttentionShape, 'B' | 'Hq' | 'Hkv' | 'D' | 'scale'> & { T: number };

/** TRL GRPOConfig.loss_type values (trl/trainer/grpo_trainer.py `_compute_loss` at the pinned commit). */
export const TRL_LOSS_TYPES = ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'luspo', 'vespo'] as const;
export type TrlLossType = (typeof TRL_LOSS_TYPES)[number];
/** TRL's loss types whose normaliser is a global token count (num_items_in_batch / num_processes, or Liger's all-reduced count), not a per-micro-batch one. */
export const TRL_GLOBAL_COUNT: readonly TrlLossType[] = ['dapo', 'cispo', 'vespo'];

/** TRL vllm_importance_sampling_mode, plus 'off' (use_vllm or vllm_importance_sampling_correction false). */
export const VLLM_IS_MODES = ['token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask'] as const;
export type VllmIsMode = (typeof VLLM_IS_MODES)[number] | 'off';

/**
 * Everything the TRL per-row kernel (shaders/trl_loss_{forward,backward}.wgsl) and its twin (src/oracle/trl_loss.ts)
 * need, resolved from GRPOConfig + run context by src/grpo/trainers/trl.ts. Nulls are TRL's None.
 */
export interface TrlLossParams {
  B: number;
  T: number;
  loss_type: TrlLossType;
  importance_sampling_level: ImportanceSamplingLevel;
  beta: number;
  use_bias_correction_kl: boolean;
  epsilon_low: number;
  epsilon_high: number;
  delta: number | null;
  vllm_is_mode: VllmIsMode;
  vllm_is_min: number | null;
  vllm_is_max: number | null;
  off_policy_mask_threshold: number | null;
  /** torch.quantile(entropies of mask = 1 tokens, 1 − top_entropy_quantile); null when top_entropy_quantile = 1. */
  entropy_threshold: number | null;
  sapo_temperature_pos: number;
  sapo_temperature_neg: number;
  vespo_k_pos: number;
  vespo_lambda_pos: number;
  vespo_k_neg: number;
  vespo_lambda_neg: number;
  max_completion_length: number;
  gradient_accumulation_steps: number;
  num_items_in_batch: number;
  num_processes: number;
  /**
   * The processes whose micro-batches the batch holds, B/ranks consecutive rows each (a batch merged from
   * several ranks' files): each aggregates its own rows, and the loss is their mean (DDP averages the ranks'
   * gradients). 1: one process's micro-batch.
   */
  ranks: number;
  /** The entropy coefficient applied this step (adaptive gating resolved); 0 = no bonus term. */
  entropy_coef: number;
}

/**
 * config.json `rope_scaling` types the RoPE kernel implements (Hugging Face `modeling_rope_utils.py`):
 * 'linear' divides every inv_freq by `factor` (_compute_linear_scaling_rope_parameters); 'llama3' divides
 * the low frequencies by `factor`, keeps the high ones and blends in between (_compute_llama3_parameters).
 * Neither changes the attention scale.
 */
export type RopeScaling =
  | { rope_type: 'linear'; factor: number }
  | { rope_type: 'llama3'; factor: number; low_freq_factor: number; high_freq_factor: number; original_max_position_embeddings: number };

/** The policy terms shaders/ppo_loss_forward.wgsl forms (its `mode` uniform = index), verl's and OpenRLHF's loss modes. */
export const PPO_MODES = ['clip', 'gspo_token', 'sapo', 'cispo', 'pg', 'kl_cov', 'geo_mean', 'gspo_seq'] as const;
export type PpoMode = (typeof PPO_MODES)[number];

/** KL estimators of ppo_loss_forward (KL = index): verl kl_penalty_forward / OpenRLHF compute_approx_kl. */
export const PPO_KL = ['none', 'k1', 'abs', 'k2', 'k3'] as const;
export type PpoKl = (typeof PPO_KL)[number];

/** Settings of ppo_loss_forward; a clamp of 0 (ratio) or Infinity (KL) is off. */
export interface PpoLossParams {
  mode: PpoMode;
  kl: PpoKl;
  eps_low: number;
  eps_high: number;
  dual_clip: number; // 0 = off
  ratio_clamp: number; // clamp of logp − old before exp; 0 = off
  kl_inner: number; // k3: clamp of ref − logp before exp
  kl_outer: number; // clamp of the estimator
  kl_coef: number;
  ent_coef: number;
  tau_pos: number;
  tau_neg: number;
  kl_cov_coef: number;
  geo_seq_is: boolean;
}

/** Per-token inputs of ppo_loss_forward, packed 8 floats a token in this order. */
export const PPO_INPUTS = ['old', 'ref', 'advantages', 'isw', 'sel', 'mask', 'w_pg', 'w_aux'] as const;
