// The optimizer side of one GRPO update, as torch runs it: the global L2 norm of every gradient
// (clip_grad_norm_), the clip coefficient, then AdamW or SGD on every parameter (PyTorch semantics, one
// f32 state tensor per parameter, zeros before the first step), with the norms the studio shows:
// per parameter group (src/model/config.ts paramGroups) the gradient norm before clipping and the
// update size ‖Δθ‖. Norms are sums of squares on the GPU (one value per tensor, one small readback)
// added up per group in float64 here; the clip coefficient the update applies is made on the GPU from
// the same sums and read there (as torch's clip_grad_norm_ scales by a tensor), so the step is one submit
// and one compute pass. Kernels: src/kernels/optimizer.ts, src/kernels/grad_norm.ts.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { CLIP_WORDS, clip_coef_forward, sumsq_forward } from '../kernels/grad_norm.ts';
import { adamw_step, sgd_step } from '../kernels/optimizer.ts';
import { numel, type ParamGroup } from '../model/config.ts';
import type { Param } from '../model/layer_ops.ts';

/** torch.optim.AdamW / SGD hyper-parameters, with the batch file's field names. */
export interface OptimizerConfig {
  name: 'adamw' | 'sgd';
  lr: number;
  betas: [number, number]; // AdamW only
  eps: number; // AdamW only
  weight_decay: number;
  momentum: number; // SGD only (0: plain SGD, no buffer)
  /** Parameters without weight decay, by name (NO_DECAY): none (torch.optim over one group) unless set. */
  no_decay?: NoDecay;
}

/** torch.optim.AdamW defaults (lr as TRL's GRPOConfig: 1e-6; weight_decay 0 as transformers' TrainingArguments). */
const DEFAULT_OPTIMIZER: OptimizerConfig = { name: 'adamw', lr: 1e-6, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, momentum: 0 };

/**
 * Parameters transformers' Trainer gives no weight decay (huggingface/transformers src/transformers/trainer.py
 * get_decay_parameter_names): nn.LayerNorm modules and names matching bias / layernorm / rmsnorm / norm.
 * GPT-2's ln_1 / ln_2 / ln_f are LayerNorm modules there, matched by name here.
 */
export function hfNoDecay(name: string): boolean {
  return /bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.)|(?:^|\.)ln_(?:\d+|f)\./.test(name.toLowerCase());
}

/**
 * Parameters OpenRLHF gives no weight decay (OpenRLHF/OpenRLHF openrlhf/utils/deepspeed/deepspeed_utils.py
 * get_optimizer_grouped_parameters): a name holding one of these substrings. GPT-2's ln_1 / ln_2 weights hold
 * none of them and are decayed; ln_f is not.
 */
export function openrlhfNoDecay(name: string): boolean {
  return ['bias', 'layer_norm.weight', 'layernorm.weight', 'norm.weight', 'ln_f.weight'].some((s) => name.includes(s));
}

/**
 * Which parameters a trainer's optimizer exempts from weight decay, by HF parameter name: none (torch.optim over
 * one group), biases and norm weights as transformers' Trainer groups them, or OpenRLHF's name patterns.
 */
export const NO_DECAY = {
  none: () => false,
  biases_and_norms: hfNoDecay,
  openrlhf: openrlhfNoDecay,
} as const satisfies Record<string, (name: string) => boolean>;
export type NoDecay = keyof typeof NO_DECAY;

export class OptimizerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OptimizerConfigError';
  }
}

