// A PEFT LoRA adapter on the GPU (src/model/lora.ts reads and writes its folder): per adapted module
// A (r, in) and B (out, r) as trainable f32 parameters with their gradients, and the two hooks the
// model calls around a linear layer, built from the plain matmul kernels (the scalings are their epilogue's
// scale, one rounding of the product as a separate x·scaling was):
//   forward   u = scaling·(x·Aᵀ) (M, r), kept for the backward;  y += u·Bᵀ
//   backward  dB += doutᵀ·u;  du = scaling·(dout·B);  dA += duᵀ·x;  dx += du·A
// The base weights never see a gradient (the model skips them while an adapter is attached).
// Parameters are named by their PEFT keys, so the optimizer, the grad norm and the saved file all use
// the same names; their parameter group is the base weight's prefixed "lora.", so the per-group grad and
// update norms say that only the adapter trains. Float64 twin: RefModel with a LoraWeights (src/oracle/model.ts).
import type { Gpu, Recorder } from '../gpu/context.ts';
import { matmul_backward, matmul_forward } from '../kernels/matmul.ts';
import type { Param } from './config.ts';
import { loraKey, type LoraConfig, type LoraModule, type LoraWeights } from './lora.ts';

interface GpuModule {
  A: Param; // (r, in)
  B: Param; // (out, r)
  in: number;
  out: number;
  group: string; // the base weight's group
  u: GPUBuffer | null; // (M, r) scaling·x·Aᵀ of the last forward
  du: GPUBuffer | null; // (M, r) backward scratch
  M: number;
}

export class LoraAdapter {
  readonly params = new Map<string, Param>(); // PEFT key → A or B
  /** Gradients by PEFT key, allocated by the first backward. */
  grads: Map<string, GPUBuffer> | null = null;
  private readonly modules = new Map<string, GpuModule>();

  constructor(
    readonly gpu: Gpu,
    readonly config: LoraConfig,
    weights: LoraModule[],
  ) {
    for (const m of weights) {
      const spec = (which: 'A' | 'B', shape: number[], data: Float32Array): Param => {
        const name = loraKey(m.name, which);
        const p = { name, shape, group: `lora.${m.group}`, buffer: gpu.upload(name, data) };
        this.params.set(name, p);
        return p;
      };
      const A = spec('A', [config.r, m.in], m.A);
      const B = spec('B', [m.out, config.r], m.B);
      this.modules.set(m.name, { A, B, in: m.in, out: m.out, group: m.group, u: null, du: null, M: 0 });
    }
  }

  static fromWeights(gpu: Gpu, w: LoraWeights): LoraAdapter {
    return new LoraAdapter(gpu, w.config, w.modules);
  }

  has(module: string): boolean {
    return this.modules.has(module);
  }

  private module(name: string, M: number): GpuModule {
    const m = this.modules.get(name)!;
    if (m.M !== M) {
      m.u?.destroy();
      m.du?.destroy();
      m.u = this.gpu.createBuffer(`lora.u.${name}`, M * this.config.r * 4);
      m.du = this.gpu.createBuffer(`lora.du.${name}`, M * this.config.r * 4);
      m.M = M;
    }
    return m;
  }

  /** out (M, out) += scaling·(inp·Aᵀ)·Bᵀ for module `name`; inp (M, in). */
  forward(rec: Recorder, name: string, out: GPUBuffer, inp: GPUBuffer, M: number): void {
    const r = this.config.r;
    const m = this.module(name, M);
    matmul_forward(rec, { out: m.u!, inp, weight: m.A.buffer, M, K: m.in, N: r, weightLayout: 'out_in', scale: this.config.scaling });
    matmul_forward(rec, { out, inp: m.u!, weight: m.B.buffer, M, K: r, N: m.out, weightLayout: 'out_in', accumulate: true });
  }

  /** Gradients of module `name` from dout (M, out); dinp (M, in) += the adapter's part (the base's is already there). */
  backward(rec: Recorder, name: string, dinp: GPUBuffer, dout: GPUBuffer, inp: GPUBuffer, M: number): void {
    const r = this.config.r;
    const m = this.modules.get(name)!;
    if (m.M !== M) throw new Error(`lora backward: module ${name} was last run on ${m.M} rows, not ${M}`);
    const g = this.ensureGrads(rec);
    matmul_backward(rec, { dinp: m.du!, dinpScale: this.config.scaling, dweight: g.get(m.B.name), dout, inp: m.u!, weight: m.B.buffer, M, K: r, N: m.out, weightLayout: 'out_in', accumulate: true });
    matmul_backward(rec, { dinp, dweight: g.get(m.A.name), dout: m.du!, inp, weight: m.A.buffer, M, K: m.in, N: r, weightLayout: 'out_in', accumulate: true, accumulateDinp: true });
  }

  private ensureGrads(rec: Recorder): Map<string, GPUBuffer> {
    if (!this.grads) {
      this.grads = new Map();
      for (const p of this.params.values()) {
        const g = this.gpu.createBuffer(`grad.${p.name}`, p.buffer.size);
        rec.clear(g);
        this.grads.set(p.name, g);
      }
    }
    return this.grads;
  }

  zeroGrads(rec: Recorder): void {
    for (const g of this.ensureGrads(rec).values()) rec.clear(g);
  }

  /** The adapter's current tensors (what `saveLoraAdapter` writes). */
  async read(): Promise<LoraWeights> {
    const modules: LoraModule[] = [];
    for (const [name, m] of this.modules) {
      const [A, B] = await Promise.all([this.gpu.readF32(m.A.buffer, m.A.buffer.size / 4), this.gpu.readF32(m.B.buffer, m.B.buffer.size / 4)]);
      modules.push({ name, in: m.in, out: m.out, group: m.group, A, B });
    }
    return { config: this.config, modules };
  }

  destroy(): void {
    for (const p of this.params.values()) p.buffer.destroy();
    for (const g of this.grads?.values() ?? []) g.destroy();
    for (const m of this.modules.values()) {
      m.u?.destroy();
      m.du?.destroy();
    }
    this.grads = null;
  }
}
