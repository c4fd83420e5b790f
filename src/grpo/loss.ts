// The GRPO loss on the GPU, end to end, as one call: logits (B·T, V) → per-token log-probs, entropy,
// KL to the reference, importance ratio, per-token loss and clip flags (TRL GRPOTrainer._compute_loss),
// every aggregation at once, and (optionally) the gradient for the chosen loss_type: back to the logits,
// or, when the logits were never materialised (the step pipeline scores the policy in row chunks, and
// its backward recomputes each chunk's logits: src/model/head.ts), only to the per-token log-probs
// (dlogp). Used by the `loss` CLI verb and by the step pipeline: no CPU round trip until `readGrpoLoss`.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { kl_forward } from '../kernels/kl.ts';
import { logprob_gather_backward, logprob_gather_forward, type LogitsDtype } from '../kernels/logprob_gather.ts';
import { grpo_loss_backward, grpo_loss_forward } from '../kernels/grpo_loss.ts';
import { loss_reduce_forward, STATS } from '../kernels/loss_reduce.ts';
import { GRPO_LOSS_REQUIRED, GRPO_LOSS_SETTINGS } from './settings/studio.ts';
import { defaultsOf, parseSettings } from './settings/table.ts';
import { SettingsError } from './settings/types.ts';
import { AGGREGATIONS, CLIP_HIGH, CLIP_LOW, type ClipCounts, type ImportanceSamplingLevel, type KlEstimator, type LossType } from '../kernels/types.ts';

export { AGGREGATIONS, type LossType, type ClipCounts };

/** GRPOConfig fields that shape the loss, with TRL's names. */
export interface GrpoLossConfig {
  loss_type: LossType;
  beta: number;
  epsilon_low: number;
  epsilon_high: number;
  delta: number | null;
  temperature: number;
  max_completion_length: number;
  kl_estimator: KlEstimator;
  importance_sampling_level: ImportanceSamplingLevel;
  /** dapo's normalizer (tokens in the whole generation batch); default Σ completion_mask. */
  num_items_in_batch?: number;
}

/** A loss config or loss input that cannot be run, with the field it is about. */
export class GrpoLossError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GrpoLossError';
  }
}

/** Validates a config read from JSON (a loss case's metadata, a batch file, the UI) against the studio's loss table. */
export function parseGrpoLossConfig(raw: unknown, where = 'config'): GrpoLossConfig {
  try {
    const { values } = parseSettings<GrpoLossConfig & { num_items_in_batch: number | null }>(GRPO_LOSS_SETTINGS, raw, where, { required: GRPO_LOSS_REQUIRED });
    const { num_items_in_batch, ...cfg } = values;
    // TRL divides by num_items_in_batch.clamp(min=1.0) (every completion masked: 0 tokens, loss 0); the kernels read 0 as unset.
    return num_items_in_batch === null ? cfg : { ...cfg, num_items_in_batch: Math.max(1, num_items_in_batch) };
  } catch (e) {
    // Callers (CLI, worker) classify GrpoLossError as a settings problem; the message names the field.
    if (e instanceof SettingsError) throw new GrpoLossError(e.message);
    throw e;
  }
}

/** TRL's GRPOConfig defaults, from the settings table (epsilon_high = epsilon; k3 is TRL's only estimator). */
export const DEFAULT_GRPO_LOSS_CONFIG: GrpoLossConfig = parseGrpoLossConfig(defaultsOf(GRPO_LOSS_SETTINGS));

export interface GrpoLossInputs {
  B: number;
  T: number;
  V: number;
  /** (B·T, V): logits[b, t] scores completion_ids[b, t]. Absent: `scored` is required and the backward stops at dlogp. */
  logits?: GPUBuffer | null;
  logitsDtype?: LogitsDtype;
  completion_ids: GPUBuffer; // (B, T) i32
  completion_mask: GPUBuffer; // (B, T) i32, 1 on completion tokens
  advantages: GPUBuffer; // (B) f32
  /** Absent: old = per_token_logps.detach() (TRL with one iteration per generation): r = 1, gradient intact. */
  old_per_token_logps?: GPUBuffer | null; // (B, T)
  /** Absent: no KL (then beta must be 0). */
  ref_per_token_logps?: GPUBuffer | null; // (B, T)
  /**
   * What logprob_gather_forward already computed from these logits at this temperature, with every row
   * scored (the step pipeline's policy forward, score_completions): used as is, so the (B·T, V) logits
   * are not read a second time. Absent: the loss gathers them itself.
   */
  scored?: { per_token_logps: GPUBuffer; lse: GPUBuffer; per_token_entropy: GPUBuffer } | null;
}

