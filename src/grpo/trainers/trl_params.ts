// Resolves a TRL config + run context + one micro-batch into the kernel's TrlLossParams, with the checks
// GRPOConfig.__post_init__ and GRPOTrainer make (huggingface/trl trl/trainer/grpo_config.py, grpo_trainer.py at
// f2cd577): epsilon_high null = epsilon, the vLLM IS bounds, the inputs a setting needs, adaptive-entropy gating.
import type { TrlLossParams, VllmIsMode } from '../../kernels/types.ts';
import { SettingsError } from '../settings/types.ts';
import type { TrlConfig, TrlRun } from '../settings/trl.ts';

export interface TrlInputsPresent {
  B: number;
  T: number;
  ref: boolean;
  sampling: boolean;
  /** Σ completion_mask × tool_mask of this micro-batch: num_items_in_batch when the run does not give it. */
  localItems: number;
}

export function resolveTrlParams(c: TrlConfig, run: TrlRun, x: TrlInputsPresent, entropy_threshold: number | null): TrlLossParams {
  const vllm = c.use_vllm && c.vllm_importance_sampling_correction;
  const lo = c.vllm_importance_sampling_clip_min;
  const hi = c.vllm_importance_sampling_clip_max;
  if (vllm) {
    if (lo !== null && hi !== null && lo >= hi) throw new SettingsError(`config.vllm_importance_sampling_clip_min: ${lo} must be less than vllm_importance_sampling_clip_max (${hi})`);
    if (c.vllm_importance_sampling_mode.endsWith('truncate') && lo === null && hi === null) {
      throw new SettingsError('config.vllm_importance_sampling_clip_max: a *_truncate mode needs vllm_importance_sampling_clip_min or _max');
    }
    if (!x.sampling) throw new SettingsError('config.use_vllm: the vLLM importance-sampling correction needs tensor "sampling_per_token_logps"');
  }
  if (c.beta !== 0 && !x.ref) throw new SettingsError(`config.beta = ${c.beta} needs tensor "ref_per_token_logps"`);
  // dapo / cispo / vespo divide by the generation batch's items over every process: one rank's count is not it.
  if (run.num_processes > 1 && run.num_items_in_batch === null && ['dapo', 'cispo', 'vespo'].includes(c.loss_type)) {
    throw new SettingsError(`run.num_items_in_batch: needed by loss_type ${c.loss_type} with num_processes = ${run.num_processes} (the loss-mask tokens of the generation batch over every process)`);
  }
  const bonus = c.entropy_coef !== 0 || c.use_adaptive_entropy;
  // TRL starts _last_world_entropy at +inf: the adaptive coefficient applies from the step after a measurement.
  const lastWorld = run.last_world_entropy ?? Infinity;
  const coef = !bonus ? 0 : c.use_adaptive_entropy ? (lastWorld <= c.entropy_target ? c.entropy_coef : 0) : c.entropy_coef;
  return {
    B: x.B,
    T: x.T,
    loss_type: c.loss_type,
    importance_sampling_level: c.importance_sampling_level,
    beta: c.beta,
    use_bias_correction_kl: c.use_bias_correction_kl,
    epsilon_low: c.epsilon,
    epsilon_high: c.epsilon_high ?? c.epsilon,
    delta: c.delta,
    vllm_is_mode: (vllm ? c.vllm_importance_sampling_mode : 'off') as VllmIsMode,
    vllm_is_min: lo,
    vllm_is_max: hi,
    off_policy_mask_threshold: c.off_policy_mask_threshold,
    entropy_threshold,
    sapo_temperature_pos: c.sapo_temperature_pos,
    sapo_temperature_neg: c.sapo_temperature_neg,
    vespo_k_pos: c.vespo_k_pos,
    vespo_lambda_pos: c.vespo_lambda_pos,
    vespo_k_neg: c.vespo_k_neg,
    vespo_lambda_neg: c.vespo_lambda_neg,
    max_completion_length: c.max_completion_length,
    gradient_accumulation_steps: run.gradient_accumulation_steps,
    num_items_in_batch: run.num_items_in_batch ?? x.localItems,
    num_processes: run.num_processes,
    entropy_coef: coef,
  };
}
