// TRL's settings, one row per GRPOConfig field the studio reads (huggingface/trl trl/trainer/grpo_config.py at
// f2cd577: names, defaults and allowed values as there), plus the run context TRL's normalisers read
// (trl/trainer/grpo_trainer.py: accelerator.num_processes, current_gradient_accumulation_steps,
// inputs["num_items_in_batch"], _last_world_entropy) and the studio-only fields marked `studio`. GRPOConfig
// inherits transformers' TrainingArguments: its optimizer and learning-rate schedule fields are rows here too
// (huggingface/transformers src/transformers/training_args.py), with the TrainerState the schedule reads.
// Everything that parses a TRL config — loss cases, batch files, the step pipeline, the page — reads this table.
import { TRL_LOSS_TYPES, VLLM_IS_MODES, KL_ESTIMATORS } from '../../kernels/types.ts';
import { parseSettings, specOf, type ParsedSettings, type SettingsTable } from './table.ts';
import { SettingsError, type SettingSpec, type SettingsValues } from './types.ts';

const CFG = 'huggingface/trl trl/trainer/grpo_config.py';
const TRAINER = 'huggingface/trl trl/trainer/grpo_trainer.py';
const ARGS = 'huggingface/transformers src/transformers/training_args.py';
const STATE = 'huggingface/transformers src/transformers/trainer_callback.py (TrainerState)';

/**
 * transformers OptimizerNames the studio reproduces: torch.optim.AdamW's update, and "sgd" = torch.optim.SGD
 * (lr only: momentum 0, weight decay added to the gradient, on the same decay groups) as
 * Trainer.get_optimizer_cls_and_kwargs builds it (huggingface/transformers src/transformers/trainer.py).
 */
export const TRL_OPTIMS = ['adamw_torch', 'adamw_torch_fused', 'sgd'] as const;
/** transformers SchedulerType values the studio computes (optimization.py get_*_schedule_with_warmup). */
export const TRL_LR_SCHEDULERS = ['linear', 'cosine', 'constant', 'constant_with_warmup'] as const;

/** A TRL row: GRPOConfig's source unless it says otherwise or is the studio's; typed as rowBuilder's rows. */
const s = <const T extends Omit<SettingSpec, 'trainer'>>(spec: T): T & Omit<SettingSpec, keyof T | 'trainer'> & { trainer: 'trl' } => ({ trainer: 'trl', source: spec.studio ? undefined : CFG, ...spec });

