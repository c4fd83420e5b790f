// OpenRLHF's settings the studio reproduces, one row per field, in train_ppo_ray.py's argument names, and the
// run context of one micro-batch. Defaults are the argparse defaults at OpenRLHF/OpenRLHF 3c3be62
// (openrlhf/cli/train_ppo_ray.py); src/grpo/trainers/openrlhf.ts reads a case's or batch's `config` / `run`
// through this table, and docs/trainers/openrlhf.md lists it.
import { rowBuilder, type SettingSpec, type SettingsValues } from './types.ts';

const CLI = 'openrlhf/cli/train_ppo_ray.py';
const LOSS = 'openrlhf/models/loss.py PolicyLoss';
const STEP = 'openrlhf/trainer/ray/ppo_actor.py training_step';
const NORM = 'openrlhf/utils/loss_utils.py _optimizer_step_loss_norm';
const DS = 'openrlhf/utils/deepspeed/deepspeed.py DeepspeedStrategy';
const ACTOR = `${CLI}; openrlhf/models/actor.py Actor.__init__`;

/** The actor's schedules (transformers get_scheduler through DeepspeedStrategy.prepare) the studio reproduces. */
export const OPENRLHF_LR_SCHEDULERS = ['cosine_with_min_lr', 'cosine', 'linear', 'constant_with_warmup', 'constant'] as const;

const s = rowBuilder('openrlhf');

/** openrlhf_code's value for a batch OpenRLHF wrote before ed62d0e2 (its flat argparse names): one spelling for the readers, rules and objective. */
export const BEFORE_ED62D0E2 = 'before-ed62d0e2';

