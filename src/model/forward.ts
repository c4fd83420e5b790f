// The causal LM's forward pass as kernel launches (llm.c's gpt2_forward): embedding → per layer norm,
// attention (RoPE / QK-norm for Llama and Qwen, fused QKV for GPT-2), residual, norm, MLP, residual →
// final norm → LM head on the kept rows. The two residual adds are the epilogues of the o_proj / c_proj and
// down_proj GEMMs (LayerOps.linear), or a kernel of their own after a LoRA-adapted projection. Shapes:
// N = B·T rows, C hidden, V vocab, Hq / Hkv heads of size D, I the MLP width. Also the forward's input types
// and their validation.
import type { Recorder } from '../gpu/context.ts';
import { attention_forward } from '../kernels/attention.ts';
import { column_copy_forward } from '../kernels/column_copy.ts';
import { embedding_forward } from '../kernels/embedding.ts';
import { gelu_forward } from '../kernels/gelu.ts';
import { matmul_forward } from '../kernels/matmul.ts';
import { rmsnorm_forward } from '../kernels/rmsnorm.ts';
import { rope_forward } from '../kernels/rope.ts';
import { silu_gate_forward } from '../kernels/silu_gate.ts';
import { lmHeadName, type ModelConfig } from './config.ts';
import type { KVCache } from './kv_cache.ts';
import type { LayerOps } from './layer_ops.ts';
import type { Workspace } from './workspace.ts';

export interface ForwardInputs {
  B: number;
  T: number;
  input_ids: Int32Array; // (B, T)
  attention_mask: Int32Array; // (B, T) 1 = real token
  position_ids: Int32Array; // (B, T)
}

export interface ForwardOptions {
  /**
   * Score only the last `logits_to_keep` tokens of each row, TRL-style: the head runs on hidden rows
   * T−k−1 … T−2, so logits row b·k + t scores input_ids[b, T−k+t] (aligned with completion_ids).
   * (HF's `logits_to_keep = k + 1` followed by TRL's `logits[:, :-1]`.)
   */
  logits_to_keep?: number;
  /** Keep every layer's activations for `backward` (default: one set reused by every layer). */
  save?: boolean;
  /**
   * Incremental decoding (src/model/kv_cache.ts): the T new tokens' keys / values are appended to the
   * cache and attend over every cached position; attention_mask is the new tokens' (B, T) mask. The
   * head scores only each row's last position (next-token logits, rows = B). No backward.
   */
  kvCache?: KVCache;
  /** Stop before the head: no (rows, V) logits buffer; the caller runs the head on row chunks of `hidden` (src/model/head.ts). */
  headless?: boolean;
  /**
   * Token ids already on the GPU (B·T i32 at a byte offset), copied over input_ids when the recorded work
   * runs: decoding feeds the ids the GPU sampler wrote without reading them back (input_ids then only
   * needs valid placeholder ids).
   */
  idsFrom?: { buffer: GPUBuffer; offset: number };
}

export interface ForwardResult {
  logits: GPUBuffer; // (rows, V), overwritten by the next forward (headless: an empty placeholder)
  hidden: GPUBuffer; // (rows, C) the head's input (final-norm rows the head scores)
  rows: number; // B·T, or B·logits_to_keep
  V: number;
  B: number;
  T: number;
}

/** One incremental-decoding call: the cache, where the new positions start, and the keys attended over. */
export interface KvStep {
  cache: KVCache;
  t0: number;
  Tk: number;
}