export const TRL_SETTINGS = [
  // loss
  s({ name: 'loss_type', form: 'loss', type: 'enum', values: TRL_LOSS_TYPES, default: 'dapo', scope: 'loss', doc: 'How per-token losses are formed and aggregated (_compute_loss).' }),
  s({ name: 'beta', form: 'loss', type: 'number', min: 0, default: 0, scope: 'loss', doc: 'KL coefficient: per_token_loss += β·(exp(ref − logp) − (ref − logp) − 1).' }),
  s({ name: 'epsilon', form: 'loss', type: 'number', min: 0, default: 0.2, scope: 'loss', doc: 'Lower clip: clamp(r, 1 − ε, 1 + ε_high).' }),
  s({ name: 'epsilon_high', form: 'loss', type: 'number', min: 0, nullable: true, default: null, scope: 'loss', doc: 'Upper clip (null = epsilon); cispo: the cap on the detached ratio.' }),
  s({ name: 'delta', form: 'loss', type: 'number', min: 0, exclusive: true, nullable: true, default: null, scope: 'loss', doc: 'Two-sided clipping: the unclipped ratio is capped at δ.' }),
  s({ name: 'importance_sampling_level', form: 'loss', type: 'enum', values: ['token', 'sequence'], default: 'token', scope: 'loss', doc: 'Ratio per token, or exp(mean masked log-ratio) per sequence (GSPO).' }),
  s({ name: 'use_bias_correction_kl', type: 'boolean', default: false, scope: 'loss', doc: 'per_token_kl ×= the policy ratio coef_1.' }),
  s({ name: 'top_entropy_quantile', type: 'number', min: 0, max: 1, default: 1, scope: 'loss', doc: 'Keep tokens with entropy ≥ torch.quantile(entropies, 1 − q) (get_high_entropy_mask).' }),
  s({ name: 'off_policy_mask_threshold', type: 'number', nullable: true, default: null, scope: 'loss', doc: 'Drop rows with A < 0 and mean(sampling − logp) > threshold (get_off_policy_mask).' }),
  s({ name: 'entropy_coef', type: 'number', default: 0, scope: 'loss', doc: 'Entropy bonus: loss −= coef·mean entropy of the kept tokens.' }),
  s({ name: 'use_adaptive_entropy', type: 'boolean', default: false, scope: 'loss', doc: 'Apply entropy_coef only when the last world entropy ≤ entropy_target.' }),
  s({ name: 'entropy_coef_min', type: 'number', default: 0, scope: 'loss', doc: 'Adaptive entropy: lower bound of the coefficient.' }),
  s({ name: 'entropy_coef_max', type: 'number', default: 1, scope: 'loss', doc: 'Adaptive entropy: upper bound of the coefficient.' }),
  s({ name: 'entropy_coef_delta', type: 'number', default: 0.005, scope: 'loss', doc: 'Adaptive entropy: step of the coefficient per optimizer step.' }),
  s({ name: 'entropy_target', type: 'number', default: 0.2, scope: 'loss', doc: 'Adaptive entropy: the target world entropy.' }),
  s({ name: 'sapo_temperature_pos', type: 'number', min: 0, exclusive: true, default: 1, scope: 'loss', doc: 'sapo: τ for A > 0 in σ(τ(r − 1))·4/τ.' }),
  s({ name: 'sapo_temperature_neg', type: 'number', min: 0, exclusive: true, default: 1.05, scope: 'loss', doc: 'sapo: τ for A ≤ 0.' }),
  s({ name: 'vespo_k_pos', type: 'number', default: 2, scope: 'loss', doc: 'vespo: k for A ≥ 0 in φ(w) = e^λ·w^k·e^(−λw).' }),
  s({ name: 'vespo_lambda_pos', type: 'number', default: 3, scope: 'loss', doc: 'vespo: λ for A ≥ 0 (clamped ≥ 1e-4).' }),
  s({ name: 'vespo_k_neg', type: 'number', default: 3, scope: 'loss', doc: 'vespo: k for A < 0.' }),
  s({ name: 'vespo_lambda_neg', type: 'number', default: 2, scope: 'loss', doc: 'vespo: λ for A < 0.' }),
  s({ name: 'use_liger_kernel', type: 'boolean', default: false, scope: 'loss', source: ARGS, doc: "TrainingArguments.use_liger_kernel: TRL's loss is Liger's fused LigerFusedLinearGRPOLoss (grpo_trainer.py compute_liger_loss): the same per-token terms; dapo/cispo/vespo divide by this micro-batch's loss-mask tokens (not num_items_in_batch), then every loss type by gradient_accumulation_steps." }),
  s({ name: 'max_completion_length', sampler: 'max_new_tokens', form: 'loss', type: 'integer', min: 1, nullable: true, default: 512, scope: 'loss', doc: 'dr_grpo divides by B·max_completion_length; also the sampling cap. None (GRPOConfig allows it): no cap, and dr_grpo fails in TRL.' }),
  // sampling
  s({ name: 'temperature', sampler: 'temperature', form: 'loss', type: 'number', min: 0, exclusive: true, default: 1, scope: 'sampling', doc: 'Logits are divided by it before log-softmax (sampling and loss).' }),
  s({ name: 'top_p', sampler: 'top_p', type: 'number', min: 0, max: 1, default: 1, scope: 'sampling', doc: 'Nucleus sampling.' }),
  s({ name: 'top_k', sampler: 'top_k', type: 'integer', min: 0, default: 0, scope: 'sampling', doc: 'Top-k sampling (0 = off).' }),
  s({ name: 'min_p', sampler: 'min_p', type: 'number', min: 0, max: 1, nullable: true, default: null, scope: 'sampling', doc: 'Min-p sampling.' }),
  s({ name: 'repetition_penalty', sampler: 'repetition_penalty', type: 'number', min: 0, exclusive: true, default: 1, scope: 'sampling', doc: 'Repetition penalty.' }),
  s({ name: 'max_prompt_length', type: 'integer', min: 1, nullable: true, default: null, scope: 'sampling', doc: "GRPOConfig before huggingface/trl#4847 (default 512 there) truncated prompts (left) to it; at f2cd577 the field is gone and prompts are never truncated (null). Read so an older run's config loads: a batch's prompt_ids are the prompts as trained." }),
  s({ name: 'chat_template_kwargs', type: 'object', nullable: true, default: null, scope: 'sampling', doc: 'Keyword arguments of the chat template when prompts are rendered (e.g. enable_thinking).' }),
  // training forward
  s({ name: 'disable_dropout', type: 'boolean', default: false, scope: 'forward', doc: "Turn the model's dropout off for training (disable_dropout_in_model). False, the default, leaves a GPT-2 checkpoint's dropout (0.1) on in TRL's loss and gradient: the studio's forward has none, so the step is refused until it is true." }),
  // reference model: huggingface/trl trl/trainer/callbacks.py SyncRefModelCallback, added by GRPOTrainer.__init__.
  s({ name: 'sync_ref_model', type: 'boolean', default: false, scope: 'reference', doc: "Every ref_model_sync_steps steps TRL mixes the policy into the reference (ref ← (1 − α)·ref + α·policy). The reference stage refuses a reference that is not TRL's at this update (trlReferenceSync): the model as loaded from run.global_step ≥ ref_model_sync_steps on, the batch's own ref_per_token_logps past the next sync; refused with β = 0 or an adapter, as TRL refuses them (the adapter at the policy forward: step_train.ts)." }),
  s({ name: 'ref_model_mixup_alpha', type: 'number', min: 0, max: 1, default: 0.6, scope: 'reference', doc: 'α of sync_ref_model: ref ← (1 − α)·ref + α·policy at each sync.' }),
  s({ name: 'ref_model_sync_steps', type: 'integer', min: 1, default: 512, scope: 'reference', doc: 'sync_ref_model syncs after every step whose global_step is a multiple of it.' }),
  s({ name: 'per_device_train_batch_size', type: 'integer', min: 1, default: 8, scope: 'optimizer', source: ARGS, doc: 'Completions per process per micro-batch (TrainingArguments).' }),
  s({ name: 'mask_truncated_completions', type: 'boolean', default: false, scope: 'batch', doc: 'Completions whose last token is neither EOS nor pad get completion_mask (and tool_mask) 0 before num_items_in_batch is counted.' }),
  s({ name: 'use_vllm', type: 'boolean', default: false, scope: 'loss', doc: 'Generation by vLLM: enables the importance-sampling correction of the loss (vllm_importance_sampling_*).' }),
  s({ name: 'vllm_importance_sampling_correction', type: 'boolean', default: true, scope: 'loss', doc: 'Multiply the loss by the vLLM IS ratio exp(old − sampling).' }),
  s({ name: 'vllm_importance_sampling_mode', type: 'enum', values: VLLM_IS_MODES, default: 'sequence_mask', scope: 'loss', doc: 'token_/sequence_ ratio; truncate = clamp(min, max), mask = 0 outside [min, max].' }),
  s({ name: 'vllm_importance_sampling_clip_min', type: 'number', min: 0, nullable: true, default: null, scope: 'loss', doc: 'Lower bound of the vLLM IS ratio (null = none).' }),
  s({ name: 'vllm_importance_sampling_clip_max', type: 'number', min: 0, nullable: true, default: 3, scope: 'loss', doc: 'Upper bound of the vLLM IS ratio (null = none).' }),
  s({ name: 'vllm_importance_sampling_cap', type: 'number', min: 0, nullable: true, default: null, scope: 'loss', doc: 'Deprecated alias of vllm_importance_sampling_clip_max.' }),
  // advantages
  s({ name: 'num_generations', sampler: 'num_generations', type: 'integer', min: 2, default: 8, scope: 'advantages', doc: 'Completions per prompt: the group size.' }),
  s({ name: 'scale_rewards', form: 'loss', type: 'enum', values: ['group', 'batch', 'none'], default: 'group', scope: 'advantages', doc: 'Divide (r − group mean) by the group std, the batch std, or nothing (true = group, false = none).' }),
  s({ name: 'multi_objective_aggregation', type: 'enum', values: ['sum_then_normalize', 'normalize_then_sum'], default: 'sum_then_normalize', scope: 'advantages', doc: 'Weighted sum then normalise, or normalise each function then sum (GDPO).' }),
  s({ name: 'reward_weights', type: 'number-list', nullable: true, default: null, scope: 'advantages', doc: 'Per reward function weight (null = all 1).' }),
  // optimizer
  s({ name: 'learning_rate', form: 'loss', type: 'number', min: 0, default: 1e-6, scope: 'optimizer', doc: 'AdamW learning rate before the schedule (GRPOConfig: 1e-6).' }),
  // optim and lr_scheduler_type are any string here (a dump's loss and advantages do not depend on them); the
  // optimizer step refuses the values it does not reproduce (src/grpo/trainers/trl_optimizer.ts).
  s({ name: 'optim', form: 'loss', type: 'string', values: TRL_OPTIMS, default: 'adamw_torch_fused', scope: 'optimizer', source: ARGS, doc: `The optimizer: ${TRL_OPTIMS.join(', ')} (torch.optim.AdamW; SGD); 8-bit, paged and other optimizers are refused by the step.` }),
  s({ name: 'adam_beta1', type: 'number', min: 0, max: 1, default: 0.9, scope: 'optimizer', source: ARGS, doc: 'AdamW β1.' }),
  s({ name: 'adam_beta2', type: 'number', min: 0, max: 1, default: 0.999, scope: 'optimizer', source: ARGS, doc: 'AdamW β2.' }),
  s({ name: 'adam_epsilon', type: 'number', min: 0, exclusive: true, default: 1e-8, scope: 'optimizer', source: ARGS, doc: 'AdamW ε.' }),
  s({ name: 'weight_decay', form: 'loss', type: 'number', min: 0, default: 0, scope: 'optimizer', source: ARGS, doc: 'AdamW weight decay, not on biases and norm weights (Trainer.get_decay_parameter_names).' }),
  s({ name: 'lr_scheduler_type', type: 'string', values: TRL_LR_SCHEDULERS, default: 'linear', scope: 'optimizer', source: ARGS, doc: `The learning rate at run.global_step: ${TRL_LR_SCHEDULERS.join(', ')} (linear / cosine decay to 0 over run.max_steps, after warmup).` }),
  s({ name: 'lr_scheduler_kwargs', type: 'object', nullable: true, default: null, scope: 'optimizer', source: ARGS, doc: "The scheduler's extra arguments: cosine's num_cycles (default 0.5); any other is refused by the step." }),
  s({ name: 'warmup_steps', type: 'number', min: 0, default: 0, scope: 'optimizer', source: ARGS, doc: 'Linear warmup steps; a value in (0, 1) is a ratio of run.max_steps.' }),
  s({ name: 'warmup_ratio', type: 'number', min: 0, max: 1, nullable: true, default: null, scope: 'optimizer', source: ARGS, doc: 'Warmup as a ratio of run.max_steps, used when warmup_steps is 0 (transformers 4.x; null = 0, deprecated in 5.x).' }),
  s({ name: 'max_grad_norm', form: 'loss', type: 'number', min: 0, nullable: true, default: 1, scope: 'optimizer', source: ARGS, doc: 'Gradient clipping at this global norm; 0 or null: none (transformers Trainer clips only when > 0).' }),
  s({ name: 'num_iterations', type: 'integer', min: 1, default: 1, scope: 'optimizer', doc: 'Updates per generation batch (μ).' }),
  s({ name: 'steps_per_generation', type: 'integer', min: 1, nullable: true, default: null, scope: 'optimizer', doc: 'Optimizer steps per generation batch (null = gradient_accumulation_steps, or generation_batch_size / (per_device_train_batch_size · num_processes) when that is given).' }),
  s({ name: 'generation_batch_size', type: 'integer', min: 1, nullable: true, default: null, scope: 'optimizer', doc: 'Completions per generation over all processes: per_device_train_batch_size · num_processes · steps_per_generation (GRPOConfig.__post_init__ derives one from the other; to_dict() writes both).' }),
  // studio-only
  s({ name: 'kl_estimator', form: 'loss', type: 'enum', values: KL_ESTIMATORS, default: 'k3', scope: 'loss', studio: true, doc: 'The studio can show k1/k2/k3; TRL always uses k3.' }),
] satisfies readonly SettingSpec[];

