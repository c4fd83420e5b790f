// The memory plan: every GPU buffer the runtime will allocate for a config at batch B × T, computed
// before any weight is read, so the UI and CLI can say "this will not fit" up front. The activation
// table below is the one model.ts allocates from (one source of truth for sizes), and each big buffer
// is checked against the adapter's maxBufferSize / maxStorageBufferBindingSize. The head runs in row
// chunks (src/model/head.ts), so the logits planned are one chunk, and dlogits are written over it.
import { countParams, type ModelConfig } from './config.ts';

/** Element counts of one layer's saved activations (f32). N = B·T rows. */
export function layerActivationSizes(cfg: ModelConfig, B: number, T: number): Record<string, number> {
  const N = B * T;
  const { hidden_size: C, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
  const s: Record<string, number> = {
    resid: N * C, // (N, C) layer input
    ln1: N * C, // (N, C)
    ln1_rstd: N, // (N)
    q: N * Hq * D, // (B, T, Hq, D) after RoPE
    k: N * Hkv * D, // (B, T, Hkv, D) after RoPE
    v: N * Hkv * D, // (B, T, Hkv, D)
    lse: B * Hq * T, // (B, Hq, T) attention log-sum-exp, all the fused backward keeps of the softmax
    atty: N * Hq * D, // (N, Hq·D) attention output before o_proj
    resid_mid: N * C, // (N, C) after the attention residual
    ln2: N * C, // (N, C)
    ln2_rstd: N, // (N)
  };
  if (cfg.norm === 'layernorm') Object.assign(s, { ln1_mean: N, ln2_mean: N });
  if (cfg.qk_norm) Object.assign(s, { q_raw: N * Hq * D, k_raw: N * Hkv * D, q_rstd: N * Hq, k_rstd: N * Hkv });
  if (cfg.mlp === 'gelu_new') Object.assign(s, { fch: N * I, fch_gelu: N * I });
  else Object.assign(s, { gate: N * I, up: N * I, h: N * I });
  return s;
}

/** Buffers shared by all layers in a forward: scratch outputs that are consumed at once, and the final norm. */
export function sharedActivationSizes(cfg: ModelConfig, B: number, T: number, keep: number, headless = false): Record<string, number> {
  const N = B * T;
  const rows = B * (keep || T);
  const C = cfg.hidden_size;
  const s: Record<string, number> = {
    ids: N, // (B, T) i32
    mask: N, // (B, T) i32
    pos: N, // (B, T) i32
    resid_out: N * C, // (N, C) last layer's output
    proj: N * C, // (N, C) o_proj / down_proj output before the residual add
    lnf: N * C, // (N, C)
    lnf_rstd: N,
    lnf_kept: keep ? rows * C : 0, // (rows, C) hidden rows the head scores (logits_to_keep only)
    logits: headless ? 0 : rows * cfg.vocab_size, // (rows, V); a headless forward leaves the head to its caller (chunked scoring)
  };
  if (cfg.norm === 'layernorm') s.lnf_mean = N;
  if (cfg.family === 'gpt2') s.qkv = N * 3 * C; // (N, 3C) c_attn output, split into q, k, v
  return s;
}

/** Gradient scratch for backward (reused by every layer). */
export function backwardScratchSizes(cfg: ModelConfig, B: number, T: number, keep: number): Record<string, number> {
  const N = B * T;
  const { hidden_size: C, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
  const s: Record<string, number> = {
    dresid: N * C, // (N, C) gradient of the residual stream
    dln: N * C, // (N, C) gradient of a norm output
    dpart: N * C, // (N, C) one contribution to dln / dresid before it is added
    dq: N * Hq * D,
    dk: N * Hkv * D,
    dv: N * Hkv * D,
    datty: N * Hq * D,
    dh: N * I, // (N, I) gradient of the MLP hidden (gelu / silu·up output)
    da: N * I, // (N, I) dfch (GPT-2) or dgate
    dup: N * I,
    dlnf_kept: keep ? B * keep * C : 0,
  };
  if (cfg.family === 'gpt2') s.dqkv = N * 3 * C;
  if (cfg.qk_norm) Object.assign(s, { dq_raw: N * Hq * D, dk_raw: N * Hkv * D });
  return s;
}

const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

export interface BufferLimits {
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
}

/** WebGPU's default limits (what an adapter guarantees before raising them). */
export const DEFAULT_LIMITS: BufferLimits = { maxBufferSize: 256 * 2 ** 20, maxStorageBufferBindingSize: 128 * 2 ** 20 };

/**
 * Bytes of one logits chunk at most: WebGPU's default binding size, even where the device binds more
 * (a chunk of a few hundred rows already fills a GPU; a bigger one only raises the peak).
 */
export const LOGITS_CHUNK_BYTES = DEFAULT_LIMITS.maxStorageBufferBindingSize;

/** Rows of one logits chunk: as many (V f32 each) as one storage binding (at most LOGITS_CHUNK_BYTES) holds, at most `rows`. */
export function logitsChunkRows(V: number, rows: number, maxBindingBytes: number): number {
  return Math.max(1, Math.min(rows, Math.floor(Math.min(maxBindingBytes, LOGITS_CHUNK_BYTES) / (V * 4))));
}

export interface MemoryPlan {
  model: string;
  params: number;
  B: number;
  T: number;
  /** Rows the head scores: B·T, or B·logits_to_keep. */
  rows: number;
  /** Rows of one logits chunk. */
  chunk_rows: number;
  bytes: {
    weights: number;
    reference_weights: number; // weights held beside the policy for the reference (the studio's frozen copy, a reference checkpoint), else 0
    grads: number;
    adamw: number; // exp_avg + exp_avg_sq
    activations_saved: number; // every layer's activations kept for backward
    activations_inference: number; // one layer's set, reused (scoring / sampling)
    backward_scratch: number;
    logits: number; // one chunk (R, V) of the head's rows (src/model/head.ts); dlogits are written over it
    logits_full: number; // (B·T, V) without logits_to_keep, if it were materialised
  };
  totals: {
    /** Scoring / generation: weights (+ reference weights) + one layer of activations + one logits chunk. */
    inference: number;
    /** One GRPO step with AdamW: weights (+ reference weights), grads, optimizer state, saved activations, one logits chunk (dlogits in place). */
    train: number;
  };
  /** The biggest single buffers, and those past a limit. */
  largest: { name: string; bytes: number }[];
  violations: { name: string; bytes: number; limit: keyof BufferLimits; value: number }[];
}

/**
 * The plan for `cfg` at batch B × T (logits_to_keep: completion width C, so rows = B·C); reference_bytes:
 * the reference's weights on the GPU besides the policy's (a frozen copy, a second checkpoint), as held.
 */
export function planMemory(cfg: ModelConfig, opts: { B: number; T: number; logits_to_keep?: number; limits?: BufferLimits; name?: string; reference_bytes?: number }): MemoryPlan {
  const { B, T } = opts;
  const limits = opts.limits ?? DEFAULT_LIMITS;
  const keep = opts.logits_to_keep ?? 0;
  const rows = B * (keep || T);
  const params = countParams(cfg);
  const F = 4;
  const layer = layerActivationSizes(cfg, B, T);
  const shared = sharedActivationSizes(cfg, B, T, keep);
  const { logits: _full, ...sharedRest } = shared;
  const R = logitsChunkRows(cfg.vocab_size, rows, limits.maxStorageBufferBindingSize);
  const scratch = backwardScratchSizes(cfg, B, T, keep);
  const bytes = {
    weights: params * F,
    reference_weights: opts.reference_bytes ?? 0,
    grads: params * F,
    adamw: 2 * params * F,
    activations_saved: (cfg.num_hidden_layers * sum(layer) + sum(sharedRest)) * F,
    activations_inference: (sum(layer) + sum(sharedRest)) * F,
    backward_scratch: sum(scratch) * F,
    logits: R * cfg.vocab_size * F,
    logits_full: B * T * cfg.vocab_size * F,
  };
  const totals = {
    inference: bytes.weights + bytes.reference_weights + bytes.activations_inference + bytes.logits,
    train: bytes.weights + bytes.reference_weights + bytes.grads + bytes.adamw + bytes.activations_saved + bytes.backward_scratch + bytes.logits,
  };
  const candidates: { name: string; bytes: number }[] = [
    { name: 'embedding (V, C)', bytes: cfg.vocab_size * cfg.hidden_size * F },
    { name: 'logits chunk (R, V)', bytes: bytes.logits },
    { name: 'mlp hidden (N, I)', bytes: B * T * cfg.intermediate_size * F },
    { name: 'residual (N, C)', bytes: B * T * cfg.hidden_size * F },
  ];
  if (cfg.family === 'gpt2') candidates.push({ name: 'qkv (N, 3C)', bytes: shared.qkv * F });
  candidates.sort((a, b) => b.bytes - a.bytes);
  const violations: MemoryPlan['violations'] = [];
  for (const c of candidates) {
    for (const limit of ['maxBufferSize', 'maxStorageBufferBindingSize'] as const) {
      if (c.bytes > limits[limit]) {
        violations.push({ name: c.name, bytes: c.bytes, limit, value: limits[limit] });
        break; // past maxBufferSize implies past the binding size too
      }
    }
  }
  return { model: opts.name ?? cfg.architecture, params, B, T, rows, chunk_rows: R, bytes, totals, largest: candidates, violations };
}

/** A short human summary (CLI / UI). */
export function formatPlan(p: MemoryPlan): string {
  const gib = (x: number) => `${(x / 2 ** 30).toFixed(2)} GiB`;
  const lines = [
    `${p.model}: ${(p.params / 1e6).toFixed(1)}M params, batch ${p.B}×${p.T}, ${p.rows} scored rows (logits in chunks of ${p.chunk_rows})`,
    `  weights ${gib(p.bytes.weights)}${p.bytes.reference_weights ? ` (+ ${gib(p.bytes.reference_weights)} reference)` : ''}, grads ${gib(p.bytes.grads)}, AdamW ${gib(p.bytes.adamw)}`,
    `  activations ${gib(p.bytes.activations_saved)} saved / ${gib(p.bytes.activations_inference)} inference, logits chunk ${gib(p.bytes.logits)} (full ${gib(p.bytes.logits_full)})`,
    `  total: inference ${gib(p.totals.inference)}, train step ${gib(p.totals.train)}`,
  ];
  for (const v of p.violations) lines.push(`  ! ${v.name} is ${gib(v.bytes)} > ${v.limit} ${gib(v.value)}`);
  return lines.join('\n');
}
