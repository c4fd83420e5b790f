// TRL's cross-field rules on the fields of the TRL table (trl.ts), at huggingface/trl f2cd577: every check
// GRPOConfig.__post_init__ (trl/trainer/grpo_config.py) and GRPOTrainer.__init__ (trl/trainer/grpo_trainer.py)
// raises on for these fields, the one Liger-Kernel's GRPO loss raises on its first forward (TRL pins
// liger-kernel 0.8.0), then the combinations TRL runs but one rank's batch cannot reproduce. Trainer rules
// come first, so a setting TRL refuses is refused with TRL's reason.
// Not here: what TRL only warns about (luspo without sequence-level IS, vespo with sequence-level IS,
// sequence-level IS with bnpo / dr_grpo / dapo / cispo): TRL runs those and the objective computes them. The
// generation-batch checks (generation_batch_size divisible by the global batch and by num_generations) are
// generationSplit's (trl.ts), which every step runs whichever objective applies; Liger's PEFT checks need the
// adapter, not a setting.
import { TRL_GLOBAL_COUNT } from '../../kernels/types.ts';
import { heldRanks, type TrlConfig, type TrlRun } from './trl.ts';
import type { TrainerRule } from './trainer_rules.ts';

const CONFIG = 'huggingface/trl trl/trainer/grpo_config.py GRPOConfig.__post_init__';
const INIT = 'huggingface/trl trl/trainer/grpo_trainer.py GRPOTrainer.__init__';
const LIGER = 'linkedin/Liger-Kernel src/liger_kernel/chunked_loss/grpo_loss.py LigerFusedLinearGRPOFunction.forward (v0.8.0)';
const LIGER_NORM = 'linkedin/Liger-Kernel src/liger_kernel/chunked_loss/fused_linear_ppo.py _compute_dapo_normalizer (v0.8.0)';
const QUANTILE = 'huggingface/trl trl/trainer/grpo_trainer.py get_high_entropy_mask';
const COMPUTE_LOSS = 'huggingface/trl trl/trainer/grpo_trainer.py _compute_loss';


/**
 * dr_grpo's divisor B · max_completion_length with max_completion_length None: TRL's _compute_loss raises a TypeError.
 * The studio loss's dr_grpo refuses with the same words (step_config.ts studioView).
 */
export const drGrpoWithoutLength = (lossType: unknown, length: unknown): string | null =>
  lossType === 'dr_grpo' && length === null ? 'null with loss_type dr_grpo: TRL divides by per_token_loss.size(0) * max_completion_length, and None there raises a TypeError in _compute_loss; set max_completion_length' : null;

/** vllm_importance_sampling_clip_max as __post_init__ leaves it: the deprecated cap, when set, replaces it. */
const clipMax = (c: TrlConfig) => c.vllm_importance_sampling_cap ?? c.vllm_importance_sampling_clip_max;