export const OPENRLHF_SETTINGS = [
  s({ name: 'actor.policy_loss_type', formerly: 'policy_loss_type', type: 'enum', values: ['ppo', 'gspo'], default: 'ppo', scope: 'loss', doc: 'ppo: token ratio exp(clamp(logp − old, ±20)); gspo: exp(mean_b(logp − old))·M, per-sample mean aggregation', source: LOSS }),
  s({ name: 'actor.eps_clip', formerly: 'eps_clip', type: 'number', default: 0.2, min: 0, scope: 'loss', doc: 'ε when eps_clip_low_high is null', source: CLI }),
  s({ name: 'actor.eps_clip_low_high', formerly: 'eps_clip_low_high', type: 'number-list', length: 2, default: null, nullable: true, scope: 'loss', doc: '[ε_low, ε_high]: L = −min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A)', source: LOSS }),
  s({ name: 'actor.dual_clip', formerly: 'dual_clip', type: 'number', default: null, nullable: true, min: 1, exclusive: true, scope: 'loss', doc: 'dual clip (A < 0): L = −max(min(r·A, clip·A), c·A)', source: LOSS }),
  s({ name: 'actor.entropy_coef', formerly: 'entropy_loss_coef', type: 'number', default: null, nullable: true, scope: 'loss', doc: 'null: no entropy; 0: logged only; else loss −= coef · aggregate_loss(entropy of the untempered logits)', source: STEP }),
  s({ name: 'algo.kl.use_loss', formerly: 'use_kl_loss', type: 'boolean', default: false, scope: 'loss', doc: 'loss += kl_ctl · aggregate_loss(compute_approx_kl(logp, base))', source: STEP }),
  s({ name: 'algo.kl.init_coef', formerly: 'init_kl_coef', type: 'number', default: 0.01, scope: 'loss', doc: 'kl_ctl (fixed controller); ≤ 0: the KL term is zero', source: CLI }),
  // An adaptive controller moves kl_ctl after every step (ppo_trainer.py: AdaptiveKLController when algo.kl.target
  // is set, kl_ctl.update each step): the coefficient of this step depends on the run, not on the batch.
  s({ name: 'algo.kl.target', formerly: 'kl_target', type: 'number', default: null, nullable: true, scope: 'loss', doc: 'adaptive KL controller target (null: the fixed controller, kl_ctl = init_coef); set, the coefficient moves every step: refused', source: 'openrlhf/trainer/ppo_trainer.py (AdaptiveKLController)' }),
  s({ name: 'algo.kl.estimator', formerly: 'kl_estimator', type: 'enum', values: ['k1', 'k2', 'k3'], default: 'k1', scope: 'loss', doc: 'd = logp − base: k1 d, k2 d²/2, k3 exp(−d) − 1 + d; clamped to ±10', source: 'openrlhf/models/utils.py compute_approx_kl' }),
  s({ name: 'algo.advantage.estimator', formerly: 'advantage_estimator', type: 'enum', values: ['gae', 'reinforce', 'rloo', 'reinforce_baseline', 'group_norm', 'dr_grpo'], default: 'gae', scope: 'advantages', doc: 'group_norm (r − mean)/(std + 1e-9) and dr_grpo r − mean per prompt are recomputed from rewards; rloo, reinforce_baseline (batch-whitened), gae and reinforce are not', source: 'openrlhf/trainer/ppo_utils/experience_maker.py' }),
  // compute_reward clamps the shaped reward (after group_norm / dr_grpo / rloo …) before the returns; argparse
  // nargs=2 with a default tuple, so it always applies (`if reward_clip_range:` on a non-empty pair).
  s({ name: 'reward.clip_range', formerly: 'reward_clip_range', type: 'number-list', length: 2, default: [-10, 10], scope: 'advantages', doc: '[low, high]: the shaped reward is clamped to it before the returns; the group advantages the studio recomputes are clamped alike', source: 'openrlhf/models/utils.py compute_reward; openrlhf/trainer/ppo_utils/experience_maker.py' }),
  s({ name: 'algo.advantage.is_correction_enable', formerly: 'enable_vllm_is_correction', type: 'boolean', default: false, scope: 'loss', doc: 'vLLM importance-sampling correction of the PPO loss (gspo: the ratio is taken against the rollout log-probs)', source: LOSS }),
  s({ name: 'algo.advantage.is_correction_threshold', formerly: 'vllm_is_truncated_threshold', type: 'number-list', length: 2, default: [0.5, 5.0], scope: 'loss', doc: '[low, high] of the IS weight exp(old − rollout)', source: LOSS }),
  s({ name: 'algo.advantage.is_correction_type', formerly: 'vllm_is_correction_type', type: 'enum', values: ['tis', 'icepop', 'seq-mask-tis'], default: 'tis', scope: 'loss', doc: 'tis clamp(w, low, high); icepop w·[low ≤ w ≤ high]; seq-mask-tis w·[low ≤ exp(mean_b log w) ≤ high]', source: LOSS }),
  s({ name: 'rollout.temperature', sampler: 'temperature', formerly: 'temperature', type: 'number', default: 1.0, min: 0, exclusive: true, scope: 'loss', doc: 'log-probs of logits / temperature (the entropy uses the raw logits)', source: 'openrlhf/models/actor.py Actor.forward' }),
  // μ: the actor's training loop runs max_epochs times over the replay buffer of one rollout, its experiences'
  // action_log_probs (the old log-probs) fixed from the rollout; `--max_epochs` before the hierarchical args.
  s({ name: 'train.max_epochs', formerly: 'max_epochs', type: 'integer', default: 1, min: 1, scope: 'optimizer', doc: 'passes (μ) over one batch of experiences: forward → loss → backward → step again, the old log-probs fixed', source: `${CLI}; openrlhf/trainer/ray/ppo_actor.py ppo_train (for epoch in range(max_epochs))` }),
  // One optimizer step's window: ppo_train shuffles the replay buffer's samples into micro-batches, and DeepSpeed
  // steps every train.batch_size samples (over all ranks); a batch past one window is several steps.
  s({ name: 'train.batch_size', formerly: 'train_batch_size', type: 'integer', default: 128, min: 1, scope: 'optimizer', doc: 'samples per optimizer step over all ranks (the window of one step); a batch with more rows spans several shuffled steps: refused', source: `${CLI}; openrlhf/trainer/ray/ppo_actor.py ppo_train; openrlhf/trainer/ppo_utils/replay_buffer.py` }),
  // Dynamic batching packs the replay buffer into micro-batches by tokens and takes each one's loss normalisers
  // (get_loss_batch_info(..., dynamic_batch=True): the buffer's dynamic_batch_num_tokens[step]) and optimizer steps
  // (dynamic_optimizer_step) from that packing, which one batch does not hold.
  s({ name: 'train.dynamic_batch_enable', formerly: 'use_dynamic_batch', type: 'boolean', default: false, scope: 'loss', doc: 'micro-batches packed by tokens, each normalised by the packing\'s token counts: refused unless run.loss_batch_info gives this micro-batch\'s', source: `${CLI}; ${STEP}` }),
  // Which OpenRLHF wrote the batch. The readers set before-ed62d0e2 where a dump's args carry the flat names of
  // train_ppo_ray.py before ed62d0e2 (the rows' `formerly`), and convert writes it with today's names, so the fact
  // survives the renaming: that code's PolicyLoss (ed62d0e2~1 openrlhf/models/loss.py) took exp(logp − old) without
  // the ±20 clamp and divided gspo rows by action_mask.sum() unclamped, and every term of its training_step
  // (openrlhf/trainer/ray/ppo_actor.py) was the micro-batch's masked_mean (no loss_batch_info, no dp_size). The
  // objective (src/grpo/trainers/openrlhf.ts) computes that code's aggregation and refuses where the rest differs.
  s({ name: 'openrlhf_code', type: 'enum', values: ['3c3be62', BEFORE_ED62D0E2], default: '3c3be62', scope: 'loss', doc: 'the OpenRLHF code that wrote the batch: before-ed62d0e2 (set by the readers for args under the old flat names): every term the micro-batch\'s masked_mean; refused where its ppo log-ratio passes ±20 (no clamp then), a gspo row is empty, or with use_dynamic_batch', source: 'OpenRLHF/OpenRLHF ed62d0e2~1 openrlhf/models/loss.py PolicyLoss, openrlhf/trainer/ray/ppo_actor.py training_step' }),
  // The actor's model: a LoRA adapter on a frozen base when ds.lora.rank > 0 (openrlhf/models/actor.py Actor.__init__:
  // LoraConfig(r=lora_rank, lora_alpha, target_modules, lora_dropout, bias="none"), PEFT's use_rslora false), and a
  // base quantized to 4-bit NF4 with ds.load_in_4bit (BitsAndBytesConfig). src/grpo/run_adapter.ts decides from these
  // rows whether the adapter a step is given (or none) makes the step the run's update.
  s({ name: 'ds.load_in_4bit', formerly: 'load_in_4bit', type: 'boolean', default: false, scope: 'forward', doc: 'the base weights quantized to 4-bit NF4 (bitsandbytes): refused (the studio steps the checkpoint\'s weights, not the run\'s quantized ones)', source: ACTOR }),
  s({ name: 'ds.lora.rank', formerly: 'lora_rank', type: 'integer', default: 0, min: 0, scope: 'forward', doc: 'LoRA rank r; > 0: only an adapter on the frozen base trains, so the step needs the run\'s adapter (--adapter) with this r', source: ACTOR }),
  s({ name: 'ds.lora.alpha', formerly: 'lora_alpha', type: 'integer', default: 16, scope: 'forward', doc: 'LoRA lora_alpha: scaling = alpha / r (no rslora); the step\'s adapter must have it', source: ACTOR }),
  s({ name: 'ds.lora.target_modules', formerly: 'target_modules', type: 'string', list: true, default: 'all-linear', scope: 'forward', doc: 'the adapted modules (nargs="*": a list, or the string all-linear): the step\'s adapter must adapt exactly these', source: ACTOR }),
  s({ name: 'ds.lora.dropout', formerly: 'lora_dropout', type: 'number', default: 0, min: 0, max: 1, scope: 'forward', doc: 'LoRA dropout on each adapted layer\'s input; > 0: random in the train-mode loss forward, refused (as a model\'s own dropout)', source: ACTOR }),
  // The actor's optimizer step (src/grpo/trainers/openrlhf_optimizer.ts): DeepSpeed's AdamW (FusedAdam, adam_w_mode)
  // over get_optimizer_grouped_parameters' two groups, the transformers schedule DeepSpeed steps after each update,
  // and DeepSpeed's gradient_clipping.
  s({ name: 'actor.optim', type: 'enum', values: ['adam', 'muon'], default: 'adam', scope: 'optimizer', doc: 'adam: DeepSpeed AdamW (decoupled decay, eps outside the root); muon is refused (not reproduced)', source: `${CLI}; ${DS}._ds_init_train_model` }),
  s({ name: 'actor.adam.lr', formerly: 'actor_learning_rate', form: 'loss', type: 'number', default: 1e-6, min: 0, scope: 'optimizer', doc: 'AdamW learning rate, × the schedule factor at the step', source: CLI }),
  s({ name: 'actor.adam.betas', formerly: 'adam_betas', type: 'number-list', length: 2, default: [0.9, 0.95], scope: 'optimizer', doc: 'AdamW (β1, β2)', source: CLI }),
  s({ name: 'actor.adam.eps', type: 'number', default: 1e-8, min: 0, exclusive: true, scope: 'optimizer', doc: 'AdamW ε, added to √v̂', source: CLI }),
  s({ name: 'actor.adam.weight_decay', formerly: 'l2', form: 'loss', type: 'number', default: 0, min: 0, scope: 'optimizer', doc: 'decoupled weight decay, except on parameters whose name holds bias, layer_norm.weight, layernorm.weight, norm.weight or ln_f.weight', source: 'openrlhf/utils/deepspeed/deepspeed_utils.py get_optimizer_grouped_parameters' }),
  s({ name: 'actor.lr_scheduler', formerly: 'lr_scheduler', type: 'enum', values: OPENRLHF_LR_SCHEDULERS, default: 'cosine_with_min_lr', scope: 'optimizer', doc: 'transformers schedule: λ = k / W during the warmup; cosine_with_min_lr then r + (1 − r)·½(1 + cos(π·p)), p = (k − W) / (T − W)', source: `${DS}.prepare; transformers optimization.py get_scheduler` }),
  s({ name: 'actor.lr_warmup_ratio', formerly: 'lr_warmup_ratio', type: 'number', default: 0.03, min: 0, max: 1, scope: 'optimizer', doc: 'warmup W = ⌈max_steps · ratio⌉ steps: with any ratio > 0 the run\'s first update has lr 0', source: `${DS}.prepare` }),
  s({ name: 'actor.min_lr_ratio', type: 'number', default: 0.1, min: 0, max: 1, scope: 'optimizer', doc: 'cosine_with_min_lr: the floor r of λ (min_lr_rate)', source: `${DS}.prepare` }),
  s({ name: 'actor.max_norm', formerly: 'max_norm', type: 'number', default: 1.0, scope: 'optimizer', doc: 'DeepSpeed gradient_clipping at this global norm; ≤ 0: none', source: 'openrlhf/utils/deepspeed/deepspeed_utils.py get_train_ds_config' }),
] satisfies readonly SettingSpec[];

