// The step pipeline's data: where an update starts (StepSource), what each stage shows (StageData, read
// back to the CPU), and StepState, the one record through which stages hand their outputs to each other:
// one optional field per stage holding its shown data and, for GPU stages, the device buffers the next
// stages consume in place (activations, log-probs, the loss's gradient, optimizer state).
import type { Gpu, GpuStats } from '../gpu/context.ts';
import type { ChatMessage, GrpoBatch } from '../io/batch.ts';
import type { Decoder, FinishReason, GenerateOptions } from '../model/generate.ts';
import type { CausalLM } from '../model/model.ts';
import type { ParamGroup } from '../model/config.ts';
import type { CompletionScores } from '../model/score.ts';
import type { RenderOptions, Tokenizer } from '../tokenize/tokenizer.ts';
import type { GroupStats } from './advantages.ts';
import type { PaddedBatch } from './batch.ts';
import type { ClipCounts, GrpoLossResult, LossType } from './loss.ts';
import type { Optimizer, OptimizerConfig } from './optimizer.ts';
import type { JsRewardRunner, RewardSpec, RewardTable } from './rewards.ts';
import type { StageId } from './stages.ts';
import type { StepConfig } from './step_config.ts';
import type { Retokenized, ToolLoopSettings, ToolRunner } from './tool_loop.ts';
import type { TrainerGrad, TrainerObjective } from './step_objective.ts';
import type { WeightUndo } from './step_undo.ts';

// ------------------------------------------------------------------------------------------ sources

/** Where the update starts: an imported batch, or prompts to render, sample and score. */
export type StepSource = { kind: 'batch'; batch: GrpoBatch } | PromptSource;

export interface PromptSource {
  kind: 'prompts';
  prompts: { messages: ChatMessage[]; answer: string }[];
  tokenizer: Tokenizer;
  render?: RenderOptions;
  /** Sampler settings, G, max_new_tokens, seed; pad / EOS default to the tokenizer's. */
  generation: Omit<GenerateOptions, 'pad_token_id' | 'eos_token_ids' | 'on_step'> & { pad_token_id?: number; eos_token_ids?: number[] };
  /** The decoder over the policy (src/model/generate.ts kvDecoder). */
  decoder: () => Decoder;
  rewards: RewardSpec[];
  /** Runs user JS rewards with a time limit (the sandbox worker in the browser). */
  runJs: JsRewardRunner;
  /**
   * The multi-turn tool loop (TRL's GRPOTrainer `tools`): the JSON schemas the prompts are rendered with, how
   * the loop builds each next turn and when it stops (the completion budget is generation.max_new_tokens), and the runner of the calls (the sandbox worker in the
   * browser). Absent: one turn per completion.
   */
  tools?: { schemas: Record<string, unknown>[]; loop: Omit<ToolLoopSettings, 'max_completion_length'>; run: ToolRunner };
}

export interface StepPipelineOptions {
  policy: CausalLM;
  /**
   * The reference policy; null: a frozen copy of the policy when β > 0 (the policy itself before the
   * step, so its weights must not have changed), none when β = 0.
   */
  reference: CausalLM | null;
  /** What `reference` is, for the reference stage's label (default: a model called "reference"; with no reference, a frozen copy). */
  reference_source?: ReferenceSource;
  config: StepConfig;
  /**
   * A prompt-set update's StepConfig for the width its completions turn out to have (the assembled batch's widest
   * completion: what `grpo-studio` reads from the exported file, and the studio loss's L_max where no setting gives
   * max_completion_length). The pipeline takes it once the sample stage ran; `config` stands in before (nothing
   * read until then depends on the width).
   */
  configForWidth?: (C: number) => StepConfig;
  source: StepSource;
  /** Keep a copy of the weights before the step so reset() can restore them (the studio; costs one copy of the weights). */
  undo?: boolean;
  /**
   * An optimizer carried over from earlier updates of this policy (the studio continuing from stepped
   * weights): its moments and step count go on, as a trainer's next step; its config must be `config`'s.
   * The caller owns it. Absent: a fresh optimizer, step 1 from zero moments.
   */
  optimizer?: Optimizer;
}

