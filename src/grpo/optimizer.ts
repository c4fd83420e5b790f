// The optimizer side of one GRPO update, as torch runs it: the global L2 norm of every gradient
// (clip_grad_norm_), the clip coefficient, then AdamW or SGD on every parameter (PyTorch semantics, one
// f32 state tensor per parameter, zeros before the first step), with the norms the studio shows:
// per parameter group (src/model/config.ts paramGroups) the gradient norm before clipping and the
// update size ‖Δθ‖. Norms are sums of squares on the GPU (one value per tensor, one small readback)
// added up per group in float64 here. Kernels: src/kernels/optimizer.ts, src/kernels/grad_norm.ts.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { clipCoef, globalNorm, sumsq_forward } from '../kernels/grad_norm.ts';
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
  /** Parameters without weight decay: none (torch.optim over one group), or biases and norm weights as transformers' Trainer groups them. */
  no_decay?: 'none' | 'biases_and_norms';
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

function noDecay(v: unknown, where: string): 'none' | 'biases_and_norms' {
  if (v === 'none' || v === 'biases_and_norms') return v;
  throw new OptimizerConfigError(`${where}.no_decay: expected "none" or "biases_and_norms", got ${JSON.stringify(v)}`);
}

/** Gradient norms before clipping. Group norms are √(Σ over the group's tensors of Σ g²). */
export interface GradNorms {
  grad_norm: number; // what clip_grad_norm_ returns
  group_grad_norms: Record<ParamGroup, number>;
}

/** What one optimizer step did: the clip coefficient it applied and ‖Δθ‖, overall and per group. */
export interface UpdateNorms {
  clip_coef: number;
  step: number; // torch's state['step'] after this step (1 for the first)
  update_norm: number;
  group_update_norms: Record<ParamGroup, number>;
}

/** clip_grad_norm_'s coefficient for max_grad_norm (≤ 0: no clipping, 1); a non-finite norm is refused. */
export function clipCoefFor(norms: GradNorms, maxGradNorm: number): number {
  return maxGradNorm > 0 ? clipCoef(norms.grad_norm, maxGradNorm) : 1;
}

/** √ of the per-group sums of per-tensor sums of squares (float64). */
function groupNorms(params: Param[], sumsqs: ArrayLike<number>): Record<ParamGroup, number> {
  const acc: Record<ParamGroup, number> = {};
  params.forEach((p, i) => (acc[p.group] = (acc[p.group] ?? 0) + sumsqs[i]));
  for (const g of Object.keys(acc)) acc[g] = Math.sqrt(acc[g]);
  return acc;
}

/**
 * AdamW or SGD over a model's parameters, with its state on the GPU. `gradNorms()` then `step()` take one
 * clipped step; `reset()` forgets the state (the next step is step 1 again).
 */
/** The optimizer's moments by parameter and its step count, as saveState() copied them. */
export interface OptimizerState {
  t: number;
  state: Map<string, GPUBuffer[]>;
}

export class Optimizer {
  private readonly params: Param[];
  private state = new Map<string, GPUBuffer[]>(); // AdamW: [exp_avg, exp_avg_sq]; SGD with momentum: [momentum_buffer]
  /** Steps taken (torch's state['step']). */
  t = 0;

