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
  /**
   * The loss stage. Without a trainer objective every field is the studio loss's (TRL's clipped objective with
   * GrpoLossConfig). Under one (`objective` set) every number is that trainer's (src/grpo/step_train.ts
   * trainerShown): its per-token loss, KL, aggregation weights, ratio, clip flags, losses table and split; a
   * field the trainer does not form is null / NaN, never the studio's in its place.
   */
  loss: {
    old_per_token_logps: PerToken;
    /** exp(logp − old) as the loss takes it (token, or sequence under importance_sampling_level / gspo); verl / OpenRLHF: their kernel's ratio (±20 clamp, rollout base in bypass mode). */
    importance_ratio: PerToken;
    /** The KL estimator of the loss (TRL k3; verl kl_loss_type with its clamps; OpenRLHF compute_approx_kl ±10); null: the loss has no KL term. */
    per_token_kl: PerToken | null;
    /**
     * The per-token loss the aggregation sums: TRL's per_token_loss (IS weight, off-policy / entropy masks and β·KL
     * in), verl's pg_losses (rollout IS weight in), OpenRLHF's loss matrix, as the trainer forms it: a token its
     * aggregation does not count (a rejected or masked token) keeps its value with token_weight 0; NaN where the
     * trainer forms none (verl geo_mean).
     */
    per_token_loss: PerToken;
    /**
     * ∂loss/∂per_token_loss: the token's weight in the loss's aggregation, the run's scalings in (TRL's gas,
     * num_items_in_batch / num_processes; verl's micro-batch scale). Σ per_token_loss·token_weight = policy_term
     * (+ kl_term under TRL, whose per_token_loss holds β·KL).
     */
    token_weight: PerToken;
    clip: Uint32Array; // CLIP_LOW | CLIP_HIGH | DELTA_BINDS bits
    loss: number;
    /**
     * The loss under every aggregation, keyed by the studio's AGGREGATIONS names. Under a trainer objective: the
     * trainer's own loss with its aggregation setting changed (TRL: every loss_type, including those that are no
     * studio aggregation, sapo / cispo / luspo / vespo; verl: every loss_agg_mode; OpenRLHF: its one), so
     * losses[aggregation] === loss; a name the trainer has no aggregation for is NaN (step_objective.ts trainerLosses).
     */
    losses: Record<LossType, number> & Record<string, number>;
    /**
     * The studio loss's own aggregations (TRL's clipped objective with GrpoLossConfig, the studio's per-token loss):
     * under a trainer objective a studio-only view, not the trainer's numbers (the worker's what-if self-check compares
     * the studio loss with it); without one, `losses` itself.
     */
    studio_losses: Record<LossType, number>;
    /** The name in `losses` whose value is `loss`: the studio's loss_type, or the trainer's (TRL loss_type, verl loss_agg_mode, OpenRLHF's by policy loss type). */
    aggregation: string;
    /** The loss without its KL term (and, under a trainer, without its entropy bonus: loss − policy_term − kl_term). */
    policy_term: number;
    kl_term: number; // the KL term: β·KL (verl kl_loss_coef, OpenRLHF kl coef), its aggregation
    mean_kl: number; // Σ M·KL / Σ M over the loss's tokens (the trainer's loss_mask); NaN without a KL term
    /** The trainer objective that formed `loss` and the gradient (null: the studio loss). */
    objective: TrainerObjective | null;
    /** Why the objective could not be formed (a setting, named): the loss and per-token fields are NaN and the backward refuses with it. */
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
    /** As the loss stage's per_token_kl / per_token_loss, after the step (the trainer's under a trainer objective). */
    post_per_token_kl: PerToken | null;
    post_per_token_loss: PerToken;
    loss_after: number;
    /** As the loss stage's `losses`, after the step. */
    losses_after: Record<LossType, number> & Record<string, number>;
  };
}

/** A pass over the same batch after the first (μ > 1): its forward against the fixed old log-probs, loss and step. */
export interface PassData {
  pass: number; // 2 … μ
  per_token_logps: PerToken; // the policy's at this pass (after pass − 1 steps)
  importance_ratio: PerToken; // exp(logp − old): ≠ 1 from pass 2 on
  per_token_kl: PerToken | null;
  per_token_loss: PerToken;
  token_weight: PerToken; // as the loss stage's
  clip: Uint32Array; // CLIP_LOW | CLIP_HIGH | DELTA_BINDS bits
  clip_counts: ClipCounts;
  loss: number;
  mean_kl: number; // Σ M·KL / Σ M (as the loss stage's: the trainer's KL and tokens under a trainer objective)
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
