// The sizes of the runtime's GPU buffers for a config at batch B × T: the activation tables model.ts
// allocates from (one source of truth for sizes), the backward's scratch, the device limits and the head's
// row chunk (src/model/head.ts). src/model/plan.ts adds them up into the memory plan of one step.
import type { ModelConfig } from './config.ts';

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
    proj: N * C, // (N, C) a LoRA-adapted o_proj / down_proj output before its residual add (unadapted ones add in their GEMM)
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
