// The typed contract between the page and the studio worker (src/worker/studio.worker.ts), and the
// `StepRunner` interface the one-step GRPO pipeline implements. All GPU work and every heavy loop run in
// the worker; the page only sends requests and receives results. Per-token results travel as flat,
// row-major typed arrays over the padded (B, C) completion grid (C = widest completion) and are
// transferred, not copied; the page keeps them outside React state (src/store/results.ts).
import type { DoctorReport, Finding } from '../doctor/types.ts';
import type { AdapterReport } from '../gpu/context.ts';
import type { ChatMessage, GrpoBatch } from '../io/batch.ts';
import type { Gpu } from '../gpu/context.ts';
import type { JsRewardRunner, RewardSample, RewardSpec, RewardTable } from '../grpo/rewards.ts';
import type { MemoryPlan } from '../model/memory.ts';
import type { SamplingSettings as SamplerSettings } from '../model/sampler.ts';

// ------------------------------------------------------------------------------------------ stages

/** The stages of one GRPO update, in order. */
export const STAGES = [
  'render',
  'sample',
  'reward',
  'advantages',
  'assemble',
  'policy_forward',
  'reference_forward',
  'loss',
  'backward',
  'step',
  're_evaluate',
] as const;
export type StageId = (typeof STAGES)[number];

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

/**
 * Where the model comes from, as the page can send it: the worker turns it into a src/model ModelSource.
 * A local folder travels as its File objects (structured-cloneable; paths in webkitRelativePath).
 */
export type ModelChoice =
  | { kind: 'embedded'; name: string; /** absolute URL of public/models/<name>/ as the page sees it */ url: string }
  | { kind: 'hub'; id: string; revision?: string }
  | { kind: 'local'; name: string; files: File[] };

/** One prompt of the prompt set: chat messages (system + user) and the reference answer rewards may use. */
export interface PromptItem {
  system: string;
  user: string;
  answer: string;
}

/** The sampler's settings (src/model/sampler.ts) plus what one studio step adds around them. */
export interface SamplingSettings extends Omit<SamplerSettings, 'eos_token_ids'> {
  num_generations: number; // G
  max_new_tokens: number;
  seed: number;
  /** EOS ids; null = the tokenizer's / generation config's. */
  eos_token_ids: number[] | null;
}

/** TRL loss types and verl aggregations (the golden README defines each). */
export const LOSS_TYPES = ['grpo', 'bnpo', 'dr_grpo', 'dapo'] as const;
export const AGGREGATIONS = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'] as const;
export type LossType = (typeof LOSS_TYPES)[number];
export type Aggregation = (typeof AGGREGATIONS)[number];
/** Every aggregation a loss result reports, TRL's and verl's. */
export const ALL_AGGREGATIONS = [...LOSS_TYPES, ...AGGREGATIONS] as const;
export type AnyAggregation = (typeof ALL_AGGREGATIONS)[number];

export interface LossSettings {
  /** The aggregation that drives the gradient: a TRL loss_type or a verl aggregation. */
  loss_type: AnyAggregation;
  beta: number;
  kl_estimator: 'k1' | 'k2' | 'k3';
  epsilon_low: number;
  epsilon_high: number;
  delta: number | null;
  temperature: number;
  scale_rewards: 'group' | 'batch' | 'none';
  advantage_estimator: 'trl' | 'verl';
  importance_sampling_level: 'token' | 'sequence';
  optimizer: 'adamw' | 'sgd';
  lr: number;
  betas: [number, number];
  weight_decay: number;
  max_grad_norm: number; // 0 = no clipping
  position_ids: 'from_attention_mask' | 'arange';
  max_completion_length: number; // L_max for dr_grpo / seq-mean-token-sum-norm
}

/** Everything one update needs, sent with every stepper request (settings may change between runs). */
export interface StepSettings {
  prompts: PromptItem[];
  sampling: SamplingSettings;
  rewards: RewardSpec[];
  loss: LossSettings;
}

// ------------------------------------------------------------------------------------------ results

/** Bytes in use on the GPU (by our buffers) after a stage, and the peak during it. */
export interface MemoryReport {
  bytes: number;
  peak_bytes: number;
  /** Named allocations (weights, grads, optimizer state, activations, logits …). */
  breakdown?: Record<string, number>;
}

export interface ModelInfo {
  name: string;
  model_type: string;
  architectures: string[];
  num_parameters: number;
  dtype: string;
  vocab_size: number;
  tokenizer: { kind: string; bos_token_id: number | null; eos_token_ids: number[]; pad_token_id: number | null; special_token_ids: number[] };
  chat_template: string | null;
  /** For the prompt set and G as they were at load time (src/model/memory.ts). */
  memory_plan: MemoryPlan;
}

/** Load progress as the page shows it: what is loading, bytes so far and in all (0 = unknown). */
export interface LoadProgress {
  label: string; // "policy weights: model.safetensors", "tokenizer", "reference weights"
  loaded: number;
  total: number;
}

/**
 * A per-token array over the padded completion grid: (B, C) row-major, value at [b, t] scores
 * completion_ids[b][t]. Positions past a row's completion hold 0 (read the masks, not the values).
 */
export interface PerTokenArray {
  B: number;
  C: number;
  data: Float32Array; // (B, C)
}

