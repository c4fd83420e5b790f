// verl's settings the studio reproduces, one row per field, in verl's own leaf names (actor_rollout_ref.actor.*,
// actor.policy_loss.*, algorithm.rollout_correction.*, algorithm.*, trainer.*) and the run context its actor
// derives. Defaults are the dataclass defaults at volcengine/verl b178a3c (verl/workers/config/actor.py,
// verl/trainer/config/algorithm.py; the actor's optimizer rows verl/workers/config/optimizer.py, lr as
// _generated_ppo_trainer.yaml); src/grpo/trainers/verl.ts (the objective) and verl_optimizer.ts (the step) read a case's or batch's `config` / `run`
// through this table, and docs/trainers/verl.md lists it.
import { rowBuilder, type SettingSpec, type SettingsValues } from './types.ts';

const ACTOR = 'verl/workers/config/actor.py';
const CORE = 'verl/trainer/ppo/core_algos.py';
const RC = 'verl/trainer/ppo/rollout_corr_helper.py';
const ALGO = 'verl/trainer/config/algorithm.py';
const DP = 'verl/workers/actor/dp_actor.py';
const LOSSES = 'verl/workers/utils/losses.py';
const OPTIM = 'verl/workers/config/optimizer.py FSDPOptimizerConfig';
const FSDPW = 'verl/workers/fsdp_workers.py ActorRolloutRefWorker._build_model_optimizer';
const SCHED = 'verl/utils/torch_functional.py';
const GEN = 'verl/trainer/config/_generated_ppo_trainer.yaml';
const MODEL = 'verl/workers/config/model.py HFModelConfig';

export const VERL_LOSS_MODES = ['vanilla', 'gspo', 'sapo', 'cispo', 'gpg', 'clip_cov', 'kl_cov', 'geo_mean'] as const;
export const VERL_KL_TYPES = ['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'] as const;
export const VERL_LR_SCHEDULERS = ['constant', 'cosine'] as const;
export const VERL_AGG_MODES = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'] as const;

const s = rowBuilder('verl');

