// Resolves a TRL config + run context + one micro-batch into the kernel's TrlLossParams (huggingface/trl
// trl/trainer/grpo_trainer.py at f2cd577): first the cross-field rules TRL itself enforces and the ones one
// batch cannot satisfy (src/grpo/settings/trl_rules.ts, through trainerRefusal), then epsilon_high null =
// epsilon, the inputs a setting needs, adaptive-entropy gating and the loss normaliser — TRL's own, or that of
// its Liger loss (use_liger_kernel: compute_liger_loss).
import type { TrlLossParams, VllmIsMode } from '../../kernels/types.ts';
import { trainerRefusal } from '../settings/rules.ts';
import { SettingsError } from '../settings/types.ts';
import { heldRanks, type TrlConfig, type TrlRun } from '../settings/trl.ts';

export interface TrlInputsPresent {
  B: number;
  T: number;
  ref: boolean;
  sampling: boolean;
  /** Σ completion_mask × tool_mask of the batch's rows: num_items_in_batch when the run does not give it. */
  localItems: number;
}

export function resolveTrlParams(c: TrlConfig, run: TrlRun, x: TrlInputsPresent, entropy_threshold: number | null): TrlLossParams {
  const refusal = trainerRefusal('trl', { ...c }, { ...run });
  if (refusal) throw refusal;
  const ranks = heldRanks(run);
  if (x.B % ranks !== 0) throw new SettingsError(`run.rank: the batch holds ${ranks} processes' rows (${JSON.stringify(run.rank)}), but its ${x.B} rows do not split evenly over them (TRL's process_slice gives every process the same number)`);
  const vllm = c.use_vllm && c.vllm_importance_sampling_correction;
  const lo = c.vllm_importance_sampling_clip_min;
  const hi = c.vllm_importance_sampling_clip_max;
  if (vllm && !x.sampling) throw new SettingsError('config.use_vllm: the vLLM importance-sampling correction needs tensor "sampling_per_token_logps"');
  if (c.beta !== 0 && !x.ref) throw new SettingsError(`config.beta = ${c.beta} needs tensor "ref_per_token_logps"`);
  const bonus = c.entropy_coef !== 0 || c.use_adaptive_entropy;
  // TRL starts _last_world_entropy at +inf: the adaptive coefficient applies from the step after a measurement.
  const lastWorld = run.last_world_entropy ?? Infinity;
  // The adaptive coefficient moves after every step: the run's (TRL's self.entropy_coef), else the start value.
  const coef = !bonus ? 0 : c.use_adaptive_entropy ? (lastWorld <= c.entropy_target ? (run.adaptive_entropy_coef ?? c.entropy_coef) : 0) : c.entropy_coef;
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
    // Read by dr_grpo alone, which trl_rules.ts refuses with None (TRL's TypeError).
    max_completion_length: c.max_completion_length ?? 0,
    gradient_accumulation_steps: run.gradient_accumulation_steps,
    ranks,
    ...normaliser(c, run, x.localItems),
    entropy_coef: coef,
  };
}

/**
 * The kernel's dapo / cispo / vespo divisor is max(num_items_in_batch, 1) / num_processes (× the ranks held), with no
 * gradient_accumulation_steps. TRL's own loss: the run's num_items_in_batch (this micro-batch's count when not
 * given). Its Liger loss (compute_liger_loss) never reads num_items_in_batch: LigerFusedLinearGRPOLoss divides
 * these loss types by max(this micro-batch's loss-mask tokens all-reduced over processes / world size, 1)
 * (linkedin/Liger-Kernel src/liger_kernel/chunked_loss/fused_linear_ppo.py _compute_dapo_normalizer, v0.8.0)
 * and TRL then divides every loss type by gradient_accumulation_steps. trl_rules.ts refuses it unless the batch
 * holds every process's rows, whose Σ is then that all-reduce: max(Σ / num_processes, 1) · gas as each rank's
 * divisor. The other loss types normalise alike in both paths
 * (per-sequence mean over B, Σ M, B · max_completion_length, B · T; then ÷ gas).
 */
function normaliser(c: TrlConfig, run: TrlRun, localItems: number): { num_items_in_batch: number; num_processes: number } {
  if (c.use_liger_kernel) return { num_items_in_batch: Math.max(localItems / run.num_processes, 1) * run.gradient_accumulation_steps, num_processes: 1 };
  return { num_items_in_batch: run.num_items_in_batch ?? localItems, num_processes: run.num_processes };
}