  constructor(
    private readonly gpu: Gpu,
    params: Iterable<Param>,
    private cfg: OptimizerConfig,
  ) {
    this.params = [...params];
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

  private stateOf(rec: Recorder, p: Param): GPUBuffer[] {
    let s = this.state.get(p.name);
    if (!s) {
      const n = this.config.name === 'adamw' ? 2 : this.config.momentum ? 1 : 0;
      const names = this.config.name === 'adamw' ? ['exp_avg', 'exp_avg_sq'] : ['momentum_buffer'];
      s = Array.from({ length: n }, (_, k) => {
        const b = this.gpu.createBuffer(`${names[k]}.${p.name}`, numel(p.shape) * 4);
        rec.clear(b);
        return b;
      });
      this.state.set(p.name, s);
    }
    return s;
  }

  private gradOf(grads: Map<string, GPUBuffer>, p: Param): GPUBuffer {
    const g = grads.get(p.name);
    if (!g) throw new Error(`optimizer: no gradient for "${p.name}" (run backward first)`);
    return g;
  }

  /** Σ x² of one tensor per parameter (what `record` sums into out[i]): one dispatch pair per tensor and one readback of (P) floats. */
  private async sumsqs(label: string, record: (rec: Recorder, out: GPUBuffer) => void): Promise<Float32Array> {
    const P = this.params.length;
    const out = this.gpu.createBuffer(label, P * 4); // (P)
    try {
      const rec = this.gpu.recorder(label);
      record(rec, out);
      await rec.submit();
      return await this.gpu.readF32(out, P);
    } finally {
      out.destroy();
    }
  }

  /** The global gradient norm before clipping and the norm of each parameter group. Throws on a non-finite gradient. */
  async gradNorms(grads: Map<string, GPUBuffer>): Promise<GradNorms> {
    const sums = await this.sumsqs('grad_sumsq', (rec, out) =>
      this.params.forEach((p, i) => sumsq_forward(rec, { inp: this.gradOf(grads, p), n: numel(p.shape), out, outIndex: i })),
    );
    const grad_norm = globalNorm(sums);
    if (!Number.isFinite(grad_norm)) {
      const bad = this.params.filter((_, i) => !Number.isFinite(sums[i])).map((p) => p.name);
      throw new RangeError(`gradient norm is ${grad_norm}: non-finite gradient in ${bad.slice(0, 3).join(', ')}${bad.length > 3 ? ` and ${bad.length - 3} more` : ''}; refusing to step`);
    }
    return { grad_norm, group_grad_norms: groupNorms(this.params, sums) };
  }

  /**
   * One AdamW / SGD step on every parameter with the gradients scaled by `clip_coef` (clipCoefFor), and
   * ‖Δθ‖ per group. θ before and after are both needed for Δθ: one scratch tensor serves every parameter
   * in turn (the passes of one encoder run in order): θ_old is copied into it, θ steps, then
   * scratch −= 1·θ_new (sgd_step with lr 1 and no decay is exactly that axpy) and its Σ x² is taken.
   */
  async step(grads: Map<string, GPUBuffer>, clip_coef: number): Promise<UpdateNorms> {
    const c = this.config;
    const step = this.t + 1;
    const maxN = Math.max(...this.params.map((p) => numel(p.shape)));
    const sums = await this.sumsqs('update_sumsq', (rec, out) => {
      const prev = rec.scratch('theta_old', maxN * 4);
      this.params.forEach((p, i) => {
        const n = numel(p.shape);
        const grad = this.gradOf(grads, p);
        rec.copy(p.buffer, 0, prev, 0, n * 4);
        const s = this.stateOf(rec, p);
        const weightDecay = c.no_decay === 'biases_and_norms' && hfNoDecay(p.name) ? 0 : c.weight_decay;
        if (c.name === 'adamw') {
          adamw_step(rec, { param: p.buffer, grad, m: s[0], v: s[1], n, lr: c.lr, beta1: c.betas[0], beta2: c.betas[1], eps: c.eps, weightDecay, step, gradScale: clip_coef });
        } else {
          sgd_step(rec, { param: p.buffer, grad, n, lr: c.lr, weightDecay, gradScale: clip_coef, momentum: c.momentum, buf: s[0], step });
        }
        sgd_step(rec, { param: prev, grad: p.buffer, n, lr: 1, weightDecay: 0, gradScale: 1 });
        sumsq_forward(rec, { inp: prev, n, out, outIndex: i });
      });
    });
    this.t = step;
    return { clip_coef, step, update_norm: globalNorm(sums), group_update_norms: groupNorms(this.params, sums) };
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
    this.destroy();
    this.state = saved.state;
    this.t = saved.t;
  }

  /** Forgets the optimizer state: the next step is step 1 from zero moments. */
  reset(): void {
    this.destroy();
    this.t = 0;
  }

  destroy(): void {
    for (const s of this.state.values()) for (const b of s) b.destroy();
    this.state = new Map();
  }
}