/** Run context (`run` of a case or batch): the optimizer-step window of this micro-batch. */
export const OPENRLHF_RUN = [
  s({ name: 'num_processes', type: 'integer', default: 1, min: 1, scope: 'run', doc: 'data-parallel size (dp_size)', source: NORM }),
  s({ name: 'gradient_accumulation_steps', type: 'integer', default: 1, min: 1, scope: 'run', doc: 'micro-batches per optimizer step (gas)', source: NORM }),
  s({ name: 'other_tokens', type: 'number', default: 0, min: 0, scope: 'run', doc: 'action tokens of the other micro-batches and ranks in the window', source: NORM }),
  s({ name: 'other_samples', type: 'number', default: 0, min: 0, scope: 'run', doc: 'non-empty samples of the other micro-batches and ranks in the window', source: NORM }),
  s({ name: 'loss_batch_info', type: 'object', default: null, nullable: true, scope: 'run', doc: '{dp_size, batch_num_tokens = window tokens / gas, global_batch_size = window samples / gas}; default derived from the fields above', source: NORM }),
  s({ name: 'actor_optimizer_steps', type: 'integer', default: 0, min: 0, scope: 'optimizer', doc: 'optimizer steps the actor took before this one (the LambdaLR position DeepSpeed steps after each update); 0: the run\'s first', source: `${DS}.prepare (scheduler)` }),
  s({ name: 'max_steps', type: 'integer', default: null, nullable: true, min: 1, scope: 'optimizer', doc: 'the schedule\'s num_training_steps: ⌊prompts · n_samples_per_prompt ÷ train.batch_size⌋ · num_episodes · max_epochs; needed past the first step', source: 'openrlhf/trainer/ppo_trainer.py (max_steps)' }),
] satisfies readonly SettingSpec[];

/** OPENRLHF_SETTINGS' values once read (resolveSettings), typed from the table. */
export type OpenrlhfConfig = SettingsValues<typeof OPENRLHF_SETTINGS>;

export type OpenrlhfRun = SettingsValues<typeof OPENRLHF_RUN>;