export const TRL_RULES: readonly TrainerRule<TrlConfig, TrlRun>[] = [
  {
    fields: ['config.max_completion_length', 'config.loss_type'],
    by: 'trainer',
    source: COMPUTE_LOSS,
    check: (c) => drGrpoWithoutLength(c.loss_type, c.max_completion_length),
  },
  {
    fields: ['config.sync_ref_model', 'config.beta'],
    by: 'trainer',
    source: INIT,
    check: (c) => (c.sync_ref_model && c.beta === 0 ? 'TRL refuses sync_ref_model with beta 0: "You passed `sync_ref_model=True` while `beta=0.0`, which means the reference model is not used during training. Consequently, GRPOTrainer does not create a `ref_model` instance, and there is nothing to synchronize. Please set `sync_ref_model=False`, or set `beta` to a non-zero value."' : null),
  },
  {
    fields: ['config.vllm_importance_sampling_mode', 'config.loss_type', 'config.use_vllm', 'config.vllm_importance_sampling_correction'],
    by: 'trainer',
    source: INIT,
    check: (c) =>
      c.loss_type === 'vespo' && c.use_vllm && c.vllm_importance_sampling_correction && c.vllm_importance_sampling_mode !== 'token_truncate' && c.vllm_importance_sampling_mode !== 'token_mask'
        ? `TRL refuses loss_type vespo with the vLLM correction (use_vllm, vllm_importance_sampling_correction) in ${c.vllm_importance_sampling_mode}: "VESPO loss requires \`vllm_importance_sampling_mode\` to be either 'token_truncate' or 'token_mask'. Got: ${c.vllm_importance_sampling_mode}."`
        : null,
  },
  {
    fields: ['config.vllm_importance_sampling_clip_min', 'config.vllm_importance_sampling_clip_max'],
    by: 'trainer',
    source: CONFIG,
    // Checked whatever use_vllm is: __post_init__ does not look at it.
    check: (c) => {
      const [lo, hi] = [c.vllm_importance_sampling_clip_min, clipMax(c)];
      return lo !== null && hi !== null && lo >= hi ? `TRL refuses: "vllm_importance_sampling_clip_min (${lo}) must be less than vllm_importance_sampling_clip_max (${hi})."` : null;
    },
  },
  {
    fields: ['config.vllm_importance_sampling_clip_max', 'config.vllm_importance_sampling_clip_min', 'config.vllm_importance_sampling_mode', 'config.vllm_importance_sampling_correction'],
    by: 'trainer',
    source: CONFIG,
    check: (c) =>
      c.vllm_importance_sampling_correction && c.vllm_importance_sampling_mode.endsWith('_truncate') && c.vllm_importance_sampling_clip_min === null && clipMax(c) === null
        ? `a *_truncate mode needs vllm_importance_sampling_clip_min or vllm_importance_sampling_clip_max (vllm_importance_sampling_mode = ${c.vllm_importance_sampling_mode}); TRL refuses: "At least one of \`vllm_importance_sampling_clip_min\` or \`vllm_importance_sampling_clip_max\` must be set when \`vllm_importance_sampling_mode\` is a \`*_truncate\` mode."`
        : null,
  },
  {
    fields: ['config.use_liger_kernel', 'config.off_policy_mask_threshold'],
    by: 'trainer',
    source: INIT,
    check: (c) => (c.use_liger_kernel && c.off_policy_mask_threshold !== null ? `TRL refuses use_liger_kernel with off_policy_mask_threshold = ${c.off_policy_mask_threshold}: "Liger kernel does not support off-policy sequence masking yet."` : null),
  },
  {
    fields: ['config.use_liger_kernel', 'config.top_entropy_quantile'],
    by: 'trainer',
    source: INIT,
    check: (c) => (c.use_liger_kernel && c.top_entropy_quantile < 1 ? `TRL refuses use_liger_kernel with top_entropy_quantile = ${c.top_entropy_quantile} (NotImplementedError): "Liger Kernels don't currently support masking token positions based on entropy."` : null),
  },
  {
    fields: ['config.use_liger_kernel', 'config.entropy_coef', 'config.use_adaptive_entropy'],
    by: 'trainer',
    source: INIT,
    // _entropy_bonus_enabled: a non-zero coefficient, or adaptive mode whatever the coefficient.
    check: (c) =>
      c.use_liger_kernel && (c.entropy_coef !== 0 || c.use_adaptive_entropy)
        ? `TRL refuses use_liger_kernel with an entropy bonus (entropy_coef = ${c.entropy_coef}, use_adaptive_entropy = ${c.use_adaptive_entropy}; NotImplementedError): "Entropy bonus is not supported with Liger kernel."`
        : null,
  },
  {
    fields: ['config.use_liger_kernel', 'config.importance_sampling_level', 'config.loss_type'],
    by: 'trainer',
    source: LIGER,
    check: (c) =>
      c.use_liger_kernel && c.importance_sampling_level === 'sequence' && ['cispo', 'sapo', 'vespo'].includes(c.loss_type)
        ? `Liger's GRPO loss (use_liger_kernel) raises for importance_sampling_level = sequence with loss_type ${c.loss_type}: "Sequence-level importance sampling is not supported for loss_type='${c.loss_type}'. Use importance_sampling_level='token' instead."`
        : null,
  },
  {
    fields: ['run.rank', 'run.num_processes'],
    by: 'studio',
    source: 'src/io/formats/index.ts mergeImports (rank files of one step)',
    check: (_, r) => {
      const ranks = ([] as number[]).concat(r.rank);
      const bad = ranks.find((k) => k >= r.num_processes);
      return bad !== undefined ? `${JSON.stringify(r.rank)}: rank ${bad} is not one of num_processes = ${r.num_processes} processes` : new Set(ranks).size !== ranks.length ? `${JSON.stringify(r.rank)}: a process listed twice` : null;
    },
  },
  // What TRL runs but a batch without every rank's rows cannot reproduce (a merge of all num_processes rank files can).
  {
    fields: ['config.top_entropy_quantile', 'run.num_processes', 'run.rank'],
    by: 'studio',
    source: QUANTILE,
    check: (c, r) =>
      c.top_entropy_quantile < 1 && heldRanks(r) < r.num_processes
        ? `${c.top_entropy_quantile} with num_processes = ${r.num_processes}: TRL takes the entropy threshold (torch.quantile) over the entropies gathered from every process, and the batch holds ${heldRanks(r)} of them; import every rank's file together to reproduce the entropy mask`
        : null,
  },
  {
    fields: ['run.num_processes', 'run.rank', 'config.use_liger_kernel', 'config.loss_type'],
    by: 'studio',
    source: LIGER_NORM,
    check: (c, r) =>
      c.use_liger_kernel && TRL_GLOBAL_COUNT.includes(c.loss_type) && heldRanks(r) < r.num_processes
        ? `${r.num_processes} with use_liger_kernel and loss_type ${c.loss_type}: Liger divides by this micro-batch's loss-mask tokens summed over every process (all_reduce) / num_processes, and the batch holds ${heldRanks(r)} of the processes; import every rank's file together`
        : null,
  },
  {
    fields: ['config.loss_type', 'run.rank'],
    by: 'studio',
    source: COMPUTE_LOSS,
    // luspo's mean runs over each process's per_token_loss, (B, T_r) with T_r its own padded width as soon as any
    // per-token factor joins it (token-level IS ratio, β·KL, the entropy mask): a merged batch drops T_r.
    check: (c, r) =>
      c.loss_type === 'luspo' && heldRanks(r) > 1
        ? `luspo over ${heldRanks(r)} processes' rows: TRL takes each process's mean over its own padded completion width, which the merged batch does not keep; step one rank's file`
        : null,
  },
  {
    fields: ['run.num_items_in_batch', 'config.loss_type', 'run.num_processes', 'run.rank'],
    by: 'studio',
    source: COMPUTE_LOSS,
    // Without Liger, dapo / cispo / vespo divide by the generation batch's items over every process (gathered: with
    // every rank's rows merged in, their own count).
    check: (c, r) =>
      !c.use_liger_kernel && TRL_GLOBAL_COUNT.includes(c.loss_type) && heldRanks(r) < r.num_processes && r.num_items_in_batch === null
        ? `needed by loss_type ${c.loss_type} with num_processes = ${r.num_processes} (the loss-mask tokens of the generation batch over every process)`
        : null,
  },
  {
    fields: ['config.use_adaptive_entropy', 'run.global_step', 'run.adaptive_entropy_coef', 'run.last_world_entropy'],
    by: 'studio',
    source: COMPUTE_LOSS,
    // After the first step TRL's coefficient and its gate are the run's state, not the config's start values.
    check: (c, r) =>
      c.use_adaptive_entropy && (r.global_step ?? 0) > 0 && (r.adaptive_entropy_coef === null || r.last_world_entropy === null)
        ? `with global_step ${r.global_step}: TRL's coefficient (self.entropy_coef) and its gate (the last world entropy) have moved since the start; give run.adaptive_entropy_coef and run.last_world_entropy (TRL's checkpoint state: entropy_coef, last_world_entropy)`
        : null,
  },
  {
    fields: ['config.kl_estimator', 'config.beta'],
    by: 'studio',
    source: COMPUTE_LOSS,
    // TRL's per-token KL is k3 (exp(ref − logp) − (ref − logp) − 1); the studio's k1 / k2 are its own loss's what-ifs.
    check: (c) =>
      c.kl_estimator !== 'k3' && c.beta !== 0
        ? `${c.kl_estimator} with beta ${c.beta}: TRL's objective computes k3 only (the studio's k1 / k2 apply to its own loss, which these settings do not follow); leave kl_estimator out or at k3`
        : null,
  },
];

