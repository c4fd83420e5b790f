// The settings one update runs with (StepConfig), read from a batch file's `config` (TRL names) and
// written back into one, so an exported batch replays the same update. Kept in its own file: the
// settings table (src/grpo/settings/) will replace this hand-written mapping.
import { BatchFormatError, type BatchConfig, type PositionIdsMode, type ScaleRewards } from '../io/batch.ts';
import type { AdvantageEstimator } from './advantages.ts';
import { DEFAULT_GRPO_LOSS_CONFIG, parseGrpoLossConfig, type GrpoLossConfig } from './loss.ts';
import { parseOptimizerConfig, type OptimizerConfig } from './optimizer.ts';
import { parseTrlConfig, parseTrlRun, TRL_RUN_SETTINGS, TRL_SETTINGS } from './settings/trl.ts';
import type { SettingsTable } from './settings/table.ts';
import { trlOptimizer } from './trainers/trl_optimizer.ts';
import type { TrainerObjective } from './step_objective.ts';

/** Everything one update needs besides the data: TRL's loss fields, the optimizer, clipping, positions. */
export interface StepConfig {
  loss: GrpoLossConfig;
  optimizer: OptimizerConfig;
  max_grad_norm: number; // ≤ 0: no clipping
  position_ids: PositionIdsMode;
  /** How advantages are computed when the batch has rewards but no advantages (and from sampled rewards). */
  scale_rewards: ScaleRewards;
  advantage_estimator: AdvantageEstimator;
  /** The trainer objective the loss and gradient follow (src/grpo/step_objective.ts); unset or null: the studio loss. */
  trainer?: TrainerObjective | null;
}

/** The batch-config fields stepConfigFromBatch reads: what the studio loss (and the step around it) applies. */
export const STEP_CONFIG_FIELDS: readonly string[] = [
  'loss_type', 'beta', 'epsilon', 'epsilon_high', 'delta', 'temperature', 'max_completion_length', 'kl_estimator', 'importance_sampling_level',
  'num_items_in_batch', 'max_grad_norm', 'optimizer', 'position_ids', 'scale_rewards', 'advantage_estimator',
];

/**
 * A batch file's `config` (TRL names: epsilon / epsilon_high, optimizer {name, lr, betas, eps,
 * weight_decay}, max_grad_norm) as a StepConfig. Missing fields take TRL's defaults (epsilon_high =
 * epsilon, max_grad_norm 1.0); a missing max_completion_length is the batch's widest completion C.
 * Throws GrpoLossError / OptimizerConfigError naming the field.
 */
export function stepConfigFromBatch(cfg: BatchConfig | undefined, C: number): StepConfig {
  const c = cfg ?? {};
  const d = DEFAULT_GRPO_LOSS_CONFIG;
  const epsilon = c.epsilon ?? d.epsilon_low;
  const loss = parseGrpoLossConfig({
    loss_type: c.loss_type ?? d.loss_type,
    beta: c.beta ?? d.beta,
    epsilon_low: epsilon,
    epsilon_high: c.epsilon_high ?? epsilon,
    delta: c.delta ?? null,
    temperature: c.temperature ?? d.temperature,
    max_completion_length: c.max_completion_length ?? C,
    kl_estimator: c.kl_estimator ?? d.kl_estimator,
    importance_sampling_level: c.importance_sampling_level ?? d.importance_sampling_level,
    num_items_in_batch: c.num_items_in_batch,
  });
  const mgn = c.max_grad_norm ?? 1.0;
  if (typeof mgn !== 'number' || !Number.isFinite(mgn)) throw new BatchFormatError(`config.max_grad_norm: expected a number, got ${JSON.stringify(mgn)}`);
  return {
    loss,
    optimizer: parseOptimizerConfig(c.optimizer),
    max_grad_norm: mgn,
    position_ids: c.position_ids ?? 'from_attention_mask',
    scale_rewards: parseTrlConfig({ scale_rewards: c.scale_rewards }).values.scale_rewards, // the TRL table: "median" names the field
    advantage_estimator: c.advantage_estimator ?? 'trl',
  };
}

/** A StepConfig written back in a batch file's terms (the inverse of stepConfigFromBatch). */
export function batchConfigOf(config: StepConfig, model_type: string): BatchConfig {
  const { loss: l, optimizer, max_grad_norm, position_ids, scale_rewards, advantage_estimator } = config;
  return {
    loss_type: l.loss_type, beta: l.beta, epsilon: l.epsilon_low, epsilon_high: l.epsilon_high, delta: l.delta, temperature: l.temperature,
    kl_estimator: l.kl_estimator, importance_sampling_level: l.importance_sampling_level, max_completion_length: l.max_completion_length,
    optimizer: { ...optimizer }, max_grad_norm, position_ids, scale_rewards, advantage_estimator, model_type,
  };
}

const knownTo = (table: SettingsTable, o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([k]) => table.some((s) => s.name === k)));

/** The studio's `optimizer` object's fields in TrainingArguments' names (only those it sets; validated by parseOptimizerConfig). */
export function trlNamesOfOptimizer(raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null) return {};
  const o = parseOptimizerConfig(raw);
  const set = (k: string) => Object.prototype.hasOwnProperty.call(raw, k);
  return {
    ...(set('lr') && { learning_rate: o.lr }),
    ...(set('betas') && { adam_beta1: o.betas[0], adam_beta2: o.betas[1] }),
    ...(set('eps') && { adam_epsilon: o.eps }),
    ...(set('weight_decay') && { weight_decay: o.weight_decay }),
  };
}

/**
 * The optimizer step of TRL's trainer for a config and run in TRL's names (GRPOConfig / TrainingArguments,
 * TrainerState; keys the tables do not know are left to the objective to list), the studio's `optimizer`
 * object, where the config has one, giving its values: src/grpo/trainers/trl_optimizer.ts. Throws
 * SettingsError / OptimizerConfigError naming the field.
 */
export function trlOptimizerOf(config: Record<string, unknown>, run: Record<string, unknown>): OptimizerConfig {
  const c = { ...config, ...trlNamesOfOptimizer(config.optimizer) };
  return trlOptimizer(parseTrlConfig(knownTo(TRL_SETTINGS, c)).values, parseTrlRun(knownTo(TRL_RUN_SETTINGS, run)).values);
}
