// Re-scoring a padded batch with a model: one forward with logits_to_keep = C (TRL: logits[:, P−1 : L−1]
// score input_ids[:, P:]), then per-token log-probs and entropies of the completion tokens from those
// logits on the GPU. Used by the `score` CLI verb and the studio (policy and reference alike).
//
// The head runs in row chunks (Liger-style, src/model/head.ts): a headless forward, then per chunk of
// rows the head matmul into one (rows, V) chunk of logits and the log-prob / entropy gather, so the peak
// is one chunk of logits, never (B·C, V). The chunk holds as many rows as fit one storage binding (the
// device's maxStorageBufferBindingSize, at most 128 MiB: memory.ts logitsChunkRows) unless the model
// sets CausalLM.logitsChunkRows. With `save` (the policy) the activations stay for a backward, which
// recomputes each chunk's logits from the saved hidden rows and takes the per-token gradient of these
// log-probs through them (CausalLM.backward with a HeadGrad).
import type { Recorder } from '../gpu/context.ts';
import { logprob_gather_forward } from '../kernels/logprob_gather.ts';
import type { CausalLM } from './model.ts';

export interface CompletionScores {
  per_token_logps: GPUBuffer; // (B, C) f32
  per_token_entropy: GPUBuffer; // (B, C) f32
  lse: GPUBuffer; // (B, C, 2)
  completion_ids: GPUBuffer; // (B, C) i32
  completion_mask: GPUBuffer; // (B, C) i32
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
  const f = model.forward(rec, { B, T: L, input_ids: batch.input_ids, attention_mask: batch.attention_mask, position_ids: batch.position_ids }, { logits_to_keep: C, save: opts.save, headless: true });
  const V = f.V;
  const out = {
    per_token_logps: gpu.createBuffer('per_token_logps', B * C * 4),
    per_token_entropy: gpu.createBuffer('per_token_entropy', B * C * 4),
    lse: gpu.createBuffer('lse', B * C * 8),
    completion_ids: gpu.upload('completion_ids', batch.completion_ids),
    completion_mask: gpu.upload('completion_mask', batch.completion_mask),
  };
  const temperature = opts.temperature ?? 1;
  const R = model.chunkRows(B * C);
  // One set of per-row chunk buffers for every chunk (freed once the recorder is submitted).
  const k = {
    ids: rec.scratch('score.ids_chunk', R * 4),
    mask: rec.scratch('score.mask_chunk', R * 4),
    logp: rec.scratch('score.logp_chunk', R * 4),
    lse: rec.scratch('score.lse_chunk', R * 8),
    entropy: rec.scratch('score.entropy_chunk', R * 4),
  };
  model.headChunks(rec, f.hidden, B * C, ({ r0, n, logits }) => {
    rec.copy(out.completion_ids, r0 * 4, k.ids, 0, n * 4);
    rec.copy(out.completion_mask, r0 * 4, k.mask, 0, n * 4);
    logprob_gather_forward(rec, { logits, ids: k.ids, mask: k.mask, logp: k.logp, lse: k.lse, entropy: k.entropy, N: n, V, temperature, skipMasked: false });
    rec.copy(k.logp, 0, out.per_token_logps, r0 * 4, n * 4);
    rec.copy(k.lse, 0, out.lse, r0 * 8, n * 8);
    rec.copy(k.entropy, 0, out.per_token_entropy, r0 * 4, n * 4);
  });
  return { ...out, destroy: () => Object.values(out).forEach((b) => b.destroy()) };
}