/** Validates the shapes and token / position ranges of a forward's inputs (named sample and position on failure). */
export function checkInputs(cfg: ModelConfig, x: ForwardInputs, keep: number): void {
  const { B, T } = x;
  if (!Number.isInteger(B) || !Number.isInteger(T) || B < 1 || T < 1) throw new RangeError(`forward: B = ${B}, T = ${T} must be positive integers`);
  for (const f of ['input_ids', 'attention_mask', 'position_ids'] as const) {
    if (x[f].length !== B * T) throw new RangeError(`forward: ${f} has ${x[f].length} elements, expected B·T = ${B * T}`);
  }
  if (keep && (!Number.isInteger(keep) || keep < 1 || keep >= T)) throw new RangeError(`forward: logits_to_keep = ${keep} must be in [1, T − 1 = ${T - 1}]`);
  const maxPos = cfg.rope_theta === null ? cfg.max_position_embeddings : Infinity;
  for (let i = 0; i < B * T; i++) {
    const id = x.input_ids[i];
    const pos = x.position_ids[i];
    const at = () => `sample ${Math.floor(i / T)}, position ${i % T}`;
    if (id < 0 || id >= cfg.vocab_size) throw new RangeError(`forward: input_ids ${at()}: token ${id} is outside the vocabulary [0, ${cfg.vocab_size})`);
    if (pos < 0 || pos >= maxPos) throw new RangeError(`forward: position_ids ${at()}: ${pos} is outside [0, ${maxPos})`);
  }
}

/**
 * Records embedding → layers → final norm → head into `rec` over the inputs already written to
 * ws.shared (ids, mask, pos); keeps ws.keep rows per sample (with a KV cache, each row's last position).
 */
