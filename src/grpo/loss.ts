// The GRPO loss on the GPU, end to end, as one call: logits (B·T, V) → per-token log-probs, entropy,
// KL to the reference, importance ratio, per-token loss and clip flags (TRL GRPOTrainer._compute_loss),
// every aggregation at once, and (optionally) the gradient back to the logits for the chosen loss_type.
// Used by the `loss` CLI verb and by the step pipeline, which hands its logits buffer over directly
// (aligned so logits[b, t] scores completion_ids[b, t]): no CPU round trip until `readGrpoLoss`.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { kl_forward } from '../kernels/kl.ts';
import { logprob_gather_backward, logprob_gather_forward, type LogitsDtype } from '../kernels/logprob_gather.ts';
import { grpo_loss_backward, grpo_loss_forward } from '../kernels/grpo_loss.ts';
import { loss_reduce_forward, STATS } from '../kernels/loss_reduce.ts';
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

/** TRL's GRPOConfig defaults (epsilon_high defaults to epsilon; k3 is TRL's only estimator). */
export const DEFAULT_GRPO_LOSS_CONFIG: GrpoLossConfig = {
  loss_type: 'dapo',
  beta: 0,
  epsilon_low: 0.2,
  epsilon_high: 0.2,
  delta: null,
  temperature: 1,
  max_completion_length: 256,
  kl_estimator: 'k3',
  importance_sampling_level: 'token',
};

/** A loss config or loss input that cannot be run, with the field it is about. */
export class GrpoLossError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GrpoLossError';
  }
}

/** Validates a config read from JSON (a loss case's metadata, a batch file, the UI). */
export function parseGrpoLossConfig(raw: unknown, where = 'config'): GrpoLossConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new GrpoLossError(`${where}: expected an object`);
  const o = raw as Record<string, unknown>;
  const num = (k: string, ok: (x: number) => boolean, what: string): number => {
    const v = o[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw new GrpoLossError(`${where}.${k}: expected ${what}, got ${JSON.stringify(v)}`);
    return v;
  };
  const oneOf = <T extends string>(k: string, options: readonly T[]): T => {
    const v = o[k];
    if (!options.includes(v as T)) throw new GrpoLossError(`${where}.${k}: expected one of ${options.join(', ')}, got ${JSON.stringify(v)}`);
    return v as T;
  };
  const cfg: GrpoLossConfig = {
    loss_type: oneOf('loss_type', AGGREGATIONS),
    beta: num('beta', (x) => x >= 0, 'a number >= 0'),
    epsilon_low: num('epsilon_low', (x) => x >= 0 && x < 1, 'a number in [0, 1)'),
    epsilon_high: num('epsilon_high', (x) => x >= 0, 'a number >= 0'),
    delta: o.delta === null || o.delta === undefined ? null : num('delta', (x) => x > 0, 'null or a number > 0'),
    temperature: num('temperature', (x) => x > 0, 'a number > 0'),
    max_completion_length: num('max_completion_length', (x) => Number.isInteger(x) && x > 0, 'a positive integer'),
    kl_estimator: oneOf('kl_estimator', ['k1', 'k2', 'k3'] as const),
    importance_sampling_level: oneOf('importance_sampling_level', ['token', 'sequence'] as const),
  };
  if (o.num_items_in_batch !== undefined && o.num_items_in_batch !== null) cfg.num_items_in_batch = num('num_items_in_batch', (x) => x > 0, 'a number > 0');
  return cfg;
}

export interface GrpoLossInputs {
  B: number;
  T: number;
  V: number;
  logits: GPUBuffer; // (B·T, V): logits[b, t] scores completion_ids[b, t]
  logitsDtype?: LogitsDtype;
  completion_ids: GPUBuffer; // (B, T) i32
  completion_mask: GPUBuffer; // (B, T) i32, 1 on completion tokens
  advantages: GPUBuffer; // (B) f32
  /** Absent: old = per_token_logps.detach() (TRL with one iteration per generation): r = 1, gradient intact. */
  old_per_token_logps?: GPUBuffer | null; // (B, T)
  /** Absent: no KL (then beta must be 0). */
  ref_per_token_logps?: GPUBuffer | null; // (B, T)
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
  dlogits: GPUBuffer | null; // (B·T, V); the logits buffer itself when in place
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
  checkSize('logits', inputs.logits, N * V * (dtype === 'f16' ? 2 : 4));
  checkSize('completion_ids', inputs.completion_ids, N * 4);
  checkSize('completion_mask', inputs.completion_mask, N * 4);
  checkSize('advantages', inputs.advantages, B * 4);
  if (inputs.old_per_token_logps) checkSize('old_per_token_logps', inputs.old_per_token_logps, N * 4);
  if (inputs.ref_per_token_logps) checkSize('ref_per_token_logps', inputs.ref_per_token_logps, N * 4);
  if (config.beta !== 0 && !inputs.ref_per_token_logps) throw new GrpoLossError(`beta = ${config.beta} needs ref_per_token_logps`);
  const backward = opts.backward ?? true;
  const inPlace = opts.dlogits === 'in-place';
  if (backward && inPlace && dtype !== 'f32') throw new GrpoLossError('in-place dlogits needs f32 logits');