/**
 * TRL's sync_ref_model (SyncRefModelCallback syncs after each step whose global_step is a multiple of
 * ref_model_sync_steps: ref ← (1 − α)·ref + α·policy): why the reference log-probs taken after `taken` completed
 * steps are not TRL's reference at the update after `at` completed steps, or null (huggingface/trl
 * trl/trainer/callbacks.py SyncRefModelCallback.on_step_end). The reference stage asks it
 * (src/grpo/step_train.ts): the batch's own ref_per_token_logps were taken at its run.global_step, the model as
 * loaded at 0 (never synced); a loss case or the objective alone carries its reference log-probs and never needs it.
 */
export function trlReferenceSync(c: Pick<TrlConfig, 'sync_ref_model' | 'beta' | 'ref_model_sync_steps' | 'ref_model_mixup_alpha'>, taken: number, at: number): string | null {
  if (!c.sync_ref_model || c.beta === 0) return null;
  const [then, now] = [Math.floor(taken / c.ref_model_sync_steps), Math.floor(at / c.ref_model_sync_steps)];
  if (then === now) return null;
  const mix = `(ref ← (1 − ${c.ref_model_mixup_alpha})·ref + ${c.ref_model_mixup_alpha}·policy)`;
  return taken === 0
    ? `config.sync_ref_model: with global_step ${at} ≥ ref_model_sync_steps ${c.ref_model_sync_steps}: TRL's reference has been mixed with the policy ${now} time(s) ${mix}, the studio's is the model as loaded (or --ref-model): give the batch the trainer's ref_per_token_logps, or give that synced reference as --ref-model and leave sync_ref_model out`
    : `config.sync_ref_model: the batch's ref_per_token_logps were taken at global_step ${taken}, and TRL mixes its reference with the policy ${now - then} more time(s) by global_step ${at} ${mix}: this later update's reference is not in the batch`;
}