export function recordForward(rec: Recorder, ops: LayerOps, ws: Workspace, kv?: KvStep): ForwardResult {
  const cfg = ops.config;
  const { B, T, keep } = ws;
  const N = B * T;
  const { hidden_size: C, vocab_size: V } = cfg;
  const s = ws.shared;
  const cache = kv?.cache;
  const gpt2 = cfg.family === 'gpt2';
  embedding_forward(rec, {
    out: ws.residIn(0),
    ids: s.ids,
    wte: ops.w(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'),
    wteDtype: ops.dt(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'),
    wpe: gpt2 ? ops.w('transformer.wpe.weight') : undefined,
    positionIds: gpt2 ? s.pos : undefined,
    N,
    C,
    V,
    P: gpt2 ? cfg.max_position_embeddings : undefined,
  });
  for (let l = 0; l < cfg.num_hidden_layers; l++) layerForward(rec, ops, ws, l, kv);

  const last = ws.residOut(cfg.num_hidden_layers - 1);
  ops.norm(rec, ops.normName('final'), s.lnf, last, s.lnf_mean, s.lnf_rstd, N);
  let headIn = s.lnf;
  if (keep) {
    // Row b·keep + t of lnf_kept is hidden row b·T + (T − keep − 1 + t): one contiguous block per sample.
    // With a KV cache the one kept row is the last position itself (it predicts the next token).
    const first = cache ? T - 1 : T - keep - 1;
    for (let b = 0; b < B; b++) rec.copy(s.lnf, (b * T + first) * C * 4, s.lnf_kept, b * keep * C * 4, keep * C * 4);
    headIn = s.lnf_kept;
  }
  const rows = ws.rows;
  if (!ws.headless) recordHead(rec, ops, s.logits, headIn, rows);
  return { logits: s.logits, hidden: headIn, rows, V, B, T };
}

/** logits (rows, V) = hidden (rows, C) · headᵀ: the LM head, also run on row chunks (src/model/head.ts). */
export function recordHead(rec: Recorder, ops: LayerOps, logits: GPUBuffer, hidden: GPUBuffer, rows: number): void {
  const { hidden_size: C, vocab_size: V } = ops.config;
  const head = lmHeadName(ops.config);
  matmul_forward(rec, { out: logits, inp: hidden, weight: ops.w(head), M: rows, K: C, N: V, weightLayout: 'out_in', weightDtype: ops.dt(head) });
}

/** Layer l's forward from ws.residIn(l); recordBackward re-runs it under gradient checkpointing. */
export function layerForward(rec: Recorder, ops: LayerOps, ws: Workspace, l: number, kv?: KvStep): void {
  const cfg = ops.config;
  const { B, T } = ws;
  const N = B * T;
  const { hidden_size: C, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
  const a = ws.layers[l];
  const s = ws.shared;
  const x = ws.residIn(l);
  const y = ws.residOut(l);
  const p = ops.layerPrefix(l);

  ops.norm(rec, ops.normName('ln1', l), a.ln1, x, a.ln1_mean, a.ln1_rstd, N);
  if (cfg.family === 'gpt2') {
    ops.linear(rec, `${p}.attn.c_attn`, s.qkv, a.ln1, N, C, 3 * C);
    ['q', 'k', 'v'].forEach((t, i) => column_copy_forward(rec, { dst: a[t], src: s.qkv, rows: N, cols: C, srcLd: 3 * C, srcCol: i * C, dstLd: C, dstCol: 0 }));
  } else {
    ops.linear(rec, `${p}.self_attn.q_proj`, cfg.qk_norm ? a.q_raw : a.q, a.ln1, N, C, Hq * D);
    ops.linear(rec, `${p}.self_attn.k_proj`, cfg.qk_norm ? a.k_raw : a.k, a.ln1, N, C, Hkv * D);
    ops.linear(rec, `${p}.self_attn.v_proj`, a.v, a.ln1, N, C, Hkv * D);
    if (cfg.qk_norm) {
      const eps = cfg.norm_eps;
      rmsnorm_forward(rec, { out: a.q, rstd: a.q_rstd, inp: a.q_raw, weight: ops.w(`${p}.self_attn.q_norm.weight`), N: N * Hq, C: D, eps });
      rmsnorm_forward(rec, { out: a.k, rstd: a.k_rstd, inp: a.k_raw, weight: ops.w(`${p}.self_attn.k_norm.weight`), N: N * Hkv, C: D, eps });
    }
    const rope = { positionIds: s.pos, N, D, theta: cfg.rope_theta!, scaling: cfg.rope_scaling };
    rope_forward(rec, { x: a.q, H: Hq, k: a.k, Hk: Hkv, ...rope });
  }
  if (kv) {
    // Append the new k / v rows (B, T, Hkv, D) at column t0 of the cache (B, TkvMax, Hkv, D).
    const row = Hkv * D * 4;
    for (let b = 0; b < B; b++) {
      rec.copy(a.k, b * T * row, kv.cache.k[l], (b * kv.cache.TkvMax + kv.t0) * row, T * row);
      rec.copy(a.v, b * T * row, kv.cache.v[l], (b * kv.cache.TkvMax + kv.t0) * row, T * row);
    }
  }
  const Tk = kv ? kv.Tk : T;
  attention_forward(rec, {
    out: a.atty,
    q: a.q,
    k: kv ? kv.cache.k[l] : a.k,
    v: kv ? kv.cache.v[l] : a.v,
    attentionMask: kv ? kv.cache.mask : s.mask,
    lse: a.lse,
    B,
    Tq: T,
    Tk,
    TkvMax: kv ? kv.cache.TkvMax : T,
    Hq,
    Hkv,
    D,
    scale: cfg.attn_scale,
  });
  ops.linear(rec, cfg.family === 'gpt2' ? `${p}.attn.c_proj` : `${p}.self_attn.o_proj`, a.resid_mid, a.atty, N, Hq * D, C, { x, proj: s.proj });

  ops.norm(rec, ops.normName('ln2', l), a.ln2, a.resid_mid, a.ln2_mean, a.ln2_rstd, N);
  if (cfg.mlp === 'gelu_new') {
    ops.linear(rec, `${p}.mlp.c_fc`, a.fch, a.ln2, N, C, I);
    gelu_forward(rec, { out: a.fch_gelu, inp: a.fch, n: N * I });
    ops.linear(rec, `${p}.mlp.c_proj`, y, a.fch_gelu, N, I, C, { x: a.resid_mid, proj: s.proj });
  } else {
    ops.linear(rec, `${p}.mlp.gate_proj`, a.gate, a.ln2, N, C, I);
    ops.linear(rec, `${p}.mlp.up_proj`, a.up, a.ln2, N, C, I);
    silu_gate_forward(rec, { out: a.h, gate: a.gate, up: a.up, n: N * I });
    ops.linear(rec, `${p}.mlp.down_proj`, y, a.h, N, I, C, { x: a.resid_mid, proj: s.proj });
  }
}
