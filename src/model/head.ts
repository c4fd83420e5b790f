// The LM head over row chunks (Liger-style fused linear + log-prob): the (rows, V) logits never exist
// at once. Scoring (src/model/score.ts) runs head matmul → log-prob / entropy gather per chunk; the
// training backward (src/model/backward.ts) recomputes each chunk's logits from the saved hidden rows,
// turns them into dlogits in place from the loss's per-token dlogp (logprob_gather_backward with the
// forward's lse), and takes dhidden = dlogits · W_head and dW_head += dlogitsᵀ · hidden chunk by chunk.
// Recomputing costs one more head matmul than keeping the logits, and saves the (rows, V) buffer that
// would otherwise live from the policy forward through the loss to the backward.
import type { Recorder } from '../gpu/context.ts';
import { logprob_gather_backward } from '../kernels/logprob_gather.ts';
import { matmul_backward } from '../kernels/matmul.ts';
import { lmHeadName } from './config.ts';
import { recordHead } from './forward.ts';
import type { LayerOps } from './layer_ops.ts';

/** One chunk: rows r0 … r0 + n − 1 of the head's input, copied into `hidden`, and their logits. */
export interface HeadChunk {
  r0: number;
  n: number;
  hidden: GPUBuffer; // (R, C), the first n rows valid
  logits: GPUBuffer; // (R, V), the first n rows valid
}

/**
 * Records the head over `rows` rows of `hidden` (rows, C) in chunks of R rows into one (R, V) logits
 * buffer (a recorder scratch), calling `each` after every chunk's matmul to consume its logits.
 */
export function recordHeadChunks(rec: Recorder, ops: LayerOps, hidden: GPUBuffer, rows: number, R: number, each: (k: HeadChunk) => void): void {
  if (!(Number.isInteger(R) && R >= 1)) throw new RangeError(`head: logits chunk of ${R} rows must be a positive integer`);
  const { hidden_size: C, vocab_size: V } = ops.config;
  const k = { hidden: rec.scratch('head.hidden_chunk', R * C * 4), logits: rec.scratch('head.logits_chunk', R * V * 4) };
  for (let r0 = 0; r0 < rows; r0 += R) {
    const n = Math.min(R, rows - r0);
    rec.copy(hidden, r0 * C * 4, k.hidden, 0, n * C * 4);
    recordHead(rec, ops, k.logits, k.hidden, n);
    each({ r0, n, ...k });
  }
}

/** What the chunked head backward needs per scored row: the loss's gradient and the forward's gather. */
export interface HeadGrad {
  dlogp: GPUBuffer; // (rows) ∂loss/∂per_token_logps
  lse: GPUBuffer; // (rows, 2) the forward's split log-sum-exp (of logits / temperature)
  ids: GPUBuffer; // (rows) i32 scored tokens
  mask: GPUBuffer; // (rows) i32: rows with 0 get no gradient (as in the loss)
  temperature: number;
  /** ∂loss/∂entropy per row with the forward's entropy (entropy bonuses); absent: none. */
  dentropy?: { dentropy: GPUBuffer; entropy: GPUBuffer } | null; // (rows), (rows)
}

/**
 * dhidden (rows, C) = dlogits · W_head and dW_head += dlogitsᵀ · hidden (a tied head: into the embedding's
 * gradient; under a LoRA adapter the head is frozen, so dhidden only), with dlogits made chunk by chunk.
 */
export function recordHeadBackward(rec: Recorder, ops: LayerOps, hidden: GPUBuffer, dhidden: GPUBuffer, rows: number, R: number, g: HeadGrad): void {
  const { hidden_size: C, vocab_size: V } = ops.config;
  const head = lmHeadName(ops.config);
  // Per-row inputs of one chunk: the kernels bind from row 0, so each chunk's rows are copied in.
  const perRow = { ids: 1, mask: 1, lse: 2, dlogp: 1, ...(g.dentropy ? { dentropy: 1, entropy: 1 } : {}) };
  const src: Record<string, GPUBuffer> = { ids: g.ids, mask: g.mask, lse: g.lse, dlogp: g.dlogp, ...(g.dentropy ?? {}) };
  const k = Object.fromEntries(Object.entries(perRow).map(([name, w]) => [name, rec.scratch(`head.${name}_chunk`, R * w * 4)]));
  const dh = rec.scratch('head.dhidden_chunk', R * C * 4);
  recordHeadChunks(rec, ops, hidden, rows, R, ({ r0, n, hidden: h, logits }) => {
    for (const [name, w] of Object.entries(perRow)) rec.copy(src[name], r0 * w * 4, k[name], 0, n * w * 4);
    logprob_gather_backward(rec, {
      logits, ids: k.ids, mask: k.mask, lse: k.lse, dlogp: k.dlogp, dlogits: 'in-place', N: n, V, temperature: g.temperature,
      dentropy: g.dentropy ? { dentropy: k.dentropy, entropy: k.entropy } : null,
    });
    matmul_backward(rec, { dinp: dh, dweight: ops.gBase(head), dout: logits, inp: h, weight: ops.w(head), M: n, K: C, N: V, weightLayout: 'out_in', weightDtype: ops.dt(head), accumulate: true });
    rec.copy(dh, 0, dhidden, r0 * C * 4, n * C * 4);
  });
}
