// The KV cache for incremental decoding: per layer, the post-RoPE keys and the values of every position
// fed so far, laid out (B, TkvMax, Hkv, D) as attention_forward reads them, plus the key mask of the
// cached positions. CausalLM.forward(…, { kvCache }) writes the new tokens' k / v rows at column
// `length` and attends its Tq new queries over all Tk = length + Tq cached keys, so a decode step runs
// the model on one token per row instead of the whole sequence.
import type { Gpu } from '../gpu/context.ts';
import type { ModelConfig } from './config.ts';

export class KVCache {
  readonly k: GPUBuffer[]; // per layer (B, TkvMax, Hkv, D)
  readonly v: GPUBuffer[]; // per layer (B, TkvMax, Hkv, D)
  /** (B, Tk) i32 key mask of the current forward, rewritten contiguously each time (the kernel reads stride Tk). */
  readonly mask: GPUBuffer;
  /** Positions (columns) already cached. */
  length = 0;
  private readonly maskHost: Int32Array; // (B, TkvMax)

  constructor(
    private readonly gpu: Gpu,
    cfg: ModelConfig,
    readonly B: number,
    readonly TkvMax: number,
  ) {
    const bytes = B * TkvMax * cfg.num_key_value_heads * cfg.head_dim * 4;
    this.k = Array.from({ length: cfg.num_hidden_layers }, (_, l) => gpu.createBuffer(`kv_cache.${l}.k`, bytes));
    this.v = Array.from({ length: cfg.num_hidden_layers }, (_, l) => gpu.createBuffer(`kv_cache.${l}.v`, bytes));
    this.mask = gpu.createBuffer('kv_cache.mask', B * TkvMax * 4);
    this.maskHost = new Int32Array(B * TkvMax);
  }

  /**
   * Appends the attention mask (B, T) of T new positions and uploads the (B, length + T) key mask.
   * Returns the column the new rows go to (t0) and the key count (Tk); `length` becomes Tk.
   */
  append(attention_mask: Int32Array, T: number): { t0: number; Tk: number } {
    const { B, TkvMax } = this;
    const t0 = this.length;
    const Tk = t0 + T;
    if (Tk > TkvMax) throw new RangeError(`kv cache: ${t0} cached + ${T} new positions exceed its capacity of ${TkvMax}`);
    if (attention_mask.length !== B * T) throw new RangeError(`kv cache: attention_mask has ${attention_mask.length} elements, expected B·T = ${B * T}`);
    for (let b = 0; b < B; b++) this.maskHost.set(attention_mask.subarray(b * T, (b + 1) * T), b * TkvMax + t0);
    const keys = new Int32Array(B * Tk); // (B, Tk)
    for (let b = 0; b < B; b++) keys.set(this.maskHost.subarray(b * TkvMax, b * TkvMax + Tk), b * Tk);
    this.gpu.write(this.mask, keys);
    this.length = Tk;
    return { t0, Tk };
  }

  destroy(): void {
    for (const b of [...this.k, ...this.v, this.mask]) b.destroy();
  }
}