export interface GrpoLossOptions {
  /** Compute dlogits (default true). */
  backward?: boolean;
  /** 'in-place' overwrites the f32 logits with dlogits: no second (B·T, V) buffer. Default 'buffer'. */
  dlogits?: 'buffer' | 'in-place';
  /** Score rows with mask 0 too, so per-token outputs match TRL at every position (default: skip them). */
  scoreMaskedRows?: boolean;
  /** Record into this recorder and leave submitting to the caller (the step pipeline); default: submit. */
  rec?: Recorder;
}

/** GPU buffers, all f32 unless noted; per-token ones are (B, T). */
export interface GrpoLossResult {
  B: number;
  T: number;
  V: number;
  config: GrpoLossConfig;
  per_token_logps: GPUBuffer;
  lse: GPUBuffer; // (B·T, 2): max z, log Σ exp(z − max)
  per_token_entropy: GPUBuffer;
  per_token_kl: GPUBuffer | null;
  importance_ratio: GPUBuffer;
  per_token_loss: GPUBuffer;
  clip: GPUBuffer; // u32 CLIP_LOW | CLIP_HIGH | DELTA_BINDS
  stats: GPUBuffer; // (16): AGGREGATIONS then STATS slots
  dlogp: GPUBuffer | null;
  token_weight: GPUBuffer | null; // ∂loss/∂per_token_loss of the chosen aggregation (with the backward)
  dlogits: GPUBuffer | null; // (B·T, V); the logits buffer itself when in place; null without logits
  destroy(): void; // frees what grpo_loss created (never the inputs)
}

function checkSize(what: string, buf: GPUBuffer, bytes: number): void {
  if (buf.size < bytes) throw new GrpoLossError(`${what}: buffer of ${buf.size} bytes, needs ${bytes}`);
}

