// The settings half of the page ↔ worker contract (src/bridge/protocol.ts re-exports it): what the page
// sends with every stepper request — the model choice, prompt set, sampling, rewards, loss settings, the
// trainer preset and where the weights start — and the trainer view the loss stage shows for the preset.
import type { EffectiveSettings } from '../grpo/settings/effective.ts';
import type { RewardSpec } from '../grpo/rewards.ts';
import type { SamplingSettings as SamplerSettings } from '../model/sampler.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import type { LossCell } from '../grpo/trainers/from_logps.ts';
import type { ToolLoopWay } from '../grpo/tool_ways.ts';

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

/**
 * The prompt set's tools, for a multi-turn rollout (src/grpo/tool_loop.ts): TRL's GRPOTrainer `tools` (here
 * the JSON schemas the template renders, and the functions as JS source run in the sandbox worker) and
 * GRPOConfig's max_tool_calling_iterations, with the way the loop builds each next turn.
 */
export interface ToolSettings {
  schemas: Record<string, unknown>[];
  /** An object expression of functions, e.g. `({ multiply: ({ a, b }) => a * b })`; each takes the call's arguments object. */
  source: string;
  way: ToolLoopWay;
  max_tool_calling_iterations: number;
  /** Per call; a call that runs longer gives TRL's {'error': …} result. */
  timeout_ms: number;
}

/**
 * Where a new update's weights start: 'continue' from the weights the last update stepped to (the
 * default, as TRL: the policy keeps training while the frozen-copy reference stays the model as loaded,
 * so KL before the step grows), or 'loaded': every update from the weights as loaded.
 */
export type WeightsMode = 'continue' | 'loaded';

/** Everything one update needs, sent with every stepper request (settings may change between runs). */
export interface StepSettings {
  prompts: PromptItem[];
  sampling: SamplingSettings;
  rewards: RewardSpec[];
  /** The prompt set's tools (a multi-turn rollout); null or absent: one turn per completion. */
  tools?: ToolSettings | null;
  /**
   * The loss, advantage and optimizer settings in the trainer's own names, resolved on the page from the
   * update's base and the user's edits (src/bridge/settings.ts pageSettings), with each value's provenance.
   */
  settings: EffectiveSettings;
  /** Default 'continue'. */
  weights?: WeightsMode;
}

/** The chosen trainer's objective on the update's scored log-probs, (B, C) per-token arrays. */
export interface TrainerTerms {
  loss: number;
  per_token_loss: Float32Array | null;
  per_token_kl: Float32Array | null;
  /** The importance-sampling weights the loss multiplies by (vLLM / rollout correction), null when off. */
  importance_sampling_ratio: Float32Array | null;
  /** 1 where the token is in the loss. */
  effective_loss_mask: Float32Array;
  /** Which factor removed each token: index into MASK_FACTORS (0 = kept). */
  removed_by: Uint8Array;
  /** ∂loss/∂per_token_logps of the trainer's objective: the per-token gradient that trainer would take. */
  dlogp: Float32Array | null;
}

/** What the loss stage shows for the trainer preset: its terms (or why it cannot form them) and every loss type. */
export interface TrainerView {
  trainer: TrainerId;
  /** The config and run the objective read (the trainer's own rows of the update's settings). */
  config: Record<string, unknown>;
  run: Record<string, unknown>;
  terms: TrainerTerms | null;
  error: string | null;
  /** Config values the trainer's refusal offers (a verl micro-batch size), or null. */
  offer: Record<string, unknown> | null;
  table: LossCell[];
}