/** Reads `config.optimizer` of a batch file (missing fields take DEFAULT_OPTIMIZER's), naming a bad field. */
export function parseOptimizerConfig(raw: unknown, where = 'config.optimizer'): OptimizerConfig {
  if (raw === undefined || raw === null) return { ...DEFAULT_OPTIMIZER, betas: [...DEFAULT_OPTIMIZER.betas] };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new OptimizerConfigError(`${where}: expected an object`);
  const o = raw as Record<string, unknown>;
  const num = (k: keyof OptimizerConfig, ok: (x: number) => boolean, what: string): number => {
    const v = o[k] ?? DEFAULT_OPTIMIZER[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw new OptimizerConfigError(`${where}.${k}: expected ${what}, got ${JSON.stringify(o[k])}`);
    return v;
  };
  const name = o.name ?? DEFAULT_OPTIMIZER.name;
  if (name !== 'adamw' && name !== 'sgd') throw new OptimizerConfigError(`${where}.name: expected "adamw" or "sgd", got ${JSON.stringify(name)}`);
  const betas = o.betas ?? DEFAULT_OPTIMIZER.betas;
  if (!Array.isArray(betas) || betas.length !== 2 || !betas.every((b) => typeof b === 'number' && b >= 0 && b < 1)) {
    throw new OptimizerConfigError(`${where}.betas: expected two numbers in [0, 1), got ${JSON.stringify(o.betas)}`);
  }
  return {
    name,
    lr: num('lr', (x) => x >= 0, 'a number >= 0'),
    betas: [betas[0], betas[1]],
    eps: num('eps', (x) => x > 0, 'a number > 0'),
    weight_decay: num('weight_decay', (x) => x >= 0, 'a number >= 0'),
    momentum: num('momentum', (x) => x >= 0 && x < 1, 'a number in [0, 1)'),
    no_decay: noDecay(o.no_decay ?? 'none', where),
  };
}

function noDecay(v: unknown, where: string): NoDecay {
  if (typeof v === 'string' && Object.hasOwn(NO_DECAY, v)) return v as NoDecay;
  throw new OptimizerConfigError(`${where}.no_decay: expected one of ${Object.keys(NO_DECAY).map((k) => JSON.stringify(k)).join(', ')}, got ${JSON.stringify(v)}`);
}

/** Gradient norms before clipping. Group norms are √(Σ over the group's tensors of Σ g²). */
export interface GradNorms {
  grad_norm: number; // what clip_grad_norm_ returns
  group_grad_norms: Record<ParamGroup, number>;
}

/** What one optimizer step did: the clip coefficient it applied (computed on the GPU) and ‖Δθ‖, overall and per group. */
export interface UpdateNorms {
  clip_coef: number;
  step: number; // torch's state['step'] after this step (1 for the first)
  update_norm: number;
  group_update_norms: Record<ParamGroup, number>;
}

/** √ of the per-group sums of per-tensor sums of squares (float64). */
function groupNorms(params: Param[], sumsqs: ArrayLike<number>): Record<ParamGroup, number> {
  const acc: Record<ParamGroup, number> = {};
  params.forEach((p, i) => (acc[p.group] = (acc[p.group] ?? 0) + sumsqs[i]));
  for (const g of Object.keys(acc)) acc[g] = Math.sqrt(acc[g]);
  return acc;
}

/** √ of the sum of per-tensor sums of squares, in float64. */
function totalNorm(sumsqs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < sumsqs.length; i++) s += sumsqs[i];
  return Math.sqrt(s);
}

/** The optimizer's moments by parameter and its step count, as saveState() copied them. */
export interface OptimizerState {
  t: number;
  state: Map<string, GPUBuffer[]>;
}

/**
 * AdamW or SGD over a model's parameters, with its state on the GPU. `step(grads, maxGradNorm)` takes one
 * clipped step in one submit and one compute pass: the gradient sums of squares (unless gradNorms() just
 * took them of the same gradients), clip_grad_norm_'s coefficient on the GPU, the update of every
 * parameter with its Δθ² partials, and the per-tensor sums of those; then one readback of what the page
 * shows (per-tensor Σ Δθ² and the coefficient). `gradNorms()` reads the gradient norms the page shows before
 * the step (the backward stage), recorded into the backward's own recorder when given it.
 * `reset()` forgets the state (the next step is step 1 again).
 */
export class Optimizer {
  private readonly params: Param[];
  private state = new Map<string, GPUBuffer[]>(); // AdamW: [exp_avg, exp_avg_sq]; SGD with momentum: [momentum_buffer]
  /** (P) Σ g² per parameter, (P) Σ Δθ² per parameter, and clip_coef_forward's [coef, ok, total norm]. */
  private readonly sums: { grad: GPUBuffer; update: GPUBuffer; clip: GPUBuffer };
  /** The gradients whose Σ g² `sums.grad` holds, until the next step (step() then reuses them). */
  private normed: Map<string, GPUBuffer> | null = null;
  /** Steps taken (torch's state['step']). */
  t = 0;

  constructor(
    private readonly gpu: Gpu,
    params: Iterable<Param>,
    private cfg: OptimizerConfig,
  ) {
    this.params = [...params];
    const P = this.params.length;
    this.sums = { grad: gpu.createBuffer('optimizer.grad_sumsq', P * 4), update: gpu.createBuffer('optimizer.update_sumsq', P * 4), clip: gpu.createBuffer('optimizer.clip', CLIP_WORDS * 4) };
  }

  get config(): OptimizerConfig {
    return this.cfg;
  }

  /**
   * The learning rate of the next steps: a schedule moves it between steps while the moments and the step
   * count carry on (any other change of the settings needs a new optimizer).
   */
  setLearningRate(lr: number): void {
    this.cfg = { ...this.cfg, lr };
  }

  /** The state of a parameter: new buffers are zero-filled by WebGPU (torch's zeros before the first step), so no clear (a copy command) splits the step's compute pass. */
  private stateOf(p: Param): GPUBuffer[] {
    let s = this.state.get(p.name);
    if (!s) {
      const names = this.config.name === 'adamw' ? ['exp_avg', 'exp_avg_sq'] : this.config.momentum ? ['momentum_buffer'] : [];
      s = names.map((name) => this.gpu.createBuffer(`${name}.${p.name}`, numel(p.shape) * 4));
      this.state.set(p.name, s);
    }
    return s;
  }

  private gradOf(grads: Map<string, GPUBuffer>, p: Param): GPUBuffer {
    const g = grads.get(p.name);
    if (!g) throw new Error(`optimizer: no gradient for "${p.name}" (run backward first)`);
    return g;
  }

