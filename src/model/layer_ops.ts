// The causal LM's building blocks over its parameters: weight and gradient lookup by Hugging Face name,
// the names per family (GPT-2 vs Llama / Qwen), and the linear / norm launches forward and backward
// (src/model/forward.ts and src/model/backward.ts record the passes with them).
import type { Recorder } from '../gpu/context.ts';
import { layernorm_backward, layernorm_forward } from '../kernels/layernorm.ts';
import { matmul_backward, matmul_forward, type WeightDtype, type WeightLayout } from '../kernels/matmul.ts';
import { residual_forward } from '../kernels/residual.ts';
import { rmsnorm_backward, rmsnorm_forward } from '../kernels/rmsnorm.ts';
import type { ModelConfig, Param } from './config.ts';
import type { LoraAdapter } from './lora_adapter.ts';

export type { Param } from './config.ts';

export class LayerOps {
  constructor(
    readonly config: ModelConfig,
    private readonly params: Map<string, Param>,
    /** The model's gradients (null before the first backward). */
    private readonly grads: () => Map<string, GPUBuffer> | null,
    /** The model's LoRA adapter: its modules add their delta to the linear layers, and the base is frozen. */
    private readonly lora: () => LoraAdapter | null,
  ) {}

  get adapter(): LoraAdapter | null {
    return this.lora();
  }

  /** How a weight is stored: f32, or packed bf16 (loaded with storage 'checkpoint'; frozen). */
  dt(name: string): WeightDtype {
    return this.params.get(name)?.dtype ?? 'f32';
  }

  /** The gradient of a weight that trains unless an adapter freezes the base (undefined then: the kernel skips it). */
  gBase(name: string): GPUBuffer | undefined {
    return this.adapter ? undefined : this.gOpt(name);
  }

  w(name: string): GPUBuffer {
    const p = this.params.get(name);
    if (!p) throw new Error(`no parameter "${name}"`);
    return p.buffer;
  }

  wOpt(name: string): GPUBuffer | undefined {
    return this.params.get(name)?.buffer;
  }

  g(name: string): GPUBuffer {
    const g = this.grads()?.get(name);
    if (!g) throw new Error(`no gradient for "${name}"`);
    return g;
  }

  gOpt(name: string): GPUBuffer | undefined {
    return this.grads()?.get(name);
  }

  // ------------------------------------------------------------------ names per family

  layerPrefix(l: number): string {
    return this.config.family === 'gpt2' ? `transformer.h.${l}` : `model.layers.${l}`;
  }

  /** Norm weight / bias names: ln1 before attention, ln2 before the MLP, final after the last layer. */
  normName(which: 'ln1' | 'ln2' | 'final', l = 0): string {
    const gpt2 = this.config.family === 'gpt2';
    if (which === 'final') return gpt2 ? 'transformer.ln_f' : 'model.norm';
    const p = this.layerPrefix(l);
    if (gpt2) return `${p}.${which === 'ln1' ? 'ln_1' : 'ln_2'}`;
    return `${p}.${which === 'ln1' ? 'input_layernorm' : 'post_attention_layernorm'}`;
  }

  get layout(): WeightLayout {
    return this.config.family === 'gpt2' ? 'in_out' : 'out_in';
  }

  // ------------------------------------------------------------------ building blocks

  /**
   * out (M, N) = inp (M, K) · Wᵀ (+ b) (+ the LoRA delta). With `residual`, out = residual.x + that: one GEMM
   * whose epilogue adds the stream (matmul_forward's residual) where no adapter adds a delta; under an adapter
   * the layer goes to residual.proj and residual_forward adds it, so the sum keeps PEFT's order, x + (base + delta).
   */
  linear(rec: Recorder, name: string, out: GPUBuffer, inp: GPUBuffer, M: number, K: number, N: number, residual?: { x: GPUBuffer; proj: GPUBuffer }): void {
    const weightDtype = this.dt(`${name}.weight`);
    const adapted = this.adapter?.has(name) ?? false;
    const y = residual && adapted ? residual.proj : out;
    matmul_forward(rec, { out: y, inp, weight: this.w(`${name}.weight`), bias: this.wOpt(`${name}.bias`), M, K, N, weightLayout: this.layout, weightDtype, residual: adapted ? undefined : residual?.x });
    if (adapted) {
      this.adapter!.forward(rec, name, y, inp, M);
      if (residual) residual_forward(rec, { out, a: residual.x, b: residual.proj, n: M * N });
    }
  }

  linearBackward(rec: Recorder, name: string, dinp: GPUBuffer, dout: GPUBuffer, inp: GPUBuffer, M: number, K: number, N: number, accumulateDinp = false): void {
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

  norm(rec: Recorder, name: string, out: GPUBuffer, inp: GPUBuffer, mean: GPUBuffer | undefined, rstd: GPUBuffer, N: number): void {
    const { hidden_size: C, norm_eps: eps } = this.config;
    const weight = this.w(`${name}.weight`);
    if (this.config.norm === 'layernorm') layernorm_forward(rec, { out, mean: mean!, rstd, inp, weight, bias: this.w(`${name}.bias`), N, C, eps });
    else rmsnorm_forward(rec, { out, rstd, inp, weight, N, C, eps });
  }

  /** dinp (+)= ∂/∂inp of the norm; weight (and bias) gradients accumulate. */
  normBackward(rec: Recorder, name: string, dinp: GPUBuffer, dout: GPUBuffer, inp: GPUBuffer, mean: GPUBuffer | undefined, rstd: GPUBuffer, N: number, accumulateDinp: boolean): void {
    const C = this.config.hidden_size;
    const common = { dinp, dweight: this.g(`${name}.weight`), dout, inp, weight: this.w(`${name}.weight`), rstd, N, C, accumulate: true, accumulateDinp };
    if (this.config.norm === 'layernorm') layernorm_backward(rec, { ...common, dbias: this.g(`${name}.bias`), mean: mean! });
    else rmsnorm_backward(rec, common);
  }
}