export async function grpo_loss(gpu: Gpu, inputs: GrpoLossInputs, config: GrpoLossConfig, opts: GrpoLossOptions = {}): Promise<GrpoLossResult> {
  const { B, T, V } = inputs;
  const N = B * T;
  const dtype = inputs.logitsDtype ?? 'f32';
  if (![B, T, V].every((x) => Number.isInteger(x) && x > 0)) throw new GrpoLossError(`B, T, V must be positive integers, got ${B}, ${T}, ${V}`);
  const logits = inputs.logits ?? null;
  if (logits) checkSize('logits', logits, N * V * (dtype === 'f16' ? 2 : 4));
  else if (!inputs.scored) throw new GrpoLossError('logits: needed unless the per-token log-probs are given (scored)');
  checkSize('completion_ids', inputs.completion_ids, N * 4);
  checkSize('completion_mask', inputs.completion_mask, N * 4);
  checkSize('advantages', inputs.advantages, B * 4);
  if (inputs.old_per_token_logps) checkSize('old_per_token_logps', inputs.old_per_token_logps, N * 4);
  if (inputs.ref_per_token_logps) checkSize('ref_per_token_logps', inputs.ref_per_token_logps, N * 4);
  if (config.beta !== 0 && !inputs.ref_per_token_logps) throw new GrpoLossError(`beta = ${config.beta} needs ref_per_token_logps`);
  const backward = opts.backward ?? true;
  const inPlace = opts.dlogits === 'in-place';
  if (backward && inPlace && (dtype !== 'f32' || !logits)) throw new GrpoLossError('in-place dlogits needs f32 logits');

  const created: GPUBuffer[] = [];
  const buf = (label: string, bytes: number): GPUBuffer => {
    const b = gpu.createBuffer(label, bytes);
    created.push(b);
    return b;
  };
  const scored = inputs.scored;
  if (scored) {
    checkSize('scored.per_token_logps', scored.per_token_logps, N * 4);
    checkSize('scored.lse', scored.lse, N * 8);
    checkSize('scored.per_token_entropy', scored.per_token_entropy, N * 4);
  }
  const out = {
    per_token_logps: scored?.per_token_logps ?? buf('per_token_logps', N * 4),
    lse: scored?.lse ?? buf('lse', N * 8),
    per_token_entropy: scored?.per_token_entropy ?? buf('per_token_entropy', N * 4),
    per_token_kl: inputs.ref_per_token_logps ? buf('per_token_kl', N * 4) : null,
    importance_ratio: buf('importance_ratio', N * 4),
    per_token_loss: buf('per_token_loss', N * 4),
    clip: buf('clip', N * 4),
    stats: buf('loss_stats', STATS.size * 4),
    dlogp: backward ? buf('dlogp', N * 4) : null,
    token_weight: backward ? buf('token_weight', N * 4) : null,
    dlogits: backward && logits ? (inPlace ? logits : buf('dlogits', N * V * 4)) : null,
  };

  const rec = opts.rec ?? gpu.recorder('grpo_loss');
  if (!scored) {
    logprob_gather_forward(rec, {
      logits: logits!,
      dtype,
      ids: inputs.completion_ids,
      mask: inputs.completion_mask,
      logp: out.per_token_logps,
      lse: out.lse,
      entropy: out.per_token_entropy,
      N,
      V,
      temperature: config.temperature,
      skipMasked: !opts.scoreMaskedRows,
    });
  }
  recordLossTerms(rec, { B, T, logp: out.per_token_logps, mask: inputs.completion_mask, advantages: inputs.advantages, old: inputs.old_per_token_logps ?? null, ref: inputs.ref_per_token_logps ?? null }, out, config);
  if (logits && out.dlogp && out.token_weight && out.dlogits) {
    logprob_gather_backward(rec, {
      logits,
      dtype,
      ids: inputs.completion_ids,
      mask: inputs.completion_mask,
      lse: out.lse,
      dlogp: out.dlogp,
      dlogits: inPlace ? 'in-place' : out.dlogits,
      N,
      V,
      temperature: config.temperature,
    });
  }
  if (!opts.rec) await rec.submit();
  return { B, T, V, config, ...out, destroy: () => created.forEach((b) => b.destroy()) };
}

/** The buffers the per-token terms are written to (dlogp null: no backward). */
export interface LossTermBuffers {
  per_token_kl: GPUBuffer | null;
  importance_ratio: GPUBuffer;
  per_token_loss: GPUBuffer;
  clip: GPUBuffer;
  stats: GPUBuffer;
  dlogp: GPUBuffer | null;
  token_weight: GPUBuffer | null; // written with dlogp
}

/**
 * Everything after the log-prob gather: KL to the reference, importance ratio, per-token loss and clip
 * flags, every aggregation, and dloss/dlogp of the chosen one. Shared by grpo_loss and grpo_loss_from_logps
 * so a what-if and the step compute the same terms with the same kernels.
 */
export function recordLossTerms(
  rec: Recorder,
  a: { B: number; T: number; logp: GPUBuffer; mask: GPUBuffer; advantages: GPUBuffer; old: GPUBuffer | null; ref: GPUBuffer | null },
  out: LossTermBuffers,
  config: GrpoLossConfig,
): void {
  const { B, T } = a;
  const common = { B, T, mask: a.mask, advantages: a.advantages };
  if (out.per_token_kl && a.ref) kl_forward(rec, { logp: a.logp, refLogp: a.ref, kl: out.per_token_kl, n: B * T, estimator: config.kl_estimator });
  grpo_loss_forward(rec, {
    ...common,
    logp: a.logp,
    oldLogp: a.old ?? a.logp,
    kl: out.per_token_kl ?? rec.gpu.zeros(B * T * 4),
    loss: out.per_token_loss,
    ratio: out.importance_ratio,
    clip: out.clip,
    params: config,
  });
  loss_reduce_forward(rec, { ...common, loss: out.per_token_loss, clip: out.clip, out: out.stats, ...config });
  if (out.dlogp && out.token_weight) {
    grpo_loss_backward(rec, { ...common, logp: a.logp, refLogp: a.ref ?? a.logp, ratio: out.importance_ratio, stats: out.stats, dlogp: out.dlogp, token_weight: out.token_weight, params: config });
  }
}