/** TRL's run context: what the normalisers read besides GRPOConfig (one rank's view). */
export const TRL_RUN_SETTINGS = [
  s({ name: 'num_processes', type: 'integer', min: 1, default: 1, scope: 'run', source: TRAINER, doc: 'accelerator.num_processes: dapo/cispo/vespo divide by num_items_in_batch / num_processes.' }),
  s({ name: 'rank', type: 'integer', list: true, min: 0, default: 0, scope: 'run', source: TRAINER, doc: 'This process (its slice of the generation batch); a batch merged from several ranks’ files lists the ranks it holds.' }),
  s({ name: 'gradient_accumulation_steps', type: 'integer', min: 1, default: 1, scope: 'run', source: TRAINER, doc: 'current_gradient_accumulation_steps: grpo/bnpo/dr_grpo/sapo/luspo divide by it.' }),
  s({ name: 'steps_per_generation', type: 'integer', min: 1, nullable: true, default: null, scope: 'run', source: TRAINER, doc: 'Micro-batches per generation batch.' }),
  s({ name: 'num_items_in_batch', type: 'number', min: 0, nullable: true, default: null, scope: 'run', source: TRAINER, doc: 'Loss-mask tokens of the whole generation batch over all processes (null = this micro-batch’s). 0 (every completion masked, e.g. all truncated under mask_truncated_completions) divides as 1: TRL clamps it (_compute_loss: clamp(min=1.0)), and the loss is 0.' }),
  s({ name: 'eos_token_id', type: 'integer', min: 0, nullable: true, default: null, scope: 'run', source: `${TRAINER}: self._tokenizer.eos_token_id`, doc: 'The tokenizer’s EOS, the one id mask_truncated_completions counts as an ending (eos_and_pad = [eos_token_id, pad_token_id]); a batch may stop on more ids (vLLM’s generation_config eos list). null: the batch’s eos_token_ids when they are one id.' }),
  s({ name: 'last_world_entropy', type: 'number', nullable: true, default: null, scope: 'run', source: TRAINER, doc: 'Adaptive entropy: the previous step’s world entropy (null = +inf, TRL’s start value).' }),
  s({ name: 'adaptive_entropy_coef', type: 'number', nullable: true, default: null, scope: 'run', source: TRAINER, doc: 'Adaptive entropy: the coefficient TRL holds at this step (self.entropy_coef, moved by ±entropy_coef_delta after every step; saved as "entropy_coef" beside last_world_entropy in its checkpoint state); null = config.entropy_coef, its start value.' }),
  s({ name: 'global_step', type: 'integer', min: 0, nullable: true, default: null, scope: 'optimizer', source: STATE, doc: 'trainer.state.global_step: optimizer steps done before this one; the schedule’s position (null: the first step).' }),
  s({ name: 'max_steps', type: 'integer', min: 1, nullable: true, default: null, scope: 'optimizer', source: STATE, doc: 'trainer.state.max_steps: the steps the linear / cosine schedule decays over.' }),
] satisfies readonly SettingSpec[];