  /** Records Σ g² of every gradient into the device sums (no readback): the next step() of these gradients reuses them. */
  recordGradNorms(rec: Recorder, grads: Map<string, GPUBuffer>): void {
    sumsq_forward(rec, { inputs: this.params.map((p) => ({ inp: this.gradOf(grads, p), n: numel(p.shape) })), out: this.sums.grad });
    this.normed = grads;
  }

  /** The norms recordGradNorms() recorded (once their recorder is submitted): one readback of (P) floats. Throws on a non-finite gradient. */
  async readGradNorms(): Promise<GradNorms> {
    const sums = await this.gpu.readF32(this.sums.grad, this.params.length);
    const grad_norm = totalNorm(sums);
    if (!Number.isFinite(grad_norm)) {
      this.normed = null;
      throw this.nonFinite(grad_norm, sums);
    }
    return { grad_norm, group_grad_norms: groupNorms(this.params, sums) };
  }

  /** The global gradient norm before clipping and the norm of each parameter group, in a submit of their own. Throws on a non-finite gradient. */
  async gradNorms(grads: Map<string, GPUBuffer>): Promise<GradNorms> {
    const rec = this.gpu.recorder('grad_sumsq');
    this.recordGradNorms(rec, grads);
    await rec.submit();
    return this.readGradNorms();
  }

  private nonFinite(norm: number, sums: ArrayLike<number>): RangeError {
    const bad = this.params.filter((_, i) => !Number.isFinite(sums[i])).map((p) => p.name);
    return new RangeError(`gradient norm is ${norm}: non-finite gradient in ${bad.slice(0, 3).join(', ')}${bad.length > 3 ? ` and ${bad.length - 3} more` : ''}; refusing to step`);
  }

  /**
   * One AdamW / SGD step on every parameter with the gradients clipped at `maxGradNorm` (≤ 0: no clipping;
   * torch's clip_grad_norm_ coefficient, computed on the GPU), and ‖Δθ‖ per group. A non-finite gradient
   * norm changes nothing (the kernels see clip's ok = 0) and throws, naming the tensors.
   */
  async step(grads: Map<string, GPUBuffer>, maxGradNorm: number): Promise<UpdateNorms> {
    const c = this.config;
    const step = this.t + 1;
    const P = this.params.length;
    const rec = this.gpu.recorder('optimizer_step');
    if (this.normed !== grads) this.recordGradNorms(rec, grads);
    this.normed = null;
    clip_coef_forward(rec, { sumsq: this.sums.grad, P, maxNorm: maxGradNorm, clip: this.sums.clip });
    const tensors = this.params.map((p) => ({
      param: p.buffer,
      grad: this.gradOf(grads, p),
      n: numel(p.shape),
      weightDecay: NO_DECAY[c.no_decay ?? 'none'](p.name) ? 0 : c.weight_decay,
      state: this.stateOf(p),
    }));
    const common = { clip: this.sums.clip, out: this.sums.update };
    if (c.name === 'adamw') {
      adamw_step(rec, { ...common, tensors: tensors.map((t) => ({ ...t, m: t.state[0], v: t.state[1] })), lr: c.lr, beta1: c.betas[0], beta2: c.betas[1], eps: c.eps, step });
    } else {
      sgd_step(rec, { ...common, tensors: tensors.map((t) => ({ ...t, buf: t.state[0] })), lr: c.lr, momentum: c.momentum, step });
    }
    await rec.submit();
    const [update, clip] = (await this.gpu.readAll([{ buf: this.sums.update, byteSize: P * 4 }, { buf: this.sums.clip, byteSize: CLIP_WORDS * 4 }])).map((b) => new Float32Array(b));
    if (!clip[1]) throw this.nonFinite(clip[2], await this.gpu.readF32(this.sums.grad, P));
    this.t = step;
    return { clip_coef: clip[0], step, update_norm: totalNorm(update), group_update_norms: groupNorms(this.params, update) };
  }

  /**
   * A copy of the moments and the step count, taken before a step that continues a run (the studio's
   * undo); restoreState() puts it back. The copy is the caller's until then.
   */
  async saveState(): Promise<OptimizerState> {
    const rec = this.gpu.recorder('optimizer state copy');
    const state = new Map<string, GPUBuffer[]>();
    for (const [name, bufs] of this.state) {
      state.set(name, bufs.map((b) => {
        const c = this.gpu.createBuffer(`saved.${b.label}`, b.size);
        rec.copy(b, 0, c, 0, b.size);
        return c;
      }));
    }
    await rec.submit();
    return { t: this.t, state };
  }

  /** Back to a saved state (the moments and step count before the step undone); takes ownership of its buffers. */
  restoreState(saved: OptimizerState): void {
    this.dropState();
    this.state = saved.state;
    this.t = saved.t;
  }

  /** Forgets the optimizer state: the next step is step 1 from zero moments. */
  reset(): void {
    this.dropState();
    this.t = 0;
  }

  private dropState(): void {
    for (const s of this.state.values()) for (const b of s) b.destroy();
    this.state = new Map();
    this.normed = null;
  }

  destroy(): void {
    this.dropState();
    for (const b of Object.values(this.sums)) b.destroy();
  }
}
