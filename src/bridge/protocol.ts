// The typed contract between the page and the studio worker (src/worker/studio.worker.ts), and the
// `StepRunner` interface the worker drives (src/worker/runner.ts). All GPU work and every heavy loop run in
// the worker; the page only sends requests and receives results. Stage results are the step pipeline's
// own types (src/grpo/step_types.ts: StageData, StageResult) plus what the worker adds for the page (decoded
// token texts and the Doctor's report on the assembled batch); per-token results are flat (B, C)
// row-major Float32Arrays over the padded completion grid, shaped by the assemble stage's `padded`.
// Results are structured-cloned, not transferred: the pipeline keeps reading its own arrays.
// src/bridge/ holds this contract and the page's end of it (client.ts). The store and the worker
// (src/worker/) both import it, the worker never the client; it imports neither of them.
import type { DoctorReport, Finding } from '../doctor/types.ts';
import type { PendingCall } from '../grpo/tool_loop.ts';
import type { AdapterReport } from '../gpu/context.ts';
import type { GrpoBatch, InferredIds } from '../io/batch.ts';
import type { Gpu } from '../gpu/context.ts';
import type { StageData, StageResult as PipelineStageResult } from '../grpo/step_types.ts';
import type { JsRewardRunner, RewardSample, RewardSpec, RewardTable } from '../grpo/rewards.ts';
import type { PlanOptions, StepPlan } from '../model/plan.ts';
import type { NewLoraOptions } from '../model/lora_fields.ts';
import type { LogpLossResult } from '../grpo/loss_from_logps.ts';
import type { RowPart } from './rows.ts';
import type { ChatMessage } from '../io/batch.ts';
import type { BoundedRenderer } from '../tokenize/bounded_node.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { TemplateDiff, TemplateVariant } from '../tokenize/template_diff.ts';
import type { MismatchReport } from '../grpo/mismatch/types.ts';
import type { Correction, CorrectionEffect } from '../grpo/mismatch/corrections.ts';

export type { TemplateDiff, TemplateVariant };

// ------------------------------------------------------------------------------------------ stages

import type { StageId } from '../grpo/stages.ts';
export { STAGES, type StageId } from '../grpo/stages.ts';
// The page names the factor behind each token's effective-mask index (TrainerViewResult.mask_factor).
export { MASK_FACTORS } from '../grpo/trainers/effective_mask.ts';

export const STAGE_LABELS: Record<StageId, string> = {
  render: 'render chat template',
  sample: 'sample completions',
  reward: 'score rewards',
  advantages: 'group advantages',
  assemble: 'assemble batch',
  policy_forward: 'policy forward',
  reference_forward: 'reference forward',
  loss: 'loss',
  backward: 'backward',
  step: 'optimizer step',
  re_evaluate: 're-evaluate',
};

// ------------------------------------------------------------------------------------------ settings

// What the page sends with its requests (src/bridge/protocol_settings.ts).
export type { ModelChoice, PromptItem, SamplingSettings, ToolSettings, WeightsMode, StepSettings, TrainerTerms, TrainerView } from './protocol_settings.ts';
import type { ModelChoice, StepSettings, TrainerTerms, TrainerView } from './protocol_settings.ts';
import type { EffectiveSettings } from '../grpo/settings/effective.ts';
import type { TrainerId } from '../grpo/settings/types.ts';

// ------------------------------------------------------------------------------------------ results