/** TRL_SETTINGS' values once read (parseTrlConfig), typed from the table. */
export type TrlConfig = SettingsValues<typeof TRL_SETTINGS>;

export type TrlRun = SettingsValues<typeof TRL_RUN_SETTINGS>;

/** How GRPOConfig splits one generation batch into micro-batches (generationSplit). */
export interface GenerationSplit {
  /** steps_per_generation: micro-batches (and optimizer steps) per generation batch. */
  steps: number;
  /** Which field decides it, as a refusal names it. */
  why: string;
  /** What makes the batch one micro-batch. */
  fix: string;
}

/**
 * GRPOConfig.__post_init__'s split of the generation batch (grpo_config.py, world_size = run.num_processes):
 * run.steps_per_generation when the run context gives it; else the config's steps_per_generation; else
 * generation_batch_size / (per_device_train_batch_size · num_processes); else gradient_accumulation_steps. TRL's
 * to_dict() writes both config values after deriving one from the other, so given together they must agree.
 * Throws SettingsError naming the field for what GRPOConfig refuses (a generation batch not divisible by the
 * global batch or by num_generations) and for two values no one GRPOConfig wrote. Raw `config` / `run`, their
 * missing values at the table defaults.
 */
export function generationSplit(config: Record<string, unknown>, run: Record<string, unknown>): GenerationSplit {
  const num = (o: Record<string, unknown>, table: SettingsTable, name: string) => (typeof o[name] === 'number' ? (o[name] as number) : null) ?? (specOf(table, name).default as number | null);
  const [runSteps, steps, gbs] = [num(run, TRL_RUN_SETTINGS, 'steps_per_generation'), num(config, TRL_SETTINGS, 'steps_per_generation'), num(config, TRL_SETTINGS, 'generation_batch_size')];
  if (runSteps !== null && runSteps > 1) return { steps: runSteps, why: `run.steps_per_generation = ${runSteps}`, fix: 'set it to 1' };
  if (gbs !== null) {
    const pd = num(config, TRL_SETTINGS, 'per_device_train_batch_size')!;
    const np = num(run, TRL_RUN_SETTINGS, 'num_processes')!;
    const global = pd * np;
    const factors = `per_device_train_batch_size ${pd} · num_processes ${np}${typeof run.num_processes === 'number' ? '' : ' (the default: the batch does not say)'}`;
    if (steps !== null && gbs !== global * steps) throw new SettingsError(`config.generation_batch_size: ${gbs} with steps_per_generation ${steps}: GRPOConfig sets generation_batch_size = ${factors} · steps_per_generation = ${global * steps}; the two do not come from one config`);
    if (gbs % global !== 0) throw new SettingsError(`config.generation_batch_size: TRL refuses: "generation_batch_size (${gbs}) must be divisible by the global batch size (${global})." (${factors}) [${CFG} GRPOConfig.__post_init__]`);
    const G = config.num_generations;
    if (typeof G === 'number' && gbs % G !== 0) throw new SettingsError(`config.generation_batch_size: TRL refuses: "generation_batch_size (${gbs}) must be divisible by num_generations (${G})." [${CFG} GRPOConfig.__post_init__]`);
    if (steps !== null) return { steps, why: `config.steps_per_generation = ${steps}`, fix: `set it to 1 (and generation_batch_size to ${global})` };
    return { steps: gbs / global, why: `config.generation_batch_size = ${gbs} (GRPOConfig: steps_per_generation = ${gbs} / (${factors}) = ${gbs / global})`, fix: `set generation_batch_size to per_device_train_batch_size · num_processes (${global}), or leave it out with steps_per_generation 1` };
  }
  if (steps !== null) return { steps, why: `config.steps_per_generation = ${steps}`, fix: 'set it to 1' };
  const gas = num(run, TRL_RUN_SETTINGS, 'gradient_accumulation_steps')!;
  return { steps: gas, why: `config.steps_per_generation (unset: GRPOConfig takes run.gradient_accumulation_steps = ${gas})`, fix: 'set it to 1' };
}

/** A GRPOConfig-like object → typed values, with GRPOConfig.__post_init__'s rewrites (legacy scale_rewards booleans, the deprecated cap). */
export function parseTrlConfig(raw: unknown, where = 'config'): ParsedSettings<TrlConfig> {
  let o = raw;
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const r = raw as Record<string, unknown>;
    const legacy = r.scale_rewards === true ? 'group' : r.scale_rewards === false ? 'none' : r.scale_rewards;
    o = { ...r, scale_rewards: legacy };
  }
  const p = parseSettings<TrlConfig>(TRL_SETTINGS, o, where);
  const c = p.values;
  if (c.vllm_importance_sampling_cap !== null) c.vllm_importance_sampling_clip_max = c.vllm_importance_sampling_cap;
  return p;
}

/** The processes whose rows the batch holds: run.rank is a list where rank files were merged (src/io/formats/index.ts mergeImports). */
export const heldRanks = (run: Pick<TrlRun, 'rank'>): number => (Array.isArray(run.rank) ? run.rank.length : 1);

export function parseTrlRun(raw: unknown, where = 'run'): ParsedSettings<TrlRun> {
  return parseSettings<TrlRun>(TRL_RUN_SETTINGS, raw ?? {}, where);
}