export const VERL_SETTINGS = [
  s({ name: 'loss_mode', path: 'actor_rollout_ref.actor.policy_loss.loss_mode', type: 'enum', values: VERL_LOSS_MODES, default: 'vanilla', scope: 'loss', doc: 'policy loss: vanilla (dual-clip PPO), gspo, sapo, cispo, gpg, clip_cov, kl_cov, geo_mean', source: `${ACTOR} PolicyLossConfig; ${CORE}` }),
  s({ name: 'loss_agg_mode', path: 'actor_rollout_ref.actor.loss_agg_mode', type: 'enum', values: VERL_AGG_MODES, default: 'token-mean', scope: 'loss', doc: 'agg_loss: token-mean Σ L·M / N · dp; seq-mean-token-sum; seq-mean-token-mean; seq-mean-token-sum-norm Σ L·M / loss_scale_factor', source: `${CORE} agg_loss` }),
  s({ name: 'clip_ratio', path: 'actor_rollout_ref.actor.clip_ratio', type: 'number', default: 0.2, min: 0, scope: 'loss', doc: 'ε where clip_ratio_low / clip_ratio_high are null', source: ACTOR }),
  s({ name: 'clip_ratio_low', path: 'actor_rollout_ref.actor.clip_ratio_low', type: 'number', default: 0.2, nullable: true, min: 0, scope: 'loss', doc: 'ε_low: the ratio is clipped at 1 − ε_low', source: ACTOR }),
  s({ name: 'clip_ratio_high', path: 'actor_rollout_ref.actor.clip_ratio_high', type: 'number', default: 0.2, nullable: true, min: 0, scope: 'loss', doc: 'ε_high: the ratio is clipped at 1 + ε_high', source: ACTOR }),
  s({ name: 'clip_ratio_c', path: 'actor_rollout_ref.actor.clip_ratio_c', type: 'number', default: 3.0, min: 1, exclusive: true, scope: 'loss', doc: 'dual clip (vanilla, A < 0): L = min(L, −A·c)', source: `${CORE} compute_policy_loss_vanilla` }),
  s({ name: 'entropy_coeff', path: 'actor_rollout_ref.actor.entropy_coeff', type: 'number', default: 0, scope: 'loss', doc: 'loss −= entropy_coeff · agg_loss(entropy)', source: DP }),
  s({ name: 'calculate_entropy', path: 'actor_rollout_ref.actor.calculate_entropy', type: 'boolean', default: false, scope: 'loss', doc: 'compute the per-token entropy (also when entropy_coeff ≠ 0)', source: DP }),
  s({ name: 'use_kl_loss', path: 'actor_rollout_ref.actor.use_kl_loss', type: 'boolean', default: false, scope: 'loss', doc: 'loss += kl_loss_coef · agg_loss(kl_penalty(logp, ref))', source: DP }),
  s({ name: 'kl_loss_coef', path: 'actor_rollout_ref.actor.kl_loss_coef', type: 'number', default: 0.001, scope: 'loss', doc: 'coefficient of the KL loss', source: ACTOR }),
  s({ name: 'kl_loss_type', path: 'actor_rollout_ref.actor.kl_loss_type', type: 'enum', values: VERL_KL_TYPES, default: 'low_var_kl', scope: 'loss', doc: 'k1/kl d; abs |d|; k2/mse d²/2; k3/low_var_kl exp(k) − k − 1, k = clamp(ref − logp, ±20), result clamped ±10 ("+" variants raise upstream)', source: `${CORE} kl_penalty_forward` }),
  s({ name: 'loss_scale_factor', path: 'actor_rollout_ref.actor.loss_scale_factor', type: 'integer', default: null, nullable: true, min: 1, scope: 'loss', doc: 'seq-mean-token-sum-norm divisor (engine worker only; the legacy actor divides by the padded width T)', source: `${CORE} agg_loss; ${LOSSES}` }),
  s({ name: 'tau_pos', path: 'actor_rollout_ref.actor.tau_pos', type: 'number', default: 1.0, min: 0, exclusive: true, scope: 'loss', doc: 'sapo gate temperature for A > 0', source: `${CORE} compute_policy_loss_sapo` }),
  s({ name: 'tau_neg', path: 'actor_rollout_ref.actor.tau_neg', type: 'number', default: 1.05, min: 0, exclusive: true, scope: 'loss', doc: 'sapo gate temperature for A ≤ 0', source: `${CORE} compute_policy_loss_sapo` }),
  s({ name: 'clip_cov_ratio', path: 'actor_rollout_ref.actor.policy_loss.clip_cov_ratio', type: 'number', default: 0.0002, min: 0, exclusive: true, scope: 'loss', doc: 'clip_cov: clip_num = max(1, int(ratio · N)) tokens lose their gradient', source: `${CORE} compute_policy_loss_clip_cov` }),
  s({ name: 'clip_cov_lb', path: 'actor_rollout_ref.actor.policy_loss.clip_cov_lb', type: 'number', default: 1.0, scope: 'loss', doc: 'clip_cov: candidates have covariance > lb', source: `${CORE} compute_policy_loss_clip_cov` }),
  s({ name: 'clip_cov_ub', path: 'actor_rollout_ref.actor.policy_loss.clip_cov_ub', type: 'number', default: 5.0, scope: 'loss', doc: 'clip_cov: candidates have covariance < ub', source: `${CORE} compute_policy_loss_clip_cov` }),
  s({ name: 'kl_cov_ratio', path: 'actor_rollout_ref.actor.policy_loss.kl_cov_ratio', type: 'number', default: 0.0002, min: 0, exclusive: true, scope: 'loss', doc: 'kl_cov: the top max(1, int(ratio · N)) covariance tokens get the |log-ratio| penalty', source: `${CORE} compute_policy_loss_kl_cov` }),
  s({ name: 'ppo_kl_coef', path: 'actor_rollout_ref.actor.policy_loss.ppo_kl_coef', type: 'number', default: 0.1, scope: 'loss', doc: 'kl_cov: L = −A·r + ppo_kl_coef·|logp − old| on the selected tokens', source: `${CORE} compute_policy_loss_kl_cov` }),
  s({ name: 'temperature', sampler: 'temperature', path: 'actor_rollout_ref.rollout.temperature', type: 'number', default: 1.0, min: 0, exclusive: true, scope: 'loss', doc: 'logits are divided by it before log-probs and entropy (data.meta_info["temperature"])', source: DP }),
  s({ name: 'ppo_epochs', path: 'actor_rollout_ref.actor.ppo_epochs', type: 'integer', default: 1, min: 1, scope: 'optimizer', doc: 'epochs over the batch; with one mini-batch and 1 epoch the actor is on-policy', source: DP }),
  s({ name: 'use_rollout_log_probs', path: 'actor_rollout_ref.actor.use_rollout_log_probs', type: 'boolean', default: false, scope: 'loss', doc: 'the legacy actor keeps the batch\'s old_log_probs even on-policy (fully-async training), never log_prob.detach()', source: `${DP} update_policy; verl/workers/config/actor.py` }),
  s({ name: 'ppo_mini_batch_size', path: 'actor_rollout_ref.actor.ppo_mini_batch_size', type: 'integer', default: 256, min: 1, scope: 'optimizer', doc: 'sequences per optimizer step', source: ACTOR }),
  s({ name: 'ppo_micro_batch_size_per_gpu', path: 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu', type: 'integer', default: null, nullable: true, min: 1, scope: 'optimizer', doc: 'micro-batch size: loss × 1 / (ppo_mini_batch_size // ppo_micro_batch_size_per_gpu)', source: DP }),
  s({ name: 'use_dynamic_bsz', path: 'actor_rollout_ref.actor.use_dynamic_bsz', type: 'boolean', default: false, scope: 'optimizer', doc: 'dynamic micro-batches: each rank\'s mini-batch packed by prompt + response tokens (karmarkar_karp), each micro-batch aggregated alone × its rows / ppo_mini_batch_size', source: `${DP} update_policy; verl/utils/seqlen_balancing.py` }),
  s({ name: 'ppo_max_token_len_per_gpu', path: 'actor_rollout_ref.actor.ppo_max_token_len_per_gpu', type: 'integer', default: 16384, min: 1, scope: 'optimizer', doc: 'use_dynamic_bsz: tokens per micro-batch (× ulysses_sequence_parallel_size): a rank packs ⌈its tokens ÷ this⌉ micro-batches (the most of any rank); a row longer than it is refused (verl asserts)', source: `${DP} update_policy (prepare_dynamic_batch)` }),
  s({ name: 'ulysses_sequence_parallel_size', path: 'actor_rollout_ref.actor.ulysses_sequence_parallel_size', type: 'integer', default: 1, min: 1, scope: 'optimizer', doc: 'use_dynamic_bsz: the micro-batch token budget is ppo_max_token_len_per_gpu × this', source: DP }),
  // The actor's optimizer (actor_rollout_ref.actor.optim.*, grad_clip): torch.optim.AdamW over every actor parameter.
  // weight_decay and lr_scheduler_type clash with TRL's TrainingArguments rows, optimizer with the studio's object: prefixed `optim.`.
  s({ name: 'optim.optimizer', path: 'actor_rollout_ref.actor.optim.optimizer', type: 'string', values: ['AdamW'], default: 'AdamW', scope: 'optimizer', doc: 'optimizer class in optimizer_impl; the studio reproduces torch.optim.AdamW only (others are refused)', source: `${OPTIM} build_optimizer` }),
  s({ name: 'optimizer_impl', path: 'actor_rollout_ref.actor.optim.optimizer_impl', type: 'string', values: ['torch.optim'], default: 'torch.optim', scope: 'optimizer', doc: 'module of the optimizer class; torch.optim only (torchao / bitsandbytes are refused)', source: `${OPTIM} build_optimizer` }),
  s({ name: 'lr', form: 'loss', path: 'actor_rollout_ref.actor.optim.lr', type: 'number', default: 1e-6, min: 0, scope: 'optimizer', doc: 'AdamW learning rate, times the schedule factor at the step (the dataclass default is 1e-3; the trainer config sets 1e-6)', source: `${OPTIM}; ${GEN}` }),
  s({ name: 'betas', path: 'actor_rollout_ref.actor.optim.betas', type: 'number-list', length: 2, default: [0.9, 0.999], scope: 'optimizer', doc: 'AdamW (β1, β2); eps is torch\'s 1e-8', source: `${OPTIM}; ${FSDPW}` }),
  s({ name: 'optim.weight_decay', form: 'loss', path: 'actor_rollout_ref.actor.optim.weight_decay', type: 'number', default: 0.01, min: 0, scope: 'optimizer', doc: 'AdamW decoupled weight decay on every actor parameter (one group: no bias / norm exemption)', source: OPTIM }),
  s({ name: 'lr_warmup_steps', path: 'actor_rollout_ref.actor.optim.lr_warmup_steps', type: 'integer', default: -1, scope: 'optimizer', doc: 'warmup steps; < 0: int(lr_warmup_steps_ratio · total_training_steps)', source: FSDPW }),
  s({ name: 'lr_warmup_steps_ratio', path: 'actor_rollout_ref.actor.optim.lr_warmup_steps_ratio', type: 'number', default: 0.0, min: 0, max: 1, scope: 'optimizer', doc: 'warmup as a fraction of total_training_steps (when lr_warmup_steps < 0)', source: FSDPW }),
  s({ name: 'optim.lr_scheduler_type', path: 'actor_rollout_ref.actor.optim.lr_scheduler_type', type: 'enum', values: VERL_LR_SCHEDULERS, default: 'constant', scope: 'optimizer', doc: 'constant: λ = s / W during warmup, then 1; cosine: then max(m, (1 − m)/2 · cos(2π · num_cycles · p) + (1 + m)/2), p = (s − W) / (T − W)', source: `${FSDPW}; ${SCHED} get_constant_schedule_with_warmup / get_cosine_schedule_with_warmup` }),
  s({ name: 'warmup_style', path: 'actor_rollout_ref.actor.optim.warmup_style', type: 'enum', values: VERL_LR_SCHEDULERS, default: null, nullable: true, scope: 'optimizer', doc: 'deprecated alias of lr_scheduler_type; a value differing from it is refused (the dataclass and the worker disagree)', source: OPTIM }),
  s({ name: 'min_lr_ratio', path: 'actor_rollout_ref.actor.optim.min_lr_ratio', type: 'number', default: 0.0, nullable: true, min: 0, max: 1, scope: 'optimizer', doc: 'cosine: the floor m of the factor (null = 0)', source: `${SCHED} get_cosine_schedule_with_warmup` }),
  s({ name: 'num_cycles', path: 'actor_rollout_ref.actor.optim.num_cycles', type: 'number', default: 0.5, scope: 'optimizer', doc: 'cosine: waves over the decay (0.5 = one half-cosine)', source: `${SCHED} get_cosine_schedule_with_warmup` }),
  s({ name: 'total_training_steps', path: 'actor_rollout_ref.actor.optim.total_training_steps', type: 'integer', default: -1, scope: 'optimizer', doc: 'T of the schedule, injected by the driver (ray_trainer.py _create_dataloader); -1 = not known', source: `${OPTIM}; verl/trainer/ppo/ray_trainer.py` }),
  s({ name: 'grad_clip', form: 'loss', path: 'actor_rollout_ref.actor.grad_clip', type: 'number', default: 1.0, min: 0, exclusive: true, scope: 'optimizer', doc: 'the legacy worker\'s clip_grad_norm_ max_norm (0 would zero every gradient: refused); the step is skipped (zero_grad) when the grad norm is not finite', source: `${DP} _optimizer_step` }),
  // The engine worker clips with its optimizer config's clip_grad (OptimizerConfig.__post_init__ lets the deprecated
  // optim.grad_clip override it: the reader maps that), not the actor's grad_clip.
  s({ name: 'optim.clip_grad', path: 'actor_rollout_ref.actor.optim.clip_grad', type: 'number', default: 1.0, min: 0, exclusive: true, scope: 'optimizer', doc: 'the engine worker\'s (use_legacy_worker_impl disable) clip_grad_norm_ max_norm; the legacy worker reads grad_clip', source: `${OPTIM}; verl/workers/engine/fsdp/transformer_impl.py optimizer_step` }),
  s({ name: 'model.override_config', path: 'actor_rollout_ref.model.override_config', type: 'object', default: null, nullable: true, scope: 'forward', doc: 'keys verl sets over config.json before building the actor (update_model_config): dropout probabilities are what the dropout check reads; attn_implementation / use_cache / token ids change no number; any other key is refused', source: 'verl/workers/fsdp_workers.py _build_model_optimizer' }),
  // The actor's LoRA adapter (fsdp_workers.py _build_model_optimizer: _is_lora when lora_rank > 0 or lora_adapter_path
  // is set; get_peft_model(LoraConfig(r=lora_rank, lora_alpha, target_modules, exclude_modules, bias="none")), PEFT's
  // lora_dropout 0 and use_rslora false, or PeftModel.from_pretrained(lora_adapter_path)); src/grpo/run_adapter.ts
  // decides from these rows whether the adapter a step is given (or none) makes the step the run's update.
  s({ name: 'lora_rank', path: 'actor_rollout_ref.model.lora_rank', type: 'integer', default: 0, min: 0, scope: 'forward', doc: 'LoRA rank r; > 0: only an adapter on the frozen base trains, so the step needs the run\'s adapter (--adapter) with this r', source: `${MODEL}; ${FSDPW}` }),
  s({ name: 'lora_alpha', path: 'actor_rollout_ref.model.lora_alpha', type: 'integer', default: 16, scope: 'forward', doc: 'LoRA lora_alpha: scaling = lora_alpha / r (no rslora); the step\'s adapter must have it', source: `${MODEL}; ${FSDPW}` }),
  s({ name: 'target_modules', path: 'actor_rollout_ref.model.target_modules', type: 'string', list: true, default: 'all-linear', nullable: true, scope: 'forward', doc: 'the adapted modules (all-linear, a regex, or a list of names): the step\'s adapter must adapt exactly these', source: `${MODEL}; ${FSDPW}` }),
  s({ name: 'exclude_modules', path: 'actor_rollout_ref.model.exclude_modules', type: 'string', list: true, default: null, nullable: true, scope: 'forward', doc: 'modules left out of target_modules (a regex or a list of names)', source: `${MODEL}; ${FSDPW}` }),
  s({ name: 'lora_adapter_path', path: 'actor_rollout_ref.model.lora_adapter_path', type: 'string', default: null, nullable: true, scope: 'forward', doc: 'a saved PEFT adapter the run continued training (its own r, lora_alpha and modules; lora_rank is then not read): the step needs that adapter as it was at this step', source: `${MODEL}; ${FSDPW}` }),
  s({ name: 'use_legacy_worker_impl', path: 'trainer.use_legacy_worker_impl', type: 'enum', values: ['auto', 'enable', 'disable'], default: 'auto', scope: 'loss', doc: 'auto/enable: the dp_actor loop (local aggregation); disable: the engine worker ppo_loss (global batch aggregation)', source: `${DP}; ${LOSSES}` }),
  s({ name: 'rollout_is', path: 'algorithm.rollout_correction.rollout_is', type: 'enum', values: ['token', 'sequence'], default: null, nullable: true, scope: 'loss', doc: 'rollout IS weight: token exp(clamp(old − rollout, ±20)) or sequence exp(clamp(Σ, ±20)), truncated at rollout_is_threshold; null (the trainer config\'s default: no weights) — the RolloutCorrectionConfig dataclass says "sequence", but the driver reads the config, where algorithm/rollout_correction.yaml sets null', source: `${RC} compute_rollout_correction_weights; verl/trainer/config/algorithm/rollout_correction.yaml` }),
  s({ name: 'rollout_is_threshold', path: 'algorithm.rollout_correction.rollout_is_threshold', type: 'number', default: 2.0, min: 0, exclusive: true, scope: 'loss', doc: 'upper truncation of the rollout IS weights', source: ALGO }),
  s({ name: 'rollout_is_batch_normalize', path: 'algorithm.rollout_correction.rollout_is_batch_normalize', type: 'boolean', default: false, scope: 'loss', doc: 'divide the IS weights by their (token or sequence) batch mean', source: RC }),
  s({ name: 'rollout_rs', path: 'algorithm.rollout_correction.rollout_rs', type: 'string', default: null, nullable: true, scope: 'loss', doc: 'rejection sampling, comma-separated: token_k1..3, seq_sum_k1..3, seq_mean_k1..3, seq_max_k2/k3 (tokens or sequences leave the mask)', source: `${RC} compute_rollout_rejection_mask` }),
  s({ name: 'rollout_rs_threshold', path: 'algorithm.rollout_correction.rollout_rs_threshold', type: 'string', orNumber: true, default: null, nullable: true, scope: 'loss', doc: 'per option: "lower_upper" ratios for *_k1, an upper bound otherwise', source: `${RC} _parse_rollout_rs_thresholds` }),
  s({ name: 'bypass_mode', path: 'algorithm.rollout_correction.bypass_mode', type: 'boolean', default: false, scope: 'loss', doc: 'old_log_probs := rollout_log_probs; IS / RS computed in the loss against the current policy', source: `${RC} apply_bypass_mode; ${CORE} compute_policy_loss_bypass_mode` }),
  s({ name: 'loss_type', path: 'algorithm.rollout_correction.loss_type', type: 'enum', values: ['ppo_clip', 'reinforce'], default: 'ppo_clip', scope: 'loss', doc: 'bypass mode: ppo_clip (vanilla against the rollout) or reinforce −A·logp·w', source: `${CORE} compute_policy_loss_bypass_mode` }),
  s({ name: 'adv_estimator', path: 'algorithm.adv_estimator', type: 'string', default: 'gae', scope: 'advantages', doc: 'advantage estimator (grpo, rloo, reinforce_plus_plus, ...)', source: `${ALGO}; ${CORE}` }),
  s({ name: 'norm_adv_by_std_in_grpo', path: 'algorithm.norm_adv_by_std_in_grpo', type: 'boolean', default: true, scope: 'advantages', doc: 'grpo: divide by the group std (+1e-6)', source: `${CORE} compute_grpo_outcome_advantage` }),
  s({ name: 'gamma', path: 'algorithm.gamma', type: 'number', default: 1.0, scope: 'advantages', doc: 'discount (reinforce_plus_plus)', source: ALGO }),
] satisfies readonly SettingSpec[];

/** Run context (`run` of a case or batch), as verl's actor derives it. */
export const VERL_RUN = [
  s({ name: 'num_mini_batches', type: 'integer', default: 1, min: 1, scope: 'run', doc: 'mini-batches in the update (with ppo_epochs it decides on_policy)', source: DP }),
  s({ name: 'on_policy', type: 'boolean', default: null, nullable: true, scope: 'run', doc: "old_log_probs := log_prob.detach() (ratio 1); default: one mini-batch (num_mini_batches = 1 and ⌈a rank's rows / ppo_mini_batch_size⌉ = 1) and ppo_epochs = 1", source: DP }),
  // A dump of the whole batch holds every mini-batch; the first optimizer step is exact from the rollout's policy.
  s({ name: 'mini_batch_index', type: 'integer', default: null, nullable: true, min: 0, scope: 'run', doc: "legacy worker: the optimizer step of update_policy this update is, k: on each rank (data_parallel_size, needed), the rows [r·B/dp + k·ppo_mini_batch_size, … + ppo_mini_batch_size) form its loss, the ranks averaged (the other rows weigh 0); verl's step k from the policy after its k earlier steps (0: the rollout's policy, the checkpoint the dump was scored with; k > 0: the studio's own continued updates); null: the batch is one mini-batch", source: DP }),
  s({ name: 'data_parallel_size', type: 'integer', default: null, nullable: true, min: 1, scope: 'run', doc: "legacy worker with mini_batch_index: the ranks a whole-batch dump's rows are chunked over (DataProto.chunk), each taking its own k-th mini-batch, their gradients averaged; the reader sets it from trainer.nnodes × n_gpus_per_node ÷ ulysses_sequence_parallel_size; null: not known (needed with mini_batch_index)", source: `${DP}; verl/protocol.py DataProto.chunk` }),
  s({ name: 'micro_batch_loss_scale', type: 'number', default: null, nullable: true, min: 0, scope: 'run', doc: "legacy worker: the loop's loss_scale_factor multiplying the loss; default from the batch sizes", source: DP }),
  s({ name: 'dp_size', type: 'integer', default: 1, min: 1, scope: 'run', doc: 'engine worker: data-parallel size in agg_loss', source: LOSSES }),
  s({ name: 'batch_num_tokens', type: 'number', default: null, nullable: true, min: 0, exclusive: true, scope: 'run', doc: 'engine worker: global token count (token-mean); null = this micro-batch', source: LOSSES }),
  s({ name: 'global_batch_size', type: 'number', default: null, nullable: true, min: 0, exclusive: true, scope: 'run', doc: 'engine worker: global sequence count (seq-mean-*); null = this micro-batch', source: LOSSES }),
  s({ name: 'global_steps', type: 'integer', default: null, nullable: true, min: 1, scope: 'optimizer', doc: "the driver's global_steps (1 = the first step): the update runs at lr · λ(global_steps − 1); null = the first step", source: `verl/trainer/ppo/ray_trainer.py fit; ${FSDPW} (update_actor steps the scheduler)` }),
] satisfies readonly SettingSpec[];

/** VERL_SETTINGS' values once read (resolveSettings), typed from the table. */
export type VerlConfig = SettingsValues<typeof VERL_SETTINGS>;

export type VerlRun = SettingsValues<typeof VERL_RUN>;