  const created: GPUBuffer[] = [];
  const buf = (label: string, bytes: number): GPUBuffer => {
    const b = gpu.createBuffer(label, bytes);
    created.push(b);
    return b;
  };
  const out = {
    per_token_logps: buf('per_token_logps', N * 4),
    lse: buf('lse', N * 8),
    per_token_entropy: buf('per_token_entropy', N * 4),
    per_token_kl: inputs.ref_per_token_logps ? buf('per_token_kl', N * 4) : null,
    importance_ratio: buf('importance_ratio', N * 4),
    per_token_loss: buf('per_token_loss', N * 4),
    clip: buf('clip', N * 4),
    stats: buf('loss_stats', STATS.size * 4),
    dlogp: backward ? buf('dlogp', N * 4) : null,
    token_weight: backward ? buf('token_weight', N * 4) : null,
    dlogits: backward ? (inPlace ? inputs.logits : buf('dlogits', N * V * 4)) : null,
  };

  const rec = opts.rec ?? gpu.recorder('grpo_loss');
  const common = { B, T, mask: inputs.completion_mask, advantages: inputs.advantages };
  logprob_gather_forward(rec, {
    logits: inputs.logits,
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
  if (out.per_token_kl && inputs.ref_per_token_logps) {
    kl_forward(rec, { logp: out.per_token_logps, refLogp: inputs.ref_per_token_logps, kl: out.per_token_kl, n: N, estimator: config.kl_estimator });
  }
  grpo_loss_forward(rec, {
    ...common,
    logp: out.per_token_logps,
    oldLogp: inputs.old_per_token_logps ?? out.per_token_logps,
    kl: out.per_token_kl ?? gpu.zeros(N * 4),
    loss: out.per_token_loss,
    ratio: out.importance_ratio,
    clip: out.clip,
    params: config,
  });
  loss_reduce_forward(rec, { ...common, loss: out.per_token_loss, clip: out.clip, out: out.stats, ...config });
  if (out.dlogp && out.token_weight && out.dlogits) {
    grpo_loss_backward(rec, {
      ...common,
      logp: out.per_token_logps,
      refLogp: inputs.ref_per_token_logps ?? out.per_token_logps,
      ratio: out.importance_ratio,
      stats: out.stats,
      dlogp: out.dlogp,
      token_weight: out.token_weight,
      params: config,
    });
    logprob_gather_backward(rec, {
      logits: inputs.logits,
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

export async function readGrpoLoss(gpu: Gpu, r: GrpoLossResult, opts: { dlogits?: boolean } = {}): Promise<GrpoLossReadback> {
  const N = r.B * r.T;
  const f32 = (b: GPUBuffer, n = N) => gpu.readF32(b, n);
  const [logp, lse, ent, kl, ratio, loss, clip, stats, dlogp, token_weight, dlogits] = await Promise.all([
    f32(r.per_token_logps),
    f32(r.lse, 2 * N),
    f32(r.per_token_entropy),
    r.per_token_kl ? f32(r.per_token_kl) : null,
    f32(r.importance_ratio),
    f32(r.per_token_loss),
    gpu.readU32(r.clip, N),
    f32(r.stats, STATS.size),
    r.dlogp ? f32(r.dlogp) : null,
    r.token_weight ? f32(r.token_weight) : null,
    opts.dlogits && r.dlogits ? f32(r.dlogits, N * r.V) : null,
  ]);
  const losses = Object.fromEntries(AGGREGATIONS.map((a, i) => [a, stats[i]])) as Record<LossType, number>;
  return {
    per_token_logps: logp,
    lse,
    per_token_entropy: ent,
    per_token_kl: kl,
    importance_ratio: ratio,
    per_token_loss: loss,
    is_low_clipped: Uint8Array.from(clip, (f) => (f & CLIP_LOW ? 1 : 0)),
    is_high_clipped: Uint8Array.from(clip, (f) => (f & CLIP_HIGH ? 1 : 0)),
    clip,
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
    dlogp,
    token_weight,
    dlogits,
  };
}

