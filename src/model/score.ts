// Re-scoring a padded batch with a model: one forward with logits_to_keep = C (TRL: logits[:, P−1 : L−1]
// score input_ids[:, P:]), then per-token log-probs and entropies of the completion tokens from those
// logits on the GPU. Used by the `score` CLI verb and the studio (policy and reference alike).
//
// Without `save` (the reference, the `score` verb) the head runs in row chunks (Liger-style): a headless
// forward, then per chunk of rows the head matmul into one (rows, V) chunk of logits and the log-prob /
// entropy gather, so the peak is one chunk of logits, never (B·C, V). The chunk holds as many rows as fit
// one storage binding (the device's maxStorageBufferBindingSize). With `save` (the policy, whose logits
// the loss turns into dlogits in place for the backward) the whole (B·C, V) logits stay.
import type { Recorder } from '../gpu/context.ts';
import { logprob_gather_forward } from '../kernels/logprob_gather.ts';
import type { CausalLM } from './model.ts';

export interface CompletionScores {
  per_token_logps: GPUBuffer; // (B, C) f32
  per_token_entropy: GPUBuffer; // (B, C) f32
  lse: GPUBuffer; // (B, C, 2)
  completion_ids: GPUBuffer; // (B, C) i32
  completion_mask: GPUBuffer; // (B, C) i32
  /** The forward's logits (B·C, V) with `save`: the model's workspace buffer, valid until its next forward (not freed by destroy); null when scored in chunks. */
  logits: GPUBuffer | null;
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
/** Rows of one logits chunk: as many (V f32 each) as one storage binding holds, at most `rows`. */
export function logitsChunkRows(V: number, rows: number, maxBindingBytes: number): number {
  return Math.max(1, Math.min(rows, Math.floor(maxBindingBytes / (V * 4))));
}

export function score_completions(rec: Recorder, model: CausalLM, batch: ScoredBatch, opts: { temperature?: number; save?: boolean; chunkRows?: number /* tests: rows per logits chunk */ } = {}): CompletionScores {
  const gpu = rec.gpu;
  const { B, L, C } = batch;
  const headless = !opts.save;
  const f = model.forward(rec, { B, T: L, input_ids: batch.input_ids, attention_mask: batch.attention_mask, position_ids: batch.position_ids }, { logits_to_keep: C, save: opts.save, headless });
  const V = f.V;
  const out = {
    per_token_logps: gpu.createBuffer('per_token_logps', B * C * 4),
    per_token_entropy: gpu.createBuffer('per_token_entropy', B * C * 4),
    lse: gpu.createBuffer('lse', B * C * 8),
    completion_ids: gpu.upload('completion_ids', batch.completion_ids),
    completion_mask: gpu.upload('completion_mask', batch.completion_mask),
  };
  const temperature = opts.temperature ?? 1;
  const destroy = () => Object.values(out).forEach((b) => b.destroy());
  if (!headless) {
    logprob_gather_forward(rec, {
      logits: f.logits, ids: out.completion_ids, mask: out.completion_mask, logp: out.per_token_logps, lse: out.lse, entropy: out.per_token_entropy,
      N: B * C, V, temperature, skipMasked: false,
    });
    return { ...out, logits: f.logits, destroy };
  }
  const Cm = model.config.hidden_size;
  const rows = B * C;
  const R = opts.chunkRows ?? logitsChunkRows(V, rows, gpu.limits.maxStorageBufferBindingSize);
  // One set of chunk buffers for every chunk (freed once the recorder is submitted).
  const k = {
    hidden: rec.scratch('score.hidden_chunk', R * Cm * 4), // (R, C)
    logits: rec.scratch('score.logits_chunk', R * V * 4), // (R, V)
    ids: rec.scratch('score.ids_chunk', R * 4),
    mask: rec.scratch('score.mask_chunk', R * 4),
    logp: rec.scratch('score.logp_chunk', R * 4),
    lse: rec.scratch('score.lse_chunk', R * 8),
    entropy: rec.scratch('score.entropy_chunk', R * 4),
  };
  for (let r0 = 0; r0 < rows; r0 += R) {
    const n = Math.min(R, rows - r0);
    rec.copy(f.hidden, r0 * Cm * 4, k.hidden, 0, n * Cm * 4);
    rec.copy(out.completion_ids, r0 * 4, k.ids, 0, n * 4);
    rec.copy(out.completion_mask, r0 * 4, k.mask, 0, n * 4);
    model.head(rec, k.logits, k.hidden, n);
    logprob_gather_forward(rec, { logits: k.logits, ids: k.ids, mask: k.mask, logp: k.logp, lse: k.lse, entropy: k.entropy, N: n, V, temperature, skipMasked: false });
    rec.copy(k.logp, 0, out.per_token_logps, r0 * 4, n * 4);
    rec.copy(k.lse, 0, out.lse, r0 * 8, n * 8);
    rec.copy(k.entropy, 0, out.per_token_entropy, r0 * 4, n * 4);
  }
  return { ...out, logits: null, destroy };
}