/**
 * Which reference the KL is measured against: a frozen copy of the policy as loaded (TRL's default with
 * β > 0: a snapshot taken at load, or the policy itself while its weights are unchanged), a second
 * checkpoint, or, under a LoRA adapter, the base with the adapter disabled (TRL + PEFT) or a frozen copy
 * of the loaded adapter (TRL handed an already-wrapped PeftModel).
 */
export type ReferenceSource = { kind: 'frozen-copy' } | { kind: 'model'; name: string } | { kind: 'base-without-adapter' } | { kind: 'frozen-adapter' };

/** The reference stage's one-line answer to "KL to what?" (the page shows it as is). */
export function referenceLabel(r: ReferenceSource): string {
  switch (r.kind) {
    case 'frozen-copy':
      return 'frozen-copy of the loaded weights';
    case 'model':
      return `model ${r.name}`;
    case 'base-without-adapter':
      return 'base without adapter';
    case 'frozen-adapter':
      return 'frozen copy of the loaded adapter';
  }
}

// ------------------------------------------------------------------------------------------ results

/** A (B, C) per-token array over the padded completion grid; positions past a row's completion hold 0 or junk: read the masks. */
export type PerToken = Float32Array;

/** What each stage shows, read back to the CPU. */
export interface StageData {
  render: { prompt_texts: string[]; prompt_ids: number[][]; messages: ChatMessage[][] }; // one per prompt
  sample: {
    completion_ids: number[][];
    completion_texts: string[];
    sampling_per_token_logps: number[][];
    finish_reason: FinishReason[];
    decode_ms: number;
    /** The tool loop's rows (src/grpo/tool_loop.ts), when the prompts have tools: tool_mask, whole conversations, calls, re-tokenized stretches. */
    tools: { tool_mask: number[][]; messages: ChatMessage[][]; tool_calls: number[]; tool_failures: number[]; retokenized: Retokenized[][] } | null;
  };
  reward: RewardTable;
  advantages: { advantages: number[]; groups: GroupStats[] | null; from: 'batch' | 'rewards' };
  assemble: { batch: GrpoBatch; padded: PaddedBatch };
  policy_forward: { per_token_logps: PerToken; per_token_entropy: PerToken };
  reference_forward: {
    ref_per_token_logps: PerToken | null;
    /** 'batch': the batch's ref_per_token_logps, the trainer's own reference log-probs (no forward, or one to check them). */
    reference: ReferenceSource['kind'] | 'batch' | 'none';
    reference_label: string;
    /** With the batch's log-probs and a reference model loaded too: that model's log-probs against them over the loss tokens. */
    reference_check: { model: string; max_abs_diff: number; tokens: number } | null;
  };
  loss: {
    old_per_token_logps: PerToken;
    importance_ratio: PerToken;
    per_token_kl: PerToken | null;
    per_token_loss: PerToken;
    token_weight: PerToken; // ∂loss/∂per_token_loss under the chosen aggregation
    clip: Uint32Array; // CLIP_LOW | CLIP_HIGH | DELTA_BINDS bits
    loss: number;
    losses: Record<LossType, number>;
    policy_term: number; // the loss without β·KL
    kl_term: number; // β·KL, same aggregation
    mean_kl: number; // Σ M·KL / Σ M
    /** The trainer objective that formed `loss` and the gradient (null: the studio loss, whose split policy_term / kl_term are; NaN under a trainer). */
    objective: TrainerObjective | null;
    /** Why the objective could not be formed (a setting, named): the loss is NaN and the backward refuses with it. */
    objective_error: string | null;
    clip_counts: ClipCounts;
  };
  backward: { grad_norm: number; group_grad_norms: Record<ParamGroup, number> };
  /** The first pass's step (its clip coefficient, AdamW step count, ‖Δθ‖), and every later pass over the batch (μ > 1). */
  step: {
    optimizer: OptimizerConfig;
    clip_coef: number;
    step: number;
    update_norm: number;
    group_update_norms: Record<ParamGroup, number>;
    passes: PassData[];
    /** What the trainer's optimizer step sums besides the batch's gradient (other ranks, micro-batches), or null: the batch is the whole step (updateScope). */
    scope: string | null;
  };
  re_evaluate: {
    post_per_token_logps: PerToken;
    delta_per_token_logps: PerToken; // after − before
    post_per_token_kl: PerToken | null;
    post_per_token_loss: PerToken;
    loss_after: number;
    losses_after: Record<LossType, number>;
  };
}