/** Everything a GrpoLossResult holds, on the CPU. Per-token arrays are (B, T) row-major. */
export interface GrpoLossReadback {
  per_token_logps: Float32Array;
  lse: Float32Array; // (B·T, 2)
  per_token_entropy: Float32Array;
  per_token_kl: Float32Array | null;
  importance_ratio: Float32Array;
  per_token_loss: Float32Array;
  is_low_clipped: Uint8Array;
  is_high_clipped: Uint8Array;
  clip: Uint32Array;
  loss: number; // losses[config.loss_type]
  losses: Record<LossType, number>;
  clip_counts: ClipCounts;
  sequences: number; // rows with at least one completion token
  dlogp: Float32Array | null;
  token_weight: Float32Array | null;
  dlogits: Float32Array | null; // (B·T, V), only when asked for (it is the big one)
}

/** The per-token arrays a GrpoLossResult can read back (the stats are always read: they are 64 bytes). */
export type LossArray = 'per_token_logps' | 'lse' | 'per_token_entropy' | 'per_token_kl' | 'importance_ratio' | 'per_token_loss' | 'clip' | 'dlogp' | 'token_weight';
const LOSS_ARRAYS: readonly LossArray[] = ['per_token_logps', 'lse', 'per_token_entropy', 'per_token_kl', 'importance_ratio', 'per_token_loss', 'clip', 'dlogp', 'token_weight'];

type LossStats = Pick<GrpoLossReadback, 'loss' | 'losses' | 'clip_counts' | 'sequences'>;

/**
 * Reads back only `fields` (what a page shows) and the aggregated stats, in one round trip. An array
 * the result does not have (no KL, no backward) reads as null.
 */
export async function readGrpoLossFields<K extends LossArray>(gpu: Gpu, r: GrpoLossResult, fields: readonly K[]): Promise<Pick<GrpoLossReadback, K> & LossStats> {
  const N = r.B * r.T;
  const present = fields.filter((f) => r[f] !== null);
  const bufs = await gpu.readAll([{ buf: r.stats, byteSize: STATS.size * 4 }, ...present.map((f) => ({ buf: r[f]!, byteSize: (f === 'lse' ? 2 * N : N) * 4 }))]);
  const stats = new Float32Array(bufs[0]);
  const arrays: Record<string, Float32Array | Uint32Array | null> = Object.fromEntries(fields.map((f) => [f, null]));
  present.forEach((f, i) => (arrays[f] = f === 'clip' ? new Uint32Array(bufs[i + 1]) : new Float32Array(bufs[i + 1])));
  const losses = Object.fromEntries(AGGREGATIONS.map((a, i) => [a, stats[i]])) as Record<LossType, number>;
  const summary: LossStats = {
    loss: losses[r.config.loss_type],
    losses,
    clip_counts: {
      low: stats[STATS.low],
      high: stats[STATS.high],
      region: stats[STATS.region],
      delta_binding: stats[STATS.delta_binding],
      tokens: stats[STATS.tokens],
    },
    sequences: stats[STATS.sequences],
  };
  return { ...(arrays as unknown as Pick<GrpoLossReadback, K>), ...summary };
}

/** Everything (the CLI and the tests): every per-token array, the clip flags split, dlogits when asked for. */
export async function readGrpoLoss(gpu: Gpu, r: GrpoLossResult, opts: { dlogits?: boolean } = {}): Promise<GrpoLossReadback> {
  const [all, dlogits] = await Promise.all([readGrpoLossFields(gpu, r, LOSS_ARRAYS), opts.dlogits && r.dlogits ? gpu.readF32(r.dlogits, r.B * r.T * r.V) : null]);
  const clip = all.clip!;
  return {
    ...all,
    per_token_logps: all.per_token_logps!,
    lse: all.lse!,
    per_token_entropy: all.per_token_entropy!,
    importance_ratio: all.importance_ratio!,
    per_token_loss: all.per_token_loss!,
    clip,
    is_low_clipped: Uint8Array.from(clip, (f) => (f & CLIP_LOW ? 1 : 0)),
    is_high_clipped: Uint8Array.from(clip, (f) => (f & CLIP_HIGH ? 1 : 0)),
    dlogits,
  };
}
