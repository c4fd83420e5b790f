// The causal LM on the GPU: GPT-2, Llama (SmolLM2), Qwen2 and Qwen3 with Hugging Face parameter names
// and layouts, forward to logits that stay on the GPU (so the loss kernels read them in place) and
// backward to every parameter's gradient. Structured like llm.c's gpt2_forward / gpt2_backward: one
// table of activation buffers (src/model/workspace.ts, sizes in src/model/memory.ts), a layer loop of
// kernel launches per pass (src/model/forward.ts, src/model/backward.ts, building blocks in
// src/model/layer_ops.ts), and the float64 twin of the whole thing in src/oracle/model.ts.
//
// Every launch goes into the caller's Recorder: one submit can hold forward, loss and backward, with
// nothing read back in between.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { recordBackward } from './backward.ts';
import { numel, paramGroups, paramSpecs, type ModelConfig, type ParamGroup } from './config.ts';
import { checkInputs, recordForward, type ForwardInputs, type ForwardOptions, type ForwardResult } from './forward.ts';
import { recordHeadChunks, type HeadChunk, type HeadGrad } from './head.ts';
import { logitsChunkRows } from './memory.ts';
import { LayerOps, type Param } from './layer_ops.ts';
import { loadCheckpoint, type CheckpointInfo, type LoadOptions } from './loader.ts';
import type { LoraAdapter } from './lora_adapter.ts';
import { bf16ToF32, f32ToBf16 } from '../io/safetensors.ts';
import type { ModelSource } from './source.ts';
import { Workspace } from './workspace.ts';

/** Weights the kernels can read packed bf16: every 2-D weight (matmuls, the token embedding's gather) but GPT-2's small wpe. */
const isPackable = (name: string, shape: number[]) => shape.length === 2 && !name.endsWith('wpe.weight');

/** Norm weights and biases: the only base parameters whose gradient a backward under a LoRA adapter still writes (their kernels need a target). */
const isNormParam = (name: string) => /(norm|ln_[12f])\.(weight|bias)$/.test(name);

export class CausalLM {
  readonly params: Map<string, Param>;
  /** Gradient of every parameter (same names, same layouts), allocated by the first backward. */
  grads: Map<string, GPUBuffer> | null = null;
  /** A PEFT LoRA adapter on the linear layers: when set, only it trains (the base weights are frozen). The caller owns it. */
  adapter: LoraAdapter | null = null;
  /** Gradient checkpointing: a saved forward keeps only each layer's input; the backward recomputes the rest. */
  checkpointing = false;
  /** Rows per logits chunk of the head (scoring and the chunked backward); null: as many as one storage binding (at most 128 MiB) holds. */
  logitsChunkRows: number | null = null;
  private ws: Workspace | null = null;
  private forwarded = false;
  private readonly ops: LayerOps;