/** TRL clip metric bits per token. */
export const CLIP_LOW = 1;
export const CLIP_HIGH = 2;
export const CLIP_DELTA = 4; // δ capped the unclipped ratio

/** Per-stage payloads. Each stage adds its own fields; the page merges them into the current run. */
export interface StagePayloads {
  render: { prompt_texts: string[]; messages: ChatMessage[][]; prompt_ids: number[][] }; // one row per prompt
  sample: { completion_ids: number[][]; completion_texts: string[]; sampling_per_token_logps?: PerTokenArray };
  reward: {
    rewards_per_func: number[][]; // (B, F), NaN where not applicable or failed
    reward_names: string[]; // (F)
    reward_weights: number[]; // (F)
    rewards: number[]; // (B) weighted nansum
    errors: RewardError[];
  };
  advantages: { advantages: number[]; groups: { group: number; mean: number; std: number; zero_std: boolean }[] };
  assemble: {
    batch: GrpoBatch;
    P: number;
    C: number;
    position_ids: Int32Array; // (B, P + C)
    /** Decoded text of every token (special tokens as written), for the grid and the inspector. */
    token_texts: { prompt: string[][]; completion: string[][] };
    /** The Doctor's report on this batch (the worker adds it; the runner leaves it out). */
    report?: DoctorReport;
  };
  policy_forward: { per_token_logps: PerTokenArray; entropy: PerTokenArray };
  reference_forward: { ref_per_token_logps: PerTokenArray };
  loss: {
    old_per_token_logps: PerTokenArray;
    importance_ratio: PerTokenArray;
    per_token_kl: PerTokenArray;
    per_token_loss: PerTokenArray;
    /** Weight of each token in the chosen aggregation: ∂loss/∂per_token_loss[b, t]. */
    token_weight: PerTokenArray;
    clip_flags: Uint8Array; // (B, C) CLIP_LOW | CLIP_HIGH | CLIP_DELTA
    losses: Record<AnyAggregation, number>;
    loss: number; // under settings.loss.loss_type
    policy_term: number; // the loss without β·KL, same aggregation
    kl_term: number; // β·KL part, same aggregation
    mean_kl: number;
    clip_counts: { low: number; high: number; delta: number; tokens: number };
  };
  backward: { grad_norm: number; grad_norms: { group: string; norm: number }[] };
  step: { clip_coef: number; lr: number; update_norms: { group: string; norm: number }[] };
  re_evaluate: { post_per_token_logps: PerTokenArray; loss_after: number };
}

export interface StageResult<S extends StageId = StageId> {
  stage: S;
  ms: number; // wall time of the stage in the worker (GPU work finished)
  gpu_ms?: number; // from timestamp queries, when available
  memory: MemoryReport;
  /** Why the stage did not run (e.g. render / sample / reward for an imported batch); its payload is then empty. */
  skipped?: string;
  payload: StagePayloads[S];
}

/** A reward function that failed on one sample: the sample still gets NaN, the page shows this. */
export interface RewardError {
  reward: string;
  sample: number;
  message: string;
}

/**
 * The one-step pipeline (implemented in src/grpo/step.ts). Stages run strictly in STAGES order; `reset`
 * goes back to before `render` keeping the loaded model (and undoing the optimizer step, if taken).
 */
export interface StepRunner {
  load(source: ModelChoice, onProgress: (p: LoadProgress) => void): Promise<ModelInfo>;
  /** Runs the stage after the last completed one and returns its result. */
  runStage(stage: StageId, settings: StepSettings): Promise<StageResult>;
  reset(): Promise<void>;
  dispose(): void;
}

/**
 * What src/grpo/step.ts exports for the worker. `runJsReward` runs user JS rewards in the sandbox worker
 * (with its time limit); the reward stage must use it for `kind: 'js'` rewards (scoreRewards takes it).
 */
export type CreateStepRunner = (gpu: Gpu, deps: { runJsReward: JsRewardRunner }) => StepRunner;

// ------------------------------------------------------------------------------------------ messages

export type { Finding };

/** What went wrong, in the categories the page shows differently. */
export type ErrorKind = 'bad-file' | 'unsupported-model' | 'out-of-memory' | 'device-lost' | 'no-webgpu' | 'gpu' | 'reward' | 'internal';

export interface WorkerErrorInfo {
  kind: ErrorKind;
  message: string;
  detail?: string;
}

export type Request =
  | { type: 'init' }
  | { type: 'import-batch'; text: string; name: string }
  | { type: 'load-model'; source: ModelChoice }
  | { type: 'run-stage'; stage: StageId; settings: StepSettings }
  | { type: 'score-rewards'; rewards: RewardSpec[]; samples: RewardSample[] }
  | { type: 'reset' };

/** Response payloads by request type. */
export interface Responses {
  init: { adapter: AdapterReport };
  /** The Doctor's report (schema problems included); report.skipped says which rules could not run. */
  'import-batch': { batch: GrpoBatch; report: DoctorReport };
  'load-model': { model: ModelInfo };
  'run-stage': StageResult;
  'score-rewards': RewardTable;
  reset: Record<string, never>;
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
  | { event: 'progress'; progress: LoadProgress }
  | { event: 'device-lost'; error: WorkerErrorInfo };