export interface ModelInfo {
  name: string;
  model_type: string;
  architectures: string[];
  num_parameters: number;
  dtype: string;
  vocab_size: number;
  /** config.json's non-zero dropout probabilities (ModelConfig.dropout): a step whose trainer trains with them on is refused. */
  dropout: Record<string, number>;
  /** None: a weights-only folder (no tokenizer.json); id batches step, the prompt set and the template diff are refused. */
  tokenizer: { kind: string; bos_token_id: number | null; eos_token_ids: number[]; pad_token_id: number | null; special_token_ids: number[] } | null;
  /** Where tokenizer is null, what that means for the page, in the Doctor's words (src/doctor/tokenizer_fit.ts NO_TOKENIZER). */
  no_tokenizer: string | null;
  chat_template: string | null;
  /** The step's memory plan (src/model/plan.ts, as `grpo-studio plan`) for the default task's prompts; the page asks for its current prompt set with a 'plan' request. */
  memory_plan: PagePlan;
  /** A second checkpoint loaded as the reference (β > 0), or null: the frozen copy of the policy as loaded. */
  reference: ReferenceInfo | null;
  /** The PEFT LoRA adapter the policy carries (only it trains), or null: every weight trains. */
  adapter: AdapterInfo | null;
}

/** A LoRA adapter for the loaded model: a dropped PEFT folder (adapter_config.json + adapter_model.safetensors), or a new one. */
export type AdapterChoice = { kind: 'local'; name: string; files: File[] } | { kind: 'create'; options: NewLoraOptions };

/**
 * The reference while an adapter is attached and no reference checkpoint is loaded: the base with the adapter
 * disabled (TRL creating the adapter from peft_config), or a frozen copy of the adapter as loaded (TRL handed
 * an already-wrapped PeftModel).
 */
export type AdapterReference = 'base-without-adapter' | 'frozen-adapter';

export interface AdapterInfo {
  name: string;
  r: number;
  lora_alpha: number;
  use_rslora: boolean;
  scaling: number;
  target_modules: string[] | string;
  modules: string[]; // the adapted linear modules, HF names
  num_parameters: number; // trainable: every A and B
  reference: AdapterReference;
  base_model_name_or_path: string | null;
}

/** The memory plan of one update of the page: the shape it was planned for, and the plan. */
export interface PagePlan {
  options: Omit<PlanOptions, 'limits'>;
  plan: StepPlan;
  /** For a full fine-tune: the same update under a new LoRA adapter (the create form's defaults), its base frozen in the checkpoint dtype — what the page proposes when `plan` is over the user's memory budget. */
  lora?: { options: Omit<PlanOptions, 'limits'>; plan: StepPlan };
}

/** A reference checkpoint held beside the policy: what the reference stage will name, and its GPU bytes. */
export interface ReferenceInfo {
  name: string;
  model_type: string;
  num_parameters: number;
  dtype: string;
  bytes: number;
}

/** Load progress as the page shows it: what is loading, bytes so far and in all (0 = unknown). */
export interface LoadProgress {
  label: string; // "policy weights: model.safetensors", "tokenizer", "reference weights"
  loaded: number;
  total: number;
}

/** Decoded text of every prompt and completion token, (B, *) like the ids. */
/**
 * The tokenizer's text of each token id the batch holds: a token's text alone does not depend on where it
 * stands, so the page gets one string per distinct id (at most the vocabulary), not one per token (2.6M
 * strings for a 1,024 × 2,560 batch, the slowest part of handing a big import to the page).
 */
export interface TokenTexts {
  by_id: Record<number, string>;
}

/** What the runner adds to a stage's pipeline data for the page. */
export interface StageExtras {
  assemble: {
    /** Decoded text of every token (special tokens as written), for the grid and the inspector; null without a tokenizer (ids shown). */
    token_texts: TokenTexts | null;
    /** The Doctor's report on the assembled batch. */
    report: DoctorReport;
  };
  loss: {
    /** The chosen trainer's objective on the same log-probs (the studio loss above drives the gradient). */
    trainer?: TrainerView;
    /**
     * The Doctor's report again, now that old_per_token_logps exist (the policy's own, before the step):
     * the sampler-vs-trainer log-prob rule needs both arrays, and at assemble only the sampler's exist.
     */
    report: DoctorReport;
  };
}

/** A stage's data as the page receives it: the pipeline's StageData, plus StageExtras where a stage has some. */
export type StagePayloads = { [S in StageId]: StageData[S] & (S extends keyof StageExtras ? StageExtras[S] : unknown) };

/** The pipeline's StageResult (id, ms, gpuBytes, peakBytes, skipped; its GPU work counters when known) carrying the page's payload. */
export type StageResult<S extends StageId = StageId> = Omit<PipelineStageResult<S>, 'data' | 'gpuStats'> & Partial<Pick<PipelineStageResult<S>, 'gpuStats'>> & { data: StagePayloads[S] | null };

/** One side of a what-if: the loss's per-token terms on the update's batch under one set of loss settings. */
export interface WhatIfSide {
  terms: LogpLossResult;
  advantages: Float32Array; // (B) the advantages these settings give (rescaled from the rewards where they can be)
}

/**
 * A what-if on the current update's batch: the loss recomputed from the log-probs of its policy forward
 * (before the step) under other loss-side settings; no resampling, no forward, no weight change. `current`
 * is recomputed the same way with the settings the update ran with, so the two sides differ only in the
 * settings. `notes` name settings a what-if cannot change (temperature needs a new forward).
 */
export interface WhatIfResult {
  /** The what-if's settings (the update's under the what-if's edits), in the trainer's names. */
  settings: EffectiveSettings;
  current: WhatIfSide;
  whatif: WhatIfSide;
  /** |current loss − the loss stage's loss|: the recomputation's self-check (float32 rounding only). */
  check: number;
  /**
   * The what-if trainer's objective, or why not, beside the update's own terms: `current` is null when the
   * what-if names another trainer than the update ran (its objective has no value for the update).
   */
  trainer: { trainer: TrainerId; current: TrainerTerms | null; whatif: TrainerTerms | null; error: string | null; /** values the refusal offers */ offer: Record<string, unknown> | null };
  notes: string[];
  ms: number;
}

/** One side of the before/after check: the completions of the prompt set and their rewards. */
export interface SampledSide {
  completion_texts: string[];
  lengths: number[]; // completion tokens per sample
  rewards: number[]; // (B) combined
  rewards_per_func: number[][]; // (B, F)
}

/** The update's own samples (before the step) and the same prompts re-sampled with the same seed after it. */
export interface BeforeAfterResult {
  G: number;
  names: string[]; // reward function names (F)
  before: SampledSide;
  after: SampledSide;
}

/**
 * Which batch the mismatch explorer reads, as the worker holds it (the page never sends a batch back: cloning
 * a 1,024 × 2,560 batch would hold its thread): the import of request `import` (the one on screen), or the
 * current update's assembled batch, whose trainer side is the batch's old_per_token_logps or else the
 * policy's own log-probs before the step (the loss stage's).
 */
export type MismatchOf = { kind: 'import'; import: number } | { kind: 'update' };

/** Per-token d = trainer − sampler of every row, packed and transferred: row b is values[offsets[b] … offsets[b + 1]), NaN where not compared. */
export interface PackedLogRatio {
  values: Float32Array;
  offsets: Int32Array;
}

/** The explorer's answer: the analysis (src/grpo/mismatch) computed in the worker, and the rows of its heat. */
export interface MismatchResult {
  /** null when the batch lacks a side: `missing` names the field. */
  report: MismatchReport | null;
  missing: string | null;
  log_ratio: PackedLogRatio | null;
  /** The trainer side was scored with the loaded model (and the base with its adapter off, when one is loaded). */
  recomputed: boolean;
  ms: number;
}

/** One correction to weigh on the explorer's batch: a CORRECTIONS id, with the user's edits of its control rows (the trainer's names). */
export interface CorrectionVariant {
  id: string;
  edits?: Record<string, unknown>;
}

/** A correction's effect as the page gets it: the counts, ESS, loss and gradient change; its (B, T) arrays stay in the worker. */
export type CorrectionSummary = Omit<CorrectionEffect, 'weights' | 'gradient_factor'>;

/**
 * What each asked correction would do on the explorer's batch (src/grpo/mismatch/corrections.ts, the loss on the
 * GPU), against the trainer side of its last analysis (the batch's, or the recompute); `table`: every correction
 * the explorer offers (the page draws its controls from it and the trainers' settings tables).
 */
export interface CorrectionsResult {
  table: readonly Correction[];
  effects: CorrectionSummary[];
  ms: number;
}

/** The pad / EOS ids a batch's reader inferred rather than read, each with what from (ImportResult.inferred). */
export type { InferredIds } from '../io/batch.ts';

/**
 * Where an update starts: the prompt set (render → sample → reward), or an imported batch (those three skipped)
 * with the ids its reader inferred, so the Doctor of its stages judges it as the import and `grpo-studio doctor` do.
 */
export type StepStart = { kind: 'prompts' } | { kind: 'batch'; batch: GrpoBatch; inferred?: InferredIds };

/**
 * The one-step pipeline as the worker drives it (src/worker/runner.ts over src/grpo/step.ts). Stages run
 * strictly in STAGES order; `render` starts a new update from `start` (default: the prompt set) with the
 * settings of that moment; `reset` goes back to before `render` keeping the loaded model (and undoing
 * the optimizer step, if taken).
 */
export interface StepRunner {
  load(source: ModelChoice, onProgress: (p: LoadProgress) => void): Promise<ModelInfo>;
  /**
   * Loads a second checkpoint as the reference of the next updates (its vocabulary must be the policy's);
   * null drops it (back to the frozen copy). Answers the policy's ModelInfo with the reference and plan updated.
   */
  loadReference(source: ModelChoice | null, onProgress: (p: LoadProgress) => void): Promise<ModelInfo>;
  /**
   * Attaches a LoRA adapter (null removes it): the policy then holds its base in checkpoint dtype (bf16 stays
   * bf16; a bf16 model is reloaded for that, and again in f32 when the adapter is removed) and only the adapter
   * trains. Drops the current update and the optimizer; the base goes back to its weights as loaded.
   */
  loadAdapter(choice: AdapterChoice | null, onProgress: (p: LoadProgress) => void): Promise<ModelInfo>;
  /** Which reference the next updates use while an adapter is attached (drops the current update). */
  adapterReference(reference: AdapterReference): Promise<ModelInfo>;
  /**
   * Gradient checkpointing in the next updates' backward (kept for models loaded later): each layer recomputed from
   * its saved input instead of all activations kept, the same gradients bit for bit in less memory and more time.
   * Drops the current update; the ModelInfo's plan says the memory (memory_plan.options.checkpointing).
   */
  setCheckpointing(on: boolean): Promise<ModelInfo>;
  /** The stepped adapter as a PEFT folder: file name → bytes. */
  saveAdapter(): Promise<Record<string, Uint8Array>>;
  /** Runs the stage after the last completed one and returns its result. */
  runStage(stage: StageId, settings: StepSettings, start?: StepStart): Promise<StageResult>;
  /** Drops the update; undo (default) also undoes its optimizer step, else the stepped weights stay (the next update continues from them). */
  reset(undo?: boolean): Promise<void>;
  /** The loss of the current update's batch under other loss settings and trainer preset (default: the update's); the update must have reached its loss stage. */
  whatIf(settings: EffectiveSettings): Promise<WhatIfResult>;
  /** The memory plan of an update with `settings`' prompts, G and completion length, as the step would run it now. */
  plan(settings: StepSettings, batch?: { B: number; P: number; C: number }): PagePlan;
  /** Re-samples the update's prompts with the same seed from the stepped weights and scores them (the update must have taken its step). */
  beforeAfter(): Promise<BeforeAfterResult>;
  /**
   * The Doctor's report on an imported batch with the loaded model (src/worker/inspect.ts): where its tokenizer
   * fits the batch, the retokenization and chat-template rules run and the token texts come with it; where it
   * does not, or without a loaded model, the report without them (the skipped list says why).
   */
  inspect(batch: GrpoBatch, opts?: { deferTokenizerRules?: boolean; inferred?: InferredIds }): { report: DoctorReport; token_texts?: TokenTexts; /** the tokenizer rules were skipped, to run later */ deferred?: boolean };
  /** The current update's batch with its trainer side (old_per_token_logps: the batch's, else the loss stage's); null before its loss stage. */
  updateBatch(): GrpoBatch | null;
  /**
   * The trainer side of `batch` scored with the loaded model as it is now (its LoRA adapter on), and with the
   * adapter off (`base`, null without an adapter), at the temperature and position ids `settings` resolve to.
   */
  scoreSides(batch: GrpoBatch, settings: EffectiveSettings): Promise<{ trainer: number[][]; base: number[][] | null }>;
  /** The loaded tokenizer's special ids and token texts where it fits `batch` (as the Doctor decides), else null. */
  tokenizerFor(batch: GrpoBatch): { special_ids: ReadonlySet<number>; tokenText: (id: number) => string } | null;
  /** The conversations rendered with two template variants by the loaded tokenizer, aligned token by token. */
  templateDiff(conversations: ChatMessage[][], variants: [TemplateVariant, TemplateVariant]): Promise<TemplateDiff>;
  dispose(): void;
}

/**
 * What src/worker/runner.ts exports for the worker. `runJsReward` runs user JS rewards in the sandbox worker
 * (with its time limit); the reward stage uses it for `kind: 'js'` rewards, the sample stage `runJsTools` for a
 * tool rollout's calls.
 */
export type CreateStepRunner = (
  gpu: Gpu,
  deps: {
    runJsReward: JsRewardRunner;
    /** Runs a multi-turn rollout's tool calls with the tools source (the sandbox worker in the page; default: the browser sandbox). */
    runJsTools?: JsToolRunner;
    /** Bounded chat-template rendering (the template sandbox in the page). */ templateRenderer?: (tok: Tokenizer) => BoundedRenderer;
  },
) => StepRunner;

/** Runs tool calls with a tools source, `timeout_ms` per call (src/worker/reward_sandbox.ts runJsTools). */
export type JsToolRunner = (source: string, calls: readonly PendingCall[], timeout_ms: number) => Promise<string[]>;

// ------------------------------------------------------------------------------------------ messages

export type { Finding };

/**
 * What went wrong, in the categories the page shows differently. 'notice': not a failure, but what the page did that
 * the user must know (an Export that leaves form edits out of its file, older stored settings not carried over).
 */
export type ErrorKind = 'bad-file' | 'unsupported-model' | 'out-of-memory' | 'device-lost' | 'no-webgpu' | 'gpu' | 'reward' | 'settings' | 'notice' | 'internal';

export interface WorkerErrorInfo {
  kind: ErrorKind;
  message: string;
  detail?: string;
}

export type Request =
  | { type: 'init' }
  /**
   * A file handle: the worker reads it (with progress), the page never holds its bytes. `also`: more files of the
   * same step (several rank files dropped or selected at once), merged with the first as the CLI merges them.
   */
  | { type: 'import-batch'; file: Blob; name: string; also?: { file: Blob; name: string }[] }
  /**
   * Stops request `target` (an import): its parse worker is terminated and its answer never comes; one the worker
   * already answered (the page cancelled as the answer arrived) is dropped, as the page drops it.
   */
  | { type: 'cancel'; target: number }
  /**
   * The import the page holds now (its request id), once it shows it: the worker keeps that batch for the requests
   * that name it (tokenizer-checks, mismatch) and drops every import answered before it.
   */
  | { type: 'hold-import'; import: number }
  /**
   * The full Doctor report (tokenizer rules included) on the batch of import request `import`, the one the page
   * holds, with the model loaded now: after the import's deferred checks, and again after another model is loaded.
   * An import the worker does not hold is an error, never an empty answer. `settings`: judge the batch with these
   * settings written into it (src/bridge/batch_settings.ts withSettings, as the page's Export writes them): the next
   * update's, once the user's edits make them other than the file's own, so the page's report is `grpo-studio
   * doctor`'s on its Export. Without a model loaded, the batch alone (the options the import's own report had).
   */
  | { type: 'tokenizer-checks'; import: number; settings?: EffectiveSettings }
  | { type: 'load-model'; source: ModelChoice }
  | { type: 'load-reference'; source: ModelChoice | null }
  | { type: 'load-adapter'; source: AdapterChoice | null }
  | { type: 'adapter-reference'; reference: AdapterReference }
  | { type: 'checkpointing'; on: boolean }
  | { type: 'save-adapter' }
  | { type: 'run-stage'; stage: StageId; settings: StepSettings; start?: StepStart }
  | { type: 'score-rewards'; rewards: RewardSpec[]; samples: RewardSample[] }
  | { type: 'what-if'; settings: EffectiveSettings }
  /** The memory plan of an update with these prompts and sampling settings, before it runs. */
  /** `batch`: the shape of the imported batch the next update steps (rows, longest prompt, longest completion); absent: the prompt set's. */
  | { type: 'plan'; settings: StepSettings; batch?: { B: number; P: number; C: number } }
  | { type: 'before-after' }
  | { type: 'template-diff'; conversations: ChatMessage[][]; variants: [TemplateVariant, TemplateVariant] }
  | { type: 'reset'; undo?: boolean }
  /**
   * The train–inference mismatch of a batch (src/grpo/mismatch), computed in the worker; `recompute`: the trainer
   * side scored with the loaded model under these settings (their temperature, position ids) instead of the batch's.
   */
  | { type: 'mismatch'; of: MismatchOf; recompute?: EffectiveSettings }
  /** What corrections would do on the batch the last 'mismatch' request analysed (`of` names it again). */
  | { type: 'mismatch-corrections'; of: MismatchOf; /** 'all': every correction the explorer offers, unedited */ variants: CorrectionVariant[] | 'all' };

/** Response payloads by request type. */
export interface Responses {
  init: { adapter: AdapterReport };
  /** The Doctor's report (schema problems included); report.skipped says which rules could not run. */
  /** tokenizer_checks: the rules needing the tokenizer were deferred (seconds on a big batch); ask for them with this id. */
  /** import: this request's id, which names the batch in later requests (mismatch). */
  /** inferred: the ids the reader inferred; an update from the batch sends them back with it (StepStart). */
  'import-batch': { import: number; batch: GrpoBatch; report: DoctorReport; token_texts?: TokenTexts; format: string; trainer: string; notes: string[]; tokenizer_checks: number | null; inferred?: InferredIds };
  /** token_texts: where the model's tokenizer fits the batch. */
  'tokenizer-checks': { report: DoctorReport; token_texts?: TokenTexts };
  cancel: Record<string, never>;
  'hold-import': Record<string, never>;
  'load-model': { model: ModelInfo };
  'load-reference': { model: ModelInfo };
  'load-adapter': { model: ModelInfo };
  'adapter-reference': { model: ModelInfo };
  checkpointing: { model: ModelInfo };
  'save-adapter': { files: Record<string, Uint8Array> };
  'run-stage': StageResult;
  'score-rewards': RewardTable;
  'what-if': WhatIfResult;
  plan: PagePlan;
  'before-after': BeforeAfterResult;
  'template-diff': TemplateDiff;
  reset: Record<string, never>;
  mismatch: MismatchResult;
  'mismatch-corrections': CorrectionsResult;
}

/** Page → worker: a request with an id; the worker answers with the same id. */
export interface RequestEnvelope {
  id: number;
  request: Request;
}

/** Worker → page: the answer to a request, or an unsolicited event (progress, device lost). */
export type WorkerMessage =
  | { id: number; ok: true; result: Responses[Request['type']] }
  | { id: number; ok: false; error: WorkerErrorInfo }
  /** Progress of request `id` (an import), or of the model load when `id` is absent. */
  | { event: 'progress'; progress: LoadProgress; id?: number }
  /** Row slices of request `id`'s result, sent before it (src/bridge/rows.ts). */
  | { event: 'rows'; id: number; parts: RowPart[] }
  | { event: 'device-lost'; error: WorkerErrorInfo };
