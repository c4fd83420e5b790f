// The causal LM on the GPU: GPT-2, Llama (SmolLM2), Qwen2 and Qwen3 with Hugging Face parameter names
// and layouts, forward to logits that stay on the GPU (so the loss kernels read them in place) and
// backward to every parameter's gradient. Structured like llm.c's gpt2_forward / gpt2_backward: one
// table of activation buffers (src/model/memory.ts says their sizes), a layer loop of kernel launches
// per pass, and the float64 twin of the whole thing in src/ref/model.ts.
//
// Shapes: B rows of T tokens, N = B·T, C hidden, V vocab, Hq / Hkv query / key-value heads of size D,
// I the MLP width. Every launch goes into the caller's Recorder: one submit can hold forward, loss
// and backward, with nothing read back in between.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { attention_backward, attention_forward } from '../kernels/attention.ts';
import { column_copy_forward } from '../kernels/column_copy.ts';
import { embedding_backward, embedding_forward } from '../kernels/embedding.ts';
import { gelu_backward, gelu_forward } from '../kernels/gelu.ts';
import { layernorm_backward, layernorm_forward } from '../kernels/layernorm.ts';
import { matmul_backward, matmul_forward, type WeightDtype, type WeightLayout } from '../kernels/matmul.ts';
import { bf16ToF32 } from '../io/safetensors.ts';
import { residual_forward } from '../kernels/residual.ts';
import { rmsnorm_backward, rmsnorm_forward } from '../kernels/rmsnorm.ts';
import { rope_backward, rope_forward } from '../kernels/rope.ts';
import { silu_gate_backward, silu_gate_forward } from '../kernels/silu_gate.ts';
import { lmHeadName, numel, paramGroups, paramSpecs, type ModelConfig, type Param, type ParamGroup } from './config.ts';
import { loadCheckpoint, type CheckpointInfo, type LoadOptions } from './loader.ts';
import type { LoraAdapter } from './lora_adapter.ts';
import { backwardScratchSizes, layerActivationSizes, sharedActivationSizes } from './memory.ts';
import type { ModelSource } from './source.ts';
import type { KVCache } from './kv_cache.ts';

export type { Param } from './config.ts';

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
}

export interface ForwardResult {
  logits: GPUBuffer; // (rows, V), overwritten by the next forward
  rows: number; // B·T, or B·logits_to_keep
  V: number;
  B: number;
  T: number;
}

type Buffers = Record<string, GPUBuffer>;

/** The activation buffers of one batch shape. Without `save`, every layer shares one set. */
class Workspace {
  readonly layers: Buffers[];
  readonly shared: Buffers;
  private scratch: Buffers | null = null;
  private readonly owned: GPUBuffer[] = [];

  constructor(
    private readonly gpu: Gpu,
    readonly cfg: ModelConfig,
    readonly B: number,
    readonly T: number,
    readonly keep: number, // 0: every row
    readonly save: boolean,
  ) {
    this.shared = this.alloc('shared', sharedActivationSizes(cfg, B, T, keep));
    const sizes = layerActivationSizes(cfg, B, T);
    const one = save ? null : this.alloc('layer', sizes);
    this.layers = Array.from({ length: cfg.num_hidden_layers }, (_, l) => one ?? this.alloc(`layers.${l}`, sizes));
  }

  get rows(): number {
    return this.B * (this.keep || this.T);
  }

  private alloc(prefix: string, sizes: Record<string, number>): Buffers {
    const out: Buffers = {};
    for (const [name, elems] of Object.entries(sizes)) {
      const buf = this.gpu.createBuffer(`${prefix}.${name}`, elems * 4);
      this.owned.push(buf);
      out[name] = buf;
    }
    return out;
  }

  /** Gradient scratch, allocated on the first backward. */
  grads(): Buffers {
    this.scratch ??= this.alloc('grad', backwardScratchSizes(this.cfg, this.B, this.T, this.keep));
    return this.scratch;
  }

  /** The residual stream entering layer l (the embedding output for l = 0). */
  residIn(l: number): GPUBuffer {
    if (this.save || l % 2 === 0) return this.layers[l].resid;
    return this.shared.resid_out;
  }