  private constructor(
    readonly gpu: Gpu,
    readonly config: ModelConfig,
    params: Map<string, Param>,
    readonly info: CheckpointInfo | null,
    /** false for a view made by withAdapter: the weights belong to the model it was made from. */
    private readonly ownsParams = true,
  ) {
    this.params = params;
    this.ops = new LayerOps(config, params, () => this.grads, () => this.adapter);
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

  /**
   * A copy of the weights on the GPU (an adapter is not copied): the frozen-copy reference, the policy as
   * loaded, which stays put while the policy keeps training (TRL's ref_model with β > 0).
   */
  async snapshot(): Promise<CausalLM> {
    const params = new Map<string, Param>();
    for (const [name, p] of this.params) params.set(name, { ...p, buffer: this.gpu.createBuffer(`frozen.${name}`, p.buffer.size) });
    await this.copyWeights(this, params);
    return new CausalLM(this.gpu, this.config, params, this.info);
  }

  /** Bytes of the weights on the GPU (as stored: bf16 weights at 2 bytes), for the memory plan of a model held beside another. */
  get weightBytes(): number {
    let n = 0;
    for (const p of this.params.values()) n += p.buffer.size;
    return n;
  }

  /** Overwrites these weights with `from`'s (a snapshot of this model): back to the weights as loaded. */
  async loadWeightsFrom(from: CausalLM): Promise<void> {
    await this.copyWeights(from, this.params);
  }

  private async copyWeights(from: CausalLM, to: Map<string, Param>): Promise<void> {
    const rec = this.gpu.recorder('copy weights');
    for (const [name, p] of from.params) {
      const dst = to.get(name);
      if (!dst || dst.buffer.size !== p.buffer.size) throw new Error(`copy weights: "${name}" has no same-sized target`);
      rec.copy(p.buffer, 0, dst.buffer, 0, p.buffer.size);
    }
    await rec.submit();
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
          const bf16 = opts.storage === 'checkpoint' && stored.dtype === 'BF16' && isPackable(spec.name, spec.shape);
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

  /**
   * A model from in-memory weights (tests, benchmarks): every parameter of `paramSpecs(config)` must be given.
   * storage 'checkpoint' packs the 2-D weights bf16 (rounded to nearest even) as from_pretrained keeps a BF16
   * checkpoint's: a frozen LoRA base.
   */
  static fromWeights(gpu: Gpu, config: ModelConfig, weights: Record<string, Float32Array>, storage: LoadOptions['storage'] = 'f32'): CausalLM {
    const params = new Map<string, Param>();
    for (const spec of paramSpecs(config)) {
      const data = weights[spec.name];
      if (!data || data.length !== numel(spec.shape)) throw new RangeError(`fromWeights: "${spec.name}" needs ${numel(spec.shape)} values, got ${data?.length ?? 'none'}`);
      const bf16 = storage === 'checkpoint' && isPackable(spec.name, spec.shape);
      params.set(spec.name, bf16 ? { ...spec, dtype: 'bf16', buffer: gpu.upload(spec.name, f32ToBf16(data)) } : { ...spec, buffer: gpu.upload(spec.name, data) });
    }
    return new CausalLM(gpu, config, params, null);
  }

  /** Parameter names by group: embedding, each layer's attention / MLP / norms, the final norm, an untied head. */
  paramGroups(): Map<ParamGroup, string[]> {
    return paramGroups(this.config);
  }

  private workspace(B: number, T: number, keep: number, save: boolean, headless: boolean): Workspace {
    if (!this.ws?.matches(B, T, keep, save, this.checkpointing, headless)) {
      this.ws?.destroy();
      this.ws = new Workspace(this.gpu, this.config, B, T, keep, save, save && this.checkpointing, headless);
    }
    return this.ws;
  }

  /**
   * Records the forward pass into `rec` and returns the logits buffer (filled once `rec` is submitted).
   * Inputs are written to the GPU now, so record one forward per model per submit.
   */
  forward(rec: Recorder, x: ForwardInputs, opts: ForwardOptions = {}): ForwardResult {
    const cfg = this.config;
    const cache = opts.kvCache;
    if (cache && (opts.save || opts.logits_to_keep !== undefined)) throw new RangeError('forward: kvCache cannot be combined with save or logits_to_keep');
    if (opts.headless && cache) throw new RangeError('forward: headless cannot be combined with kvCache');
    if (cache && cache.B !== x.B) throw new RangeError(`forward: kvCache holds ${cache.B} rows, input has B = ${x.B}`);
    const keep = cache ? 1 : (opts.logits_to_keep ?? 0);
    checkInputs(cfg, x, cache ? 0 : keep);
    const { B, T } = x;
    const ws = this.workspace(B, T, keep, opts.save ?? false, opts.headless ?? false);
    const s = ws.shared;
    this.gpu.write(s.ids, x.input_ids);
    if (opts.idsFrom) rec.copy(opts.idsFrom.buffer, opts.idsFrom.offset, s.ids, 0, B * T * 4);
    this.gpu.write(s.mask, x.attention_mask);
    this.gpu.write(s.pos, x.position_ids);
    const kv = cache ? { cache, ...cache.append(x.attention_mask, T) } : undefined;
    const out = recordForward(rec, this.ops, ws, kv);
    this.forwarded = true;
    return out;
  }

  /** Rows per logits chunk for `rows` scored rows: the configured cap, else what one storage binding holds. */
  chunkRows(rows: number): number {
    return Math.min(rows, this.logitsChunkRows ?? logitsChunkRows(this.config.vocab_size, rows, this.gpu.limits.maxStorageBufferBindingSize));
  }

  /** Records the LM head over `rows` rows of `hidden` (a headless forward's) in chunks, `each` consuming a chunk's logits. */
  headChunks(rec: Recorder, hidden: GPUBuffer, rows: number, each: (k: HeadChunk) => void): void {
    recordHeadChunks(rec, this.ops, hidden, rows, this.chunkRows(rows), each);
  }

  /** Frees the activation workspace (the next forward allocates it again); a backward then needs a new forward. */
  releaseWorkspace(): void {
    this.ws?.destroy();
    this.ws = null;
    this.forwarded = false;
  }

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
   * Records the backward pass of the last forward (which must have had `save: true`) from `top`: dlogits
   * (rows, V) aligned with that forward's logits, or (after a headless forward) the per-token gradient of
   * the scored log-probs, whose dlogits are made chunk by chunk from recomputed logits (src/model/head.ts).
   * Gradients are added to `grads` (call zeroGrads first unless accumulating micro-batches): a tied
   * embedding receives the head's and the embedding's contributions.
   */
  backward(rec: Recorder, top: GPUBuffer | HeadGrad, opts: { accumulate?: boolean } = {}): void {
    const ws = this.ws;
    if (!ws || !this.forwarded || !ws.save) throw new Error('backward: run forward with { save: true } first');
    const chunked = 'dlogp' in top;
    if (!chunked && ws.headless) throw new Error('backward: a headless forward has no logits; give the per-token gradient (dlogp) instead of dlogits');
    if (!opts.accumulate) this.zeroGrads(rec);
    else this.ensureGrads(rec);
    recordBackward(rec, this.ops, ws, chunked ? { grad: top, chunkRows: this.chunkRows(ws.rows) } : { dlogits: top });
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
    return this.gpu.readF32(this.ops.g(name), numel(p.shape));
  }

  destroy(): void {
    this.ws?.destroy();
    this.ws = null;
    if (this.ownsParams) for (const p of this.params.values()) p.buffer.destroy();
    for (const g of this.grads?.values() ?? []) g.destroy();
    this.grads = null;
  }
}