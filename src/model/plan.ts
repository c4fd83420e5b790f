// The memory plan of one GRPO step (`grpo-studio plan`, the page before a step): the bytes every GPU
// buffer of the step pipeline takes at its peak (backward + optimizer step, when everything is alive),
// split as the issue asks: weights, grads, optimizer, activations, logits chunk, reference, scratch.
// Sizes come from the same tables the runtime allocates from (src/model/memory.ts activation tables,
// config.ts parameter specs, lora.ts module shapes), and each big single buffer is checked against the
// adapter's maxBufferSize (does not fit) and maxStorageBufferBindingSize (bound in windows).
//
// What the runtime does, and so what is planned: full fine-tuning keeps f32 weights, grads and AdamW
// moments of every parameter, and its β > 0 reference is the policy's own pre-step log-probs (no memory);
// with a LoRA adapter the base is frozen in its checkpoint dtype (bf16 linear, head and embedding weights
// packed; scoring loads the same way), only A and B have f32 grads and moments, norm weights keep a
// gradient target, and the reference is the adapter-off view with an inference workspace of its own.
// The head runs in row chunks everywhere (src/model/head.ts): scoring (policy, reference, the `score`
// verb) holds one chunk of logits at a time, as many rows as one storage binding holds, never (rows, V);
// the backward recomputes each chunk's logits and writes dlogits over them, so it holds one chunk of
// logits plus the chunk's hidden rows and their gradient. `checkpointing` plans gradient checkpointing:
// only each layer's input is kept and one layer's activations are recomputed at a time. The reference
// frees its workspace once its log-probs are out, so the peak is the larger of two moments: the
// reference forward (weights, the policy's saved activations, grads of an earlier update, the reference
// workspace and its chunk) and the backward + optimizer step + re-evaluation (weights, grads,
// activations, backward scratch, and then either the head's backward chunk (beside the moments, when they
// are carried from an earlier update) or, once it is freed, the optimizer's moments and a scoring chunk
// (re-evaluation). The step itself allocates nothing of size: it
// takes ‖Δθ‖ in the update's own sweep (src/kernels/optimizer.ts), with no copy of θ_old.
import { attentionBackwardScratchBytes } from '../kernels/attention.ts';
import { linearModules } from './lora.ts';
import { backwardScratchSizes, layerActivationSizes, logitsChunkRows, sharedActivationSizes, type BufferLimits } from './memory.ts';
import { numel, paramSpecs, type ModelConfig } from './config.ts';

export interface PlanOptions {
  B: number; // rows (prompts × generations)
  T: number; // tokens per row, prompt + completion
  prompt: number; // prompt tokens: the head scores B·(T − prompt) rows
  /** LoRA rank on every linear layer (PEFT all-linear) or on `adapter_modules`; null: full fine-tuning. */
  adapter: number | null;
  /** The adapted linear modules (HF names) of an adapter with narrower target_modules; absent: all of them. */
  adapter_modules?: string[];
  checkpointing: boolean;
  /** Checkpoint dtype of the weights (config.json torch_dtype): a frozen base keeps bf16 weights packed. */
  dtype: 'f32' | 'bf16';
  /** Scoring only (no backward, no optimizer): the `score` verb. */
  scoreOnly?: boolean;
  limits: BufferLimits;
  /** Where `limits` come from (an adapter, or WebGPU's defaults), printed with the plan. */
  limits_from?: string;
  /**
   * Weights held beside the policy for the whole session (the page: the frozen copy of the weights as
   * loaded, and a second checkpoint loaded as reference), in bytes. The CLI holds none: its frozen-copy
   * reference is the policy's own pre-step log-probs.
   */
  held_reference_bytes?: number;
  /**
   * A later update of a run: the optimizer's moments are carried from the update before (a trainer's run, the
   * `step` bench), so they are alive from its first stage on, not only from its step.
   */
  carried?: boolean;
  /**
   * The page: it steps the same model update after update with one optimizer (its moments carried from one update
   * to the next, as `carried`) and keeps, for an exact undo of each step, a copy of the trainable weights and of the moments.
   */
  undo?: boolean;
}

export interface StepPlan {
  params: number;
  trainable_params: number;
  rows: number; // scored rows B·(T − prompt)
  bytes: {
    weights: number;
    grads: number;
    optimizer: number; // AdamW exp_avg + exp_avg_sq
    activations: number; // saved for the backward (or one layer's set when scoring)
    logits_chunk: number; // one chunk of logits (R, V) with its hidden rows (and their gradient in the backward)
    reference: number; // the reference forward's workspace
    scratch: number; // backward gradient scratch, LoRA intermediates, the kernels' device-wide scratch
    reference_weights: number; // held reference weights (PlanOptions.held_reference_bytes)
    undo: number; // the page's copy of the trainable weights and the optimizer's moments before the step
  };
  total_bytes: number; // the planned peak: max of the two moments below
  peak: 'reference forward' | 'backward + step' | 'scoring';
  /** Single buffers past a limit: 'does not fit' (maxBufferSize) or 'windowed' (bound in pieces). */
  buffers: { name: string; bytes: number; status: 'does not fit' | 'windowed' }[];
}

const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
const F = 4;

export function planStep(cfg: ModelConfig, o: PlanOptions): StepPlan {
  const { B, T } = o;
  const C = T - o.prompt;
  if (!(C >= 1 && o.prompt >= 1)) throw new RangeError(`plan: the prompt (${o.prompt} tokens) must leave at least one completion token of T = ${T}`);
  const rows = B * C;
  const specs = paramSpecs(cfg);
  const params = specs.reduce((s, p) => s + numel(p.shape), 0);
  const lora = o.adapter !== null;
  const frozen = lora || !!o.scoreOnly; // the `score` verb and a LoRA base load with storage 'checkpoint'
  const packed = (name: string, shape: number[]) => frozen && o.dtype === 'bf16' && shape.length === 2 && !name.endsWith('wpe.weight');
  const adapted = o.adapter_modules && new Set(o.adapter_modules);
  const modules = lora ? linearModules(cfg).filter((m) => !adapted || adapted.has(m.name)) : [];
  const r = o.adapter ?? 0;
  const adapterParams = modules.reduce((s, m) => s + r * (m.in + m.out), 0);
  const normParams = specs.filter((p) => /(norm|ln_[12f])\.(weight|bias)$/.test(p.name)).reduce((s, p) => s + numel(p.shape), 0);
  const trainable = lora ? adapterParams : params;

  const layer = sum(layerActivationSizes(cfg, B, T));
  const shared = sharedActivationSizes(cfg, B, T, C, true);
  // One head chunk (head.ts): logits and hidden rows, plus per row ids / mask / log-prob / lse / entropy
  // when scoring, or dhidden and ids / mask / lse / dlogp in the backward.
  const R = logitsChunkRows(cfg.vocab_size, rows, o.limits.maxStorageBufferBindingSize);
  const chunk = R * (cfg.vocab_size + cfg.hidden_size + 6);
  const backChunk = R * (cfg.vocab_size + 2 * cfg.hidden_size + 5);
  const N = B * T;
  const saved = o.scoreOnly ? layer : o.checkpointing ? cfg.num_hidden_layers * N * cfg.hidden_size + layer - N * cfg.hidden_size : cfg.num_hidden_layers * layer;
  const loraScratch = 2 * N * r * modules.length; // u and du per adapted module
  const optimizerBytes = o.scoreOnly ? 0 : 2 * trainable * F; // AdamW's exp_avg and exp_avg_sq
  const heads = { B, T, Hq: cfg.num_attention_heads, Hkv: cfg.num_key_value_heads, D: cfg.head_dim };
  const bytes = {
    weights: specs.reduce((s, p) => s + numel(p.shape) * (packed(p.name, p.shape) ? 2 : F), 0) + adapterParams * F,
    grads: o.scoreOnly ? 0 : (lora ? adapterParams + normParams : params) * F,
    optimizer: optimizerBytes,
    activations: (saved + sum(shared)) * F,
    logits_chunk: (o.scoreOnly ? chunk : backChunk) * F,
    // A reference other than the policy's own pre-step log-probs (the adapter-off view, a held frozen copy
    // or checkpoint) scores with a workspace of its own, sized here as the policy's (same shapes).
    reference: (lora || (o.held_reference_bytes ?? 0) > 0) && !o.scoreOnly ? (layer + sum(shared) + chunk) * F : 0,
    // ... plus attention's device-wide backward scratch (delta, dkdv's partials). The GEMM's split-K partials
    // (src/kernels/matmul.ts: under 9 MB, GPUs only) are left out: a bound that size would swamp a small model's plan.
    scratch: o.scoreOnly ? loraScratch * F : (sum(backwardScratchSizes(cfg, B, T, C)) + loraScratch) * F + attentionBackwardScratchBytes(heads),
    reference_weights: o.held_reference_bytes ?? 0,
    undo: o.undo && !o.scoreOnly ? trainable * F + optimizerBytes : 0, // weights + the moments (Optimizer.saveState)
  };
  // Fused attention keeps no (B, Hq, T, T) probabilities (src/kernels/attention.ts): none to check.
  const buffers: StepPlan['buffers'] = [];
  for (const [name, b] of [['logits chunk (R, V)', R * cfg.vocab_size * F], ['embedding (V, C)', cfg.vocab_size * cfg.hidden_size * (packed('embedding', [cfg.vocab_size, cfg.hidden_size]) ? 2 : F)], ['MLP hidden (N, I)', N * cfg.intermediate_size * F]] as const) {
    if (b > o.limits.maxBufferSize) buffers.push({ name, bytes: b, status: 'does not fit' });
    else if (b > o.limits.maxStorageBufferBindingSize) buffers.push({ name, bytes: b, status: 'windowed' });
  }
  const common = bytes.weights + bytes.reference_weights + bytes.activations;
  // The backward's gradient scratch stays in the policy's workspace once the first update has made it, and a carried
  // optimizer (the page's) keeps its moments between updates: from the second update on both are alive at the reference forward.
  const carried = o.carried || o.undo ? bytes.optimizer : 0;
  const atReference = common + bytes.grads + bytes.scratch + bytes.reference + carried;
  // The backward's chunk is freed when it is submitted, before a first update's optimizer allocates its moments
  // (carried moments are alive under it).
  const afterBackward = bytes.optimizer + chunk * F;
  // The undo copies are taken before the weights change, once the backward has run: alive at the step.
  const atStep = common + bytes.grads + bytes.scratch + Math.max(bytes.logits_chunk + carried, afterBackward + bytes.undo);
  const peak = o.scoreOnly ? 'scoring' : atReference > atStep ? 'reference forward' : 'backward + step';
  return { params, trainable_params: trainable, rows, bytes, total_bytes: o.scoreOnly ? common + bytes.logits_chunk + bytes.scratch : Math.max(atReference, atStep), peak, buffers };
}

