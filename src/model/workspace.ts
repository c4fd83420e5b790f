// The activation buffers of one batch shape (sizes from src/model/memory.ts): every layer's set when
// the forward is saved for a backward, else one set reused by every layer with the residual stream
// ping-ponging between two buffers; gradient scratch on the first backward. With `checkpoint` (gradient
// checkpointing) a saved forward keeps only each layer's input (resid) per layer and shares one set of
// the other activations, which the backward refills layer by layer (recordBackward recomputes them).
import type { Gpu } from '../gpu/context.ts';
import type { ModelConfig } from './config.ts';
import { backwardScratchSizes, layerActivationSizes, sharedActivationSizes } from './memory.ts';

export type Buffers = Record<string, GPUBuffer>;

/** The activation buffers of one batch shape. Without `save`, every layer shares one set. */
export class Workspace {
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
    readonly checkpoint = false, // with save: per-layer inputs only, one shared set recomputed in the backward
    readonly headless = false, // no (rows, V) logits: the caller runs the head in row chunks
  ) {
    this.shared = this.alloc('shared', sharedActivationSizes(cfg, B, T, keep, headless));
    const { resid, ...rest } = layerActivationSizes(cfg, B, T);
    if (save && checkpoint) {
      const one = this.alloc('layer', rest);
      this.layers = Array.from({ length: cfg.num_hidden_layers }, (_, l) => ({ ...one, ...this.alloc(`layers.${l}`, { resid }) }));
      return;
    }
    const one = save ? null : this.alloc('layer', { resid, ...rest });
    this.layers = Array.from({ length: cfg.num_hidden_layers }, (_, l) => one ?? this.alloc(`layers.${l}`, { resid, ...rest }));
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

  matches(B: number, T: number, keep: number, save: boolean, checkpoint: boolean, headless: boolean): boolean {
    return this.B === B && this.T === T && this.keep === keep && this.save === save && this.checkpoint === (save && checkpoint) && this.headless === headless;
  }

  destroy(): void {
    for (const b of this.owned) b.destroy();
  }
}
