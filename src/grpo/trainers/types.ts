// A trainer objective on one micro-batch: what `grpo-studio loss CASE` runs and what the step pipeline
// calls. Each trainer module (trl.ts, verl.ts, openrlhf.ts) turns the trainer's own config and run context
// into GPU kernel launches (float64 twins in src/oracle/) and returns every per-token term the trainer forms,
// in the names of tests/golden/trainers/README.md.
import type { Gpu } from '../../gpu/context.ts';
import { SettingsError, type TrainerId } from '../settings/types.ts';

/** One micro-batch on the CPU, aligned so logits[b, t] scores completion_ids[b, t]. Per-token arrays are (B, T) row-major. */
export interface TrainerLossCase {
  trainer: TrainerId;
  /** The trainer's config in its own field names (validated by the trainer module against its settings table). */
  config: Record<string, unknown>;
  /** Run context: num_processes, rank, gradient_accumulation_steps, num_items_in_batch, ... (trainer-specific names). */
  run: Record<string, unknown>;
  B: number;
  T: number;
  V: number;
  logits: Float32Array; // (B, T, V) raw: the trainer divides by its temperature
  completion_ids: Int32Array; // (B, T)
  completion_mask: Int32Array; // (B, T)
  tool_mask: Int32Array | null; // (B, T) TRL only; 1 on padding as TRL pads it
  advantages: Float32Array; // (B) for TRL, (B, T) for verl / OpenRLHF
  old_per_token_logps: Float32Array | null; // (B, T)
  ref_per_token_logps: Float32Array | null; // (B, T)
  sampling_per_token_logps: Float32Array | null; // (B, T) vLLM / rollout log-probs
  /**
   * (B) each row's attention_mask sum: prompt + response tokens, what verl's use_dynamic_bsz packs micro-batches
   * by; null in a case without its prompts (a loss case that does not give them).
   */
  sequence_lengths: Int32Array | null;
  /**
   * The batch's padded width P + C (a verl dump's prompts + responses columns), which verl asserts its dynamic
   * budget against; absent: the longest row stands in (a case gives no padding).
   */
  sequence_width?: number;
}

/** A micro-batch without its logits: what the objectives read besides the log-probs. */
export type TrainerInputs = Omit<TrainerLossCase, 'logits' | 'V'>;

/**
 * Log-probs and entropies the studio's own forward scored (every position, logits / `temperature`), for the
 * loss and what-if of a step: the objectives run on them instead of gathering from logits.
 */
export interface ScoredLogps {
  per_token_logps: Float32Array; // (B, T)
  per_token_entropy: Float32Array; // (B, T)
  temperature: number;
}

/** Scored log-probs fit the micro-batch and were taken at the trainer's temperature (`field` names the setting). */
export function checkScored(s: ScoredLogps, N: number, temperature: number, field: string): void {
  for (const [name, a] of [['per_token_logps', s.per_token_logps], ['per_token_entropy', s.per_token_entropy]] as const) {
    if (a.length !== N) throw new SettingsError(`${name}: expected ${N} values (B·T), got ${a.length}`);
  }
  if (s.temperature !== temperature) {
    throw new SettingsError(`${field}: ${temperature} differs from the temperature the forward scored with (${s.temperature}); a new temperature needs a new forward`);
  }
}

/** Field k of a kernel's interleaved per-token output (N records of `stride` floats), as its own (N) array. */
export function fieldOf(records: Float32Array, stride: number, k: number): Float32Array {
  const N = Math.floor(records.length / stride);
  const out = new Float32Array(N);
  for (let i = 0; i < N; i++) out[i] = records[stride * i + k];
  return out;
}

/** Everything the trainer forms, (B, T) row-major unless noted; null where the trainer does not form it. */
export interface TrainerLossOutputs {
  per_token_logps: Float64Array | Float32Array;
  per_token_entropy: Float64Array | Float32Array | null;
  per_token_kl: Float64Array | Float32Array | null;
  importance_sampling_ratio: Float64Array | Float32Array | null;
  per_token_loss: Float64Array | Float32Array | null;
  /** What the aggregation sums and counts (the effective loss mask). */
  loss_mask: Float64Array | Float32Array;
  entropy_mask: Float64Array | Float32Array | null;
  /**
   * The mask the gradient actually sees: loss_mask × truncation × entropy × off-policy × importance-sampling
   * masks (1 where a token contributes, 0 where any factor removed it); absent where the trainer forms no
   * extra masks beyond loss_mask.
   */
  effective_loss_mask?: Float64Array | Float32Array | null;
  off_policy_mask: Float64Array | Float32Array | null;
  loss: number;
  dlogits: Float32Array | Float64Array | null; // (B, T, V); float64 from the twin chain in tests
  /** From scored log-probs (no logits): ∂loss/∂per_token_logps and ∂loss/∂per_token_entropy, (B, T). */
  dlogp?: Float32Array | Float64Array | null;
  dentropy?: Float32Array | Float64Array | null;
  /**
   * ∂loss/∂per_token_loss: each token's weight in the trainer's aggregation of per_token_loss (its loss type / agg
   * mode with the run's scalings: gradient accumulation, processes, micro-batches). With kl_weight and the entropy
   * term the loss is Σ token_weight·per_token_loss (+ Σ kl_weight·per_token_kl unless per_token_loss_includes_kl)
   * − the entropy bonus. Absent where the trainer module does not form it.
   */
  token_weight?: Float64Array | Float32Array | null;
  /** ∂loss/∂per_token_kl: the KL coefficient × its aggregation weight; null where the loss has no KL term. */
  kl_weight?: Float64Array | Float32Array | null;
  /** per_token_loss already holds the KL term (TRL: per_token_loss + β·per_token_kl), so kl_weight is through it. */
  per_token_loss_includes_kl?: boolean;
  /** The policy ratio the objective's policy term used (verl / OpenRLHF: the kernel's token, sequence or GMPO ratio); absent: not exposed. */
  policy_ratio?: Float64Array | Float32Array | null;
  /** CLIP_LOW | CLIP_HIGH per token (src/kernels/types.ts) as the trainer's clip binds them; absent: not exposed. */
  clip?: Uint32Array | null;
  /** config / run keys the trainer's settings table does not know (listed, never silently dropped). */
  unknown_settings?: string[];
}

export type TrainerLoss = (gpu: Gpu, c: TrainerLossCase, opts: { backward: boolean }) => Promise<TrainerLossOutputs>;