/** The plan as the CLI prints it. */
export function formatStepPlan(name: string, o: PlanOptions, p: StepPlan): string {
  const gib = (x: number) => `${(x / 2 ** 30).toFixed(3)} GiB`;
  const what = o.scoreOnly ? 'scoring' : o.adapter !== null ? `LoRA r = ${o.adapter} (${o.adapter_modules ? `${o.adapter_modules.length} modules` : 'all linear layers'})` : 'full fine-tuning';
  const lines = [
    `${name}: ${(p.params / 1e6).toFixed(1)}M params, ${what}, batch ${o.B}×${o.T} (prompt ${o.prompt}), ${p.rows} scored rows${o.checkpointing ? ', gradient checkpointing' : ''}`,
    // What only the page holds (a reference copy, the undo copy) is listed where it is held.
    ...Object.entries(p.bytes).filter(([k, v]) => v > 0 || (k !== 'reference_weights' && k !== 'undo')).map(([k, v]) => `  ${k.padEnd(17)} ${gib(v).padStart(12)}`),
    `  ${'total'.padEnd(17)} ${gib(p.total_bytes).padStart(12)}   (peak at the ${p.peak}; the reference's workspace is freed before the backward)`,
  ];
  if (o.limits_from) lines.push(`  limits: maxBufferSize ${gib(o.limits.maxBufferSize)}, maxStorageBufferBindingSize ${gib(o.limits.maxStorageBufferBindingSize)} (${o.limits_from})`);
  for (const b of p.buffers) lines.push(b.status === 'does not fit' ? `  ! ${b.name} is ${gib(b.bytes)} > maxBufferSize ${gib(o.limits.maxBufferSize)}: does not fit` : `  ${b.name} is ${gib(b.bytes)} > maxStorageBufferBindingSize: bound in windows`);
  return lines.join('\n');
}