  /** The residual stream leaving layer l: without `save` the stream ping-pongs between two buffers. */
  residOut(l: number): GPUBuffer {
    if (this.save) return l + 1 < this.layers.length ? this.layers[l + 1].resid : this.shared.resid_out;
    return l % 2 === 0 ? this.shared.resid_out : this.layers[0].resid;
  }

  matches(B: number, T: number, keep: number, save: boolean): boolean {
    return this.B === B && this.T === T && this.keep === keep && this.save === save;
  }

  destroy(): void {
    for (const b of this.owned) b.destroy();
  }
}

/** Validates the shapes and token / position ranges of a forward's inputs (named sample and position on failure). */
function checkInputs(cfg: ModelConfig, x: ForwardInputs, keep: number): void {
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

/** Weights only matmuls read (every 2-D weight but the embeddings, which a gather reads): these may stay packed bf16. */
const isMatmulWeight = (name: string, shape: number[]) => shape.length === 2 && !/(wte|wpe|embed_tokens)\.weight$/.test(name);

/** Norm weights and biases: the only base parameters whose gradient a backward under a LoRA adapter still writes (their kernels need a target). */
const isNormParam = (name: string) => /(norm|ln_[12f])\.(weight|bias)$/.test(name);

export class CausalLM {
  readonly params: Map<string, Param>;
  /** Gradient of every parameter (same names, same layouts), allocated by the first backward. */
  grads: Map<string, GPUBuffer> | null = null;
  /** A PEFT LoRA adapter on the linear layers: when set, only it trains (the base weights are frozen). */
  adapter: LoraAdapter | null = null;
  private ws: Workspace | null = null;
  private forwarded = false;

  private constructor(
    readonly gpu: Gpu,
    readonly config: ModelConfig,
    params: Map<string, Param>,
    readonly info: CheckpointInfo | null,
    /** false for a view made by withAdapter: the weights belong to the model it was made from. */
    private readonly ownsParams = true,
  ) {
    this.params = params;
  }

  /**
   * The same base weights (shared, not copied) with another adapter or none, and a workspace of its own:
   * the LoRA reference (adapter disabled, or a frozen copy of the adapter). Destroying the view frees only
   * its workspace and gradients; the caller keeps ownership of `adapter`.
   */
  withAdapter(adapter: LoraAdapter | null): CausalLM {
    const view = new CausalLM(this.gpu, this.config, this.params, this.info, false);
    view.adapter = adapter;
    return view;
  }

  /** What an optimizer steps: the adapter's A and B when one is attached, else every parameter. */
  get trainableParams(): Map<string, Param> {
    return this.adapter ? this.adapter.params : this.params;
  }

  /** The gradients of trainableParams (same names), after a backward. */
  get trainableGrads(): Map<string, GPUBuffer> | null {
    return this.adapter ? this.adapter.grads : this.grads;
  }

  /** Loads a Hugging Face checkpoint (folder, dropped files or Hub) onto the GPU. */
  static async from_pretrained(source: ModelSource, gpu: Gpu, opts: LoadOptions = {}): Promise<CausalLM> {
    const params = new Map<string, Param>();
    try {
      const info = await loadCheckpoint(
        source,
        (spec, data, stored) => {
          const bf16 = opts.storage === 'checkpoint' && stored.dtype === 'BF16' && isMatmulWeight(spec.name, spec.shape);
          params.set(spec.name, bf16 ? { ...spec, dtype: 'bf16', buffer: gpu.upload(spec.name, stored.bytes) } : { ...spec, buffer: gpu.upload(spec.name, data) });
        },
        opts,
      );
      return new CausalLM(gpu, info.config, params, info);
    } catch (e) {
      for (const p of params.values()) p.buffer.destroy();
      throw e;
    }
  }

  /** A model from in-memory weights (tests, benchmarks): every parameter of `paramSpecs(config)` must be given. */
  static fromWeights(gpu: Gpu, config: ModelConfig, weights: Record<string, Float32Array>): CausalLM {
    const params = new Map<string, Param>();
    for (const spec of paramSpecs(config)) {
      const data = weights[spec.name];
      if (!data || data.length !== numel(spec.shape)) throw new RangeError(`fromWeights: "${spec.name}" needs ${numel(spec.shape)} values, got ${data?.length ?? 'none'}`);
      params.set(spec.name, { ...spec, buffer: gpu.upload(spec.name, data) });
    }
    return new CausalLM(gpu, config, params, null);
  }

  /** Parameter names by group: embedding, each layer's attention / MLP / norms, the final norm, an untied head. */
  paramGroups(): Map<ParamGroup, string[]> {
    return paramGroups(this.config);
  }

  private w(name: string): GPUBuffer {
    const p = this.params.get(name);
    if (!p) throw new Error(`no parameter "${name}"`);
    return p.buffer;
  }

  /** How a weight is stored: f32, or packed bf16 (loaded with storage 'checkpoint'; frozen). */
  private dt(name: string): WeightDtype {
    return this.params.get(name)?.dtype ?? 'f32';
  }

  private wOpt(name: string): GPUBuffer | undefined {
    return this.params.get(name)?.buffer;
  }

  private g(name: string): GPUBuffer {
    const g = this.grads?.get(name);
    if (!g) throw new Error(`no gradient for "${name}"`);
    return g;
  }

  private gOpt(name: string): GPUBuffer | undefined {
    return this.grads?.get(name);
  }

  /** The gradient of a weight that trains unless an adapter freezes the base (undefined then: the kernel skips it). */
  private gBase(name: string): GPUBuffer | undefined {
    return this.adapter ? undefined : this.gOpt(name);
  }

  private workspace(B: number, T: number, keep: number, save: boolean): Workspace {
    if (!this.ws?.matches(B, T, keep, save)) {
      this.ws?.destroy();
      this.ws = new Workspace(this.gpu, this.config, B, T, keep, save);
    }
    return this.ws;
  }

  // ------------------------------------------------------------------ names per family

  private layerPrefix(l: number): string {
    return this.config.family === 'gpt2' ? `transformer.h.${l}` : `model.layers.${l}`;
  }

  /** Norm weight / bias names: ln1 before attention, ln2 before the MLP, final after the last layer. */
  private normName(which: 'ln1' | 'ln2' | 'final', l = 0): string {
    const gpt2 = this.config.family === 'gpt2';
    if (which === 'final') return gpt2 ? 'transformer.ln_f' : 'model.norm';
    const p = this.layerPrefix(l);
    if (gpt2) return `${p}.${which === 'ln1' ? 'ln_1' : 'ln_2'}`;
    return `${p}.${which === 'ln1' ? 'input_layernorm' : 'post_attention_layernorm'}`;
  }

  private get layout(): WeightLayout {
    return this.config.family === 'gpt2' ? 'in_out' : 'out_in';
  }

  // ------------------------------------------------------------------ building blocks

  private linear(rec: Recorder, name: string, out: GPUBuffer, inp: GPUBuffer, M: number, K: number, N: number): void {
    const weightDtype = this.dt(`${name}.weight`);
    matmul_forward(rec, { out, inp, weight: this.w(`${name}.weight`), bias: this.wOpt(`${name}.bias`), M, K, N, weightLayout: this.layout, weightDtype });
    if (this.adapter?.has(name)) this.adapter.forward(rec, name, out, inp, M);
  }

  private linearBackward(rec: Recorder, name: string, dinp: GPUBuffer, dout: GPUBuffer, inp: GPUBuffer, M: number, K: number, N: number, accumulateDinp = false): void {
    matmul_backward(rec, {
      dinp,
      dweight: this.gBase(`${name}.weight`),
      dbias: this.gBase(`${name}.bias`),
      dout,
      inp,
      weight: this.w(`${name}.weight`),
      M,
      K,
      N,
      weightLayout: this.layout,
      weightDtype: this.dt(`${name}.weight`),
      accumulate: true,
      accumulateDinp,
    });
    if (this.adapter?.has(name)) this.adapter.backward(rec, name, dinp, dout, inp, M);
  }

  private norm(rec: Recorder, name: string, out: GPUBuffer, inp: GPUBuffer, mean: GPUBuffer | undefined, rstd: GPUBuffer, N: number): void {
    const { hidden_size: C, norm_eps: eps } = this.config;
    const weight = this.w(`${name}.weight`);
    if (this.config.norm === 'layernorm') layernorm_forward(rec, { out, mean: mean!, rstd, inp, weight, bias: this.w(`${name}.bias`), N, C, eps });
    else rmsnorm_forward(rec, { out, rstd, inp, weight, N, C, eps });
  }

  /** dinp (+)= ∂/∂inp of the norm; weight (and bias) gradients accumulate. */
  private normBackward(rec: Recorder, name: string, dinp: GPUBuffer, dout: GPUBuffer, inp: GPUBuffer, mean: GPUBuffer | undefined, rstd: GPUBuffer, N: number, accumulateDinp: boolean): void {
    const C = this.config.hidden_size;
    const common = { dinp, dweight: this.g(`${name}.weight`), dout, inp, weight: this.w(`${name}.weight`), rstd, N, C, accumulate: true, accumulateDinp };
    if (this.config.norm === 'layernorm') layernorm_backward(rec, { ...common, dbias: this.g(`${name}.bias`), mean: mean! });
    else rmsnorm_backward(rec, common);
  }

  // ------------------------------------------------------------------ forward

  /**
   * Records the forward pass into `rec` and returns the logits buffer (filled once `rec` is submitted).
   * Inputs are written to the GPU now, so record one forward per model per submit.
   */
  forward(rec: Recorder, x: ForwardInputs, opts: ForwardOptions = {}): ForwardResult {
    const cfg = this.config;
    const cache = opts.kvCache;
    if (cache && (opts.save || opts.logits_to_keep !== undefined)) throw new RangeError('forward: kvCache cannot be combined with save or logits_to_keep');
    if (cache && cache.B !== x.B) throw new RangeError(`forward: kvCache holds ${cache.B} rows, input has B = ${x.B}`);
    const keep = cache ? 1 : (opts.logits_to_keep ?? 0);
    checkInputs(cfg, x, cache ? 0 : keep);
    const { B, T } = x;
    const N = B * T;
    const { hidden_size: C, vocab_size: V } = cfg;
    const ws = this.workspace(B, T, keep, opts.save ?? false);
    const s = ws.shared;
    this.gpu.write(s.ids, x.input_ids);
    this.gpu.write(s.mask, x.attention_mask);
    this.gpu.write(s.pos, x.position_ids);

    const gpt2 = cfg.family === 'gpt2';
    embedding_forward(rec, {
      out: ws.residIn(0),
      ids: s.ids,
      wte: this.w(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'),
      wpe: gpt2 ? this.w('transformer.wpe.weight') : undefined,
      positionIds: gpt2 ? s.pos : undefined,
      N,
      C,
      V,
      P: gpt2 ? cfg.max_position_embeddings : undefined,
    });
    const kv = cache ? { cache, ...cache.append(x.attention_mask, T) } : undefined;
    for (let l = 0; l < cfg.num_hidden_layers; l++) this.layerForward(rec, ws, l, kv);

    const last = ws.residOut(cfg.num_hidden_layers - 1);
    this.norm(rec, this.normName('final'), s.lnf, last, s.lnf_mean, s.lnf_rstd, N);
    let headIn = s.lnf;
    if (keep) {
      // Row b·keep + t of lnf_kept is hidden row b·T + (T − keep − 1 + t): one contiguous block per sample.
      // With a KV cache the one kept row is the last position itself (it predicts the next token).
      const first = cache ? T - 1 : T - keep - 1;
      for (let b = 0; b < B; b++) rec.copy(s.lnf, (b * T + first) * C * 4, s.lnf_kept, b * keep * C * 4, keep * C * 4);
      headIn = s.lnf_kept;
    }
    const rows = ws.rows;
    const head = lmHeadName(cfg);
    matmul_forward(rec, { out: s.logits, inp: headIn, weight: this.w(head), M: rows, K: C, N: V, weightLayout: 'out_in', weightDtype: this.dt(head) });
    this.forwarded = true;
    return { logits: s.logits, rows, V, B, T };
  }

  private layerForward(rec: Recorder, ws: Workspace, l: number, kv?: { cache: KVCache; t0: number; Tk: number }): void {
    const cfg = this.config;
    const { B, T } = ws;
    const N = B * T;
    const { hidden_size: C, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
    const a = ws.layers[l];
    const s = ws.shared;
    const x = ws.residIn(l);
    const y = ws.residOut(l);
    const p = this.layerPrefix(l);

    this.norm(rec, this.normName('ln1', l), a.ln1, x, a.ln1_mean, a.ln1_rstd, N);
    if (cfg.family === 'gpt2') {
      this.linear(rec, `${p}.attn.c_attn`, s.qkv, a.ln1, N, C, 3 * C);
      ['q', 'k', 'v'].forEach((t, i) => column_copy_forward(rec, { dst: a[t], src: s.qkv, rows: N, cols: C, srcLd: 3 * C, srcCol: i * C, dstLd: C, dstCol: 0 }));
    } else {
      this.linear(rec, `${p}.self_attn.q_proj`, cfg.qk_norm ? a.q_raw : a.q, a.ln1, N, C, Hq * D);
      this.linear(rec, `${p}.self_attn.k_proj`, cfg.qk_norm ? a.k_raw : a.k, a.ln1, N, C, Hkv * D);
      this.linear(rec, `${p}.self_attn.v_proj`, a.v, a.ln1, N, C, Hkv * D);
      if (cfg.qk_norm) {
        const eps = cfg.norm_eps;
        rmsnorm_forward(rec, { out: a.q, rstd: a.q_rstd, inp: a.q_raw, weight: this.w(`${p}.self_attn.q_norm.weight`), N: N * Hq, C: D, eps });
        rmsnorm_forward(rec, { out: a.k, rstd: a.k_rstd, inp: a.k_raw, weight: this.w(`${p}.self_attn.k_norm.weight`), N: N * Hkv, C: D, eps });
      }
      const rope = { positionIds: s.pos, N, D, theta: cfg.rope_theta!, scaling: cfg.rope_scaling };
      rope_forward(rec, { x: a.q, H: Hq, ...rope });
      rope_forward(rec, { x: a.k, H: Hkv, ...rope });
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
      att: kv ? kv.cache.att(B * Hq * T * Tk) : a.att,
      B,
      Tq: T,
      Tk,
      TkvMax: kv ? kv.cache.TkvMax : T,
      Hq,
      Hkv,
      D,
      scale: cfg.attn_scale,
    });
    this.linear(rec, cfg.family === 'gpt2' ? `${p}.attn.c_proj` : `${p}.self_attn.o_proj`, s.proj, a.atty, N, Hq * D, C);
    residual_forward(rec, { out: a.resid_mid, a: x, b: s.proj, n: N * C });

    this.norm(rec, this.normName('ln2', l), a.ln2, a.resid_mid, a.ln2_mean, a.ln2_rstd, N);
    if (cfg.mlp === 'gelu_new') {
      this.linear(rec, `${p}.mlp.c_fc`, a.fch, a.ln2, N, C, I);
      gelu_forward(rec, { out: a.fch_gelu, inp: a.fch, n: N * I });
      this.linear(rec, `${p}.mlp.c_proj`, s.proj, a.fch_gelu, N, I, C);
    } else {
      this.linear(rec, `${p}.mlp.gate_proj`, a.gate, a.ln2, N, C, I);
      this.linear(rec, `${p}.mlp.up_proj`, a.up, a.ln2, N, C, I);
      silu_gate_forward(rec, { out: a.h, gate: a.gate, up: a.up, n: N * I });
      this.linear(rec, `${p}.mlp.down_proj`, s.proj, a.h, N, I, C);
    }
    residual_forward(rec, { out: y, a: a.resid_mid, b: s.proj, n: N * C });
  }

  // ------------------------------------------------------------------ backward

  /** Allocates (once) a zeroed gradient buffer per parameter (under an adapter: per norm parameter, see isNormParam). */
  private ensureGrads(rec: Recorder): Map<string, GPUBuffer> {
    if (!this.grads) {
      this.grads = new Map();
      for (const p of this.params.values()) {
        if (this.adapter && !isNormParam(p.name)) continue;
        const g = this.gpu.createBuffer(`grad.${p.name}`, numel(p.shape) * 4);
        rec.clear(g);
        this.grads.set(p.name, g);
      }
    }
    return this.grads;
  }

  /** Zeroes every gradient (recorded). */
  zeroGrads(rec: Recorder): void {
    for (const g of this.ensureGrads(rec).values()) rec.clear(g);
    this.adapter?.zeroGrads(rec);
  }

  /**
   * Records the backward pass of the last forward (which must have had `save: true`) for `dlogits`
   * (rows, V), aligned with that forward's logits. Gradients are added to `grads` (call zeroGrads
   * first unless accumulating micro-batches): a tied embedding receives the head's and the
   * embedding's contributions.
   */
  backward(rec: Recorder, dlogits: GPUBuffer, opts: { accumulate?: boolean } = {}): void {
    const ws = this.ws;
    if (!ws || !this.forwarded || !ws.save) throw new Error('backward: run forward with { save: true } first');
    const cfg = this.config;
    if (!opts.accumulate) this.zeroGrads(rec);
    else this.ensureGrads(rec);
    const { B, T, keep } = ws;
    const N = B * T;
    const { hidden_size: C, vocab_size: V, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
    const s = ws.shared;
    const g = ws.grads();
    const rows = ws.rows;
    const head = lmHeadName(cfg);

    matmul_backward(rec, {
      dinp: keep ? g.dlnf_kept : g.dln,
      dweight: this.gBase(head),
      dout: dlogits,
      inp: keep ? s.lnf_kept : s.lnf,
      weight: this.w(head),
      M: rows,
      K: C,
      N: V,
      weightLayout: 'out_in',
      weightDtype: this.dt(head),
      accumulate: true,
    });
    if (keep) {
      rec.clear(g.dln);
      for (let b = 0; b < B; b++) rec.copy(g.dlnf_kept, b * keep * C * 4, g.dln, (b * T + T - keep - 1) * C * 4, keep * C * 4);
    }
    this.normBackward(rec, this.normName('final'), g.dresid, g.dln, ws.residOut(cfg.num_hidden_layers - 1), s.lnf_mean, s.lnf_rstd, N, false);

    for (let l = cfg.num_hidden_layers - 1; l >= 0; l--) {
      // g.dresid holds ∂loss/∂(layer l output) on entry and ∂loss/∂(layer l input) on exit.
      const a = ws.layers[l];
      const p = this.layerPrefix(l);
      const gpt2 = cfg.family === 'gpt2';

      if (gpt2) {
        this.linearBackward(rec, `${p}.mlp.c_proj`, g.dh, g.dresid, a.fch_gelu, N, I, C);
        gelu_backward(rec, { dinp: g.da, inp: a.fch, dout: g.dh, n: N * I });
        this.linearBackward(rec, `${p}.mlp.c_fc`, g.dln, g.da, a.ln2, N, C, I);
      } else {
        this.linearBackward(rec, `${p}.mlp.down_proj`, g.dh, g.dresid, a.h, N, I, C);
        silu_gate_backward(rec, { dgate: g.da, dup: g.dup, dout: g.dh, gate: a.gate, up: a.up, n: N * I });
        this.linearBackward(rec, `${p}.mlp.gate_proj`, g.dln, g.da, a.ln2, N, C, I);
        this.linearBackward(rec, `${p}.mlp.up_proj`, g.dln, g.dup, a.ln2, N, C, I, true);
      }
      this.normBackward(rec, this.normName('ln2', l), g.dresid, g.dln, a.resid_mid, a.ln2_mean, a.ln2_rstd, N, true);

      this.linearBackward(rec, gpt2 ? `${p}.attn.c_proj` : `${p}.self_attn.o_proj`, g.datty, g.dresid, a.atty, N, Hq * D, C);
      attention_backward(rec, {
        dq: g.dq,
        dk: g.dk,
        dv: g.dv,
        dout: g.datty,
        q: a.q,
        k: a.k,
        v: a.v,
        att: a.att,
        attentionMask: s.mask,
        B,
        T,
        Hq,
        Hkv,
        D,
        scale: cfg.attn_scale,
      });
      if (gpt2) {
        [g.dq, g.dk, g.dv].forEach((src, i) => column_copy_forward(rec, { dst: g.dqkv, src, rows: N, cols: C, srcLd: C, srcCol: 0, dstLd: 3 * C, dstCol: i * C }));
        this.linearBackward(rec, `${p}.attn.c_attn`, g.dln, g.dqkv, a.ln1, N, C, 3 * C);
      } else {
        const rope = { positionIds: s.pos, N, D, theta: cfg.rope_theta!, scaling: cfg.rope_scaling };
        rope_backward(rec, { dx: g.dq, H: Hq, ...rope });
        rope_backward(rec, { dx: g.dk, H: Hkv, ...rope });
        let dq = g.dq;
        let dk = g.dk;
        if (cfg.qk_norm) {
          const qn = `${p}.self_attn.q_norm.weight`;
          const kn = `${p}.self_attn.k_norm.weight`;
          rmsnorm_backward(rec, { dinp: g.dq_raw, dweight: this.g(qn), dout: g.dq, inp: a.q_raw, weight: this.w(qn), rstd: a.q_rstd, N: N * Hq, C: D, accumulate: true });
          rmsnorm_backward(rec, { dinp: g.dk_raw, dweight: this.g(kn), dout: g.dk, inp: a.k_raw, weight: this.w(kn), rstd: a.k_rstd, N: N * Hkv, C: D, accumulate: true });
          dq = g.dq_raw;
          dk = g.dk_raw;
        }
        this.linearBackward(rec, `${p}.self_attn.q_proj`, g.dln, dq, a.ln1, N, C, Hq * D);
        this.linearBackward(rec, `${p}.self_attn.k_proj`, g.dln, dk, a.ln1, N, C, Hkv * D, true);
        this.linearBackward(rec, `${p}.self_attn.v_proj`, g.dln, g.dv, a.ln1, N, C, Hkv * D, true);
      }
      this.normBackward(rec, this.normName('ln1', l), g.dresid, g.dln, ws.residIn(l), a.ln1_mean, a.ln1_rstd, N, true);
    }

    const gpt2 = cfg.family === 'gpt2';
    if (this.adapter) return; // a frozen embedding: nothing below the first layer needs a gradient
    embedding_backward(rec, {
      dwte: this.g(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'),
      dwpe: gpt2 ? this.g('transformer.wpe.weight') : undefined,
      dout: g.dresid,
      ids: s.ids,
      positionIds: gpt2 ? s.pos : undefined,
      N,
      C,
      V,
      P: gpt2 ? cfg.max_position_embeddings : undefined,
      accumulate: true,
    });
  }

  // ------------------------------------------------------------------ readback

  /** A parameter's values as f32 (a bf16 one widened exactly). */
  async readParam(name: string): Promise<Float32Array> {
    const p = this.params.get(name);
    if (!p) throw new Error(`no parameter "${name}"`);
    const n = numel(p.shape);
    if (p.dtype === 'bf16') return bf16ToF32(new Uint16Array(await this.gpu.read(p.buffer, n * 2)));
    return this.gpu.readF32(p.buffer, n);
  }

  async readGrad(name: string): Promise<Float32Array> {
    const p = this.params.get(name);
    if (!p) throw new Error(`no parameter "${name}"`);
    return this.gpu.readF32(this.g(name), numel(p.shape));
  }

  destroy(): void {
    this.ws?.destroy();
    this.ws = null;
    if (this.ownsParams) for (const p of this.params.values()) p.buffer.destroy();
    for (const g of this.grads?.values() ?? []) g.destroy();
    this.grads = null;
  }
}