/** A pass over the same batch after the first (μ > 1): its forward against the fixed old log-probs, loss and step. */
export interface PassData {
  pass: number; // 2 … μ
  per_token_logps: PerToken; // the policy's at this pass (after pass − 1 steps)
  importance_ratio: PerToken; // exp(logp − old): ≠ 1 from pass 2 on
  per_token_kl: PerToken | null;
  per_token_loss: PerToken;
  clip: Uint32Array; // CLIP_LOW | CLIP_HIGH | DELTA_BINDS bits
  clip_counts: ClipCounts;
  loss: number;
  mean_kl: number; // Σ M·KL / Σ M
  grad_norm: number;
  clip_coef: number;
  update_norm: number;
}

export interface StageResult<S extends StageId = StageId> {
  id: S;
  ms: number; // wall time, GPU work included
  gpuBytes: number; // bytes allocated by GPU buffers after the stage
  peakBytes: number; // the most allocated during the stage
  /** Dispatches, compute passes, bind-group cache hits/misses, bytes read back and CPU encoding ms of this stage. */
  gpuStats: GpuStats;
  /** Why the stage did not run (e.g. render / sample / reward for an imported batch). */
  skipped?: string;
  data: StageData[S] | null;
}

// ------------------------------------------------------------------------------------------ state

/** What GPU stages leave on the device for the stages after them (never read back). */
export interface StageDevice {
  assemble: { advantages: GPUBuffer; old_per_token_logps: GPUBuffer | null; loss_mask: GPUBuffer | null }; // (B), (B, C), (B, C) completion_mask · tool_mask when a tool mask exists
  /** Saved activations and per-token log-probs / lse / entropy (the backward recomputes the logits chunk by chunk). */
  policy_forward: { scores: CompletionScores };
  reference_forward: { ref_per_token_logps: GPUBuffer }; // (B, C)
  loss: { result: GrpoLossResult; trainer: TrainerGrad | null }; // trainer: the trainer objective's per-token gradient
  backward: { optimizer: Optimizer };
}

/** One stage's output: its shown data, plus its device buffers for a GPU stage. */
export type StageOutput<S extends StageId> = { data: StageData[S] } & (S extends keyof StageDevice ? { device: StageDevice[S] } : unknown);

/** The update so far: a field per completed stage (absent: not run yet, or skipped). */
export type StepState = { [S in StageId]?: StageOutput<S> };

/** A stage that did not run, and why. */
export interface Skipped {
  skipped: string;
}

/** What a stage runs with besides the state. */
export interface StageContext {
  readonly gpu: Gpu;
  readonly opts: StepPipelineOptions;
  /** Frees `x` with the update's buffers (reset / destroy). */
  own<T extends { destroy(): void }>(x: T): T;
  readonly weights: WeightUndo;
}

/** A completed stage's output, or an error naming the missing stage. */
export function need<S extends StageId>(state: StepState, id: S): StageOutput<S> {
  const out = state[id];
  if (!out) throw new Error(`stage "${id}" has no result`);
  return out as StageOutput<S>;
}
