// Re-scoring a padded batch with a model: one forward with logits_to_keep = C (TRL: logits[:, P−1 : L−1]
// score input_ids[:, P:]), then per-token log-probs and entropies of the completion tokens from those
// logits on the GPU. Used by the `score` CLI verb and the studio (policy and reference alike).
import type { Recorder } from '../gpu/context.ts';
import { logprob_gather_forward } from '../kernels/logprob_gather.ts';
import type { CausalLM } from './model.ts';

export interface CompletionScores {
  per_token_logps: GPUBuffer; // (B, C) f32
  per_token_entropy: GPUBuffer; // (B, C) f32
  lse: GPUBuffer; // (B, C, 2)
  completion_ids: GPUBuffer; // (B, C) i32
  completion_mask: GPUBuffer; // (B, C) i32
  /** The forward's logits (B·C, V): the model's workspace buffer, valid until its next forward (not freed by destroy). */
  logits: GPUBuffer;
  destroy(): void;
}

/** What scoring reads of a padded batch (src/grpo/batch.ts PaddedBatch has these fields): L = P + C. */
export interface ScoredBatch {
  B: number;
  L: number;
  C: number;
  input_ids: Int32Array; // (B, L)
  attention_mask: Int32Array; // (B, L)
  position_ids: Int32Array; // (B, L)
  completion_ids: Int32Array; // (B, C) = input_ids[:, P:]
  completion_mask: Int32Array; // (B, C)
}

/**
 * Records the scoring of every completion position of `batch` (padding included, as TRL computes it:
 * consumers mask with completion_mask). Logits are divided by `temperature` first. `save` keeps the
 * activations for a backward (the step pipeline).
 */
export function score_completions(rec: Recorder, model: CausalLM, batch: ScoredBatch, opts: { temperature?: number; save?: boolean } = {}): CompletionScores {
  const gpu = rec.gpu;
  const { B, L, C } = batch;
  const { logits, V } = model.forward(rec, { B, T: L, input_ids: batch.input_ids, attention_mask: batch.attention_mask, position_ids: batch.position_ids }, { logits_to_keep: C, save: opts.save });
  const out = {
    per_token_logps: gpu.createBuffer('per_token_logps', B * C * 4),
    per_token_entropy: gpu.createBuffer('per_token_entropy', B * C * 4),
    lse: gpu.createBuffer('lse', B * C * 8),
    completion_ids: gpu.upload('completion_ids', batch.completion_ids),
    completion_mask: gpu.upload('completion_mask', batch.completion_mask),
  };
  logprob_gather_forward(rec, {
    logits,
    ids: out.completion_ids,
    mask: out.completion_mask,
    logp: out.per_token_logps,
    lse: out.lse,
    entropy: out.per_token_entropy,
    N: B * C,
    V,
    temperature: opts.temperature ?? 1,
    skipMasked: false,
  });
  return { ...out, logits, destroy: () => Object.values(out).forEach((b) => b.destroy()) };
}
