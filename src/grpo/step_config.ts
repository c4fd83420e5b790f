// The settings one update runs with (StepConfig), from the effective settings (src/grpo/settings/effective.ts:
// the trainer's defaults under a preset / a file / the user's edits): the studio loss from the TRL-named
// fields, the trainer's objective where the studio loss is not it, and the optimizer step. `grpo-studio
// step` and the page's worker both call stepConfigOf, so the same settings give the same update.
// batchConfigOf writes a StepConfig back into a batch file's `config`, so an exported batch replays it.
import { BatchFormatError, type BatchConfig, type PositionIdsMode, type ScaleRewards } from '../io/batch.ts';
import { advantageClipOf, rewardAdvantageGap, type AdvantageEstimator } from './advantages.ts';
import { AGGREGATIONS, DEFAULT_GRPO_LOSS_CONFIG, parseGrpoLossConfig, type GrpoLossConfig } from './loss.ts';
import { parseOptimizerConfig, type OptimizerConfig } from './optimizer.ts';
import { configTable, runTable, settingOf, type EffectiveSettings } from './settings/effective.ts';
import { TRAINER_TABLES } from './settings/trainers.ts';
import { trainingDropout, type TrainingDropout } from './settings/dropout.ts';
import { GRPO_LOSS_SETTINGS } from './settings/studio.ts';
import { parseTrlConfig, parseTrlRun, TRL_RUN_SETTINGS, TRL_SETTINGS } from './settings/trl.ts';
import { parseSettings, rowsIn, specOf, type SettingsTable } from './settings/table.ts';
import { trlOptimizer } from './trainers/trl_optimizer.ts';
import { verlOptimizer } from './trainers/verl_optimizer.ts';
import { openrlhfOptimizer } from './trainers/openrlhf_optimizer.ts';
import { trainerRefusal } from './settings/rules.ts';
import { drGrpoWithoutLength, trlReferenceSync } from './settings/trl_rules.ts';
import { SettingsError, type TrainerId } from './settings/types.ts';
import { objectiveFor, type TrainerObjective } from './step_objective.ts';

/** Everything one update needs besides the data: TRL's loss fields, the optimizer, clipping, positions. */
export interface StepConfig {
  loss: GrpoLossConfig;
  optimizer: OptimizerConfig;
  max_grad_norm: number; // ≤ 0: no clipping
  position_ids: PositionIdsMode;
  /** How advantages are computed when the batch has rewards but no advantages (and from sampled rewards). */
  scale_rewards: ScaleRewards;
  advantage_estimator: AdvantageEstimator;
  /** [low, high] the recomputed advantages are clamped to (advantageClipOf: OpenRLHF's reward.clip_range), or null. */
  advantage_clip: readonly number[] | null;
  /** The trainer objective the loss and gradient follow (src/grpo/step_objective.ts); unset or null: the studio loss. */
  trainer?: TrainerObjective | null;
  /** μ: optimisation passes over the batch (loss, backward, step each; old log-probs fixed from before the first). Unset: 1. */
  passes?: number;
  /** Why the trainer's training forward runs the model's dropout (trainingDropout), or unset / null where it does not. */
  training_dropout?: TrainingDropout | null;
  /** Why the trainer's advantages are not the studio's group advantage of the rewards (rewardAdvantageGap), or unset. */
  advantage_gap?: string | null;
  /**
   * TRL's sync_ref_model at this update (trlReferenceSync): why each reference the stage may use is not TRL's — the
   * model as loaded (`studio`), the batch's own ref_per_token_logps (`batch`) — or null where it is; unset: no sync.
   */
  reference_sync?: { studio: string | null; batch: string | null } | null;
}

/**
 * Each trainer's setting for μ, the passes over one batch (PASSES_SETTING[trainer] names its row): TRL
 * GRPOConfig.num_iterations, verl actor.ppo_epochs, OpenRLHF train.max_epochs (openrlhf/cli/train_ppo_ray.py).
 */
export const PASSES_SETTING: Partial<Record<EffectiveSettings['trainer'], string>> = { trl: 'num_iterations', verl: 'ppo_epochs', openrlhf: 'train.max_epochs' };

/** μ from a config in its trainer's names, checked against its row (SettingsError naming the field); 1 where the trainer has none. */
function passesOf(trainer: EffectiveSettings['trainer'], cfg: Record<string, unknown>): number {
  const name = PASSES_SETTING[trainer];
  return name === undefined ? 1 : (parseSettings<Record<string, number>>(configTable(trainer).filter((s) => s.name === name), pick(cfg, [name]), 'config').values[name] as number);
}

/** The TRL fields the studio loss applies itself (GRPO_LOSS_SETTINGS under TRL's names): the rest of a TRL config is the objective's. */
const STUDIO_LOSS_FIELDS: ReadonlySet<string> = new Set(GRPO_LOSS_SETTINGS.map((s) => (s.name === 'epsilon_low' ? 'epsilon' : s.name)));
export const studioLossHolds = (name: string): boolean => STUDIO_LOSS_FIELDS.has(name);

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
  // transformers' Trainer clips only when max_grad_norm > 0: 0 and null both mean no clipping.
  const mgn = c.max_grad_norm === null ? 0 : (c.max_grad_norm ?? 1.0);
  if (typeof mgn !== 'number' || !Number.isFinite(mgn) || mgn < 0) throw new BatchFormatError(`config.max_grad_norm: expected a number >= 0 or null, got ${JSON.stringify(mgn)}`);
  return {
    loss,
    optimizer: c.optimizer === undefined ? adamwOfTrlNames(c) : parseOptimizerConfig(c.optimizer),
    max_grad_norm: mgn,
    position_ids: c.position_ids ?? 'from_attention_mask',
    scale_rewards: parseTrlConfig({ scale_rewards: c.scale_rewards }).values.scale_rewards, // the TRL table: "median" names the field
    advantage_estimator: c.advantage_estimator ?? 'trl',
    advantage_clip: advantageClipOf(c, c.advantage_estimator ?? 'trl'),
    passes: passesOf('trl', c),
  };
}

/**
 * Without a studio `optimizer` object, AdamW's values in TrainingArguments' names (learning_rate, adam_beta1/2,
 * adam_epsilon, weight_decay; TRL's defaults for the missing ones), as the page's loss panel reads them.
 */
function adamwOfTrlNames(c: BatchConfig): OptimizerConfig {
  const t = parseTrlConfig(scoped(TRL_SETTINGS, c as Record<string, unknown>)).values;
  return { name: 'adamw', lr: t.learning_rate, betas: [t.adam_beta1, t.adam_beta2], eps: t.adam_epsilon, weight_decay: t.weight_decay, momentum: 0, no_decay: 'none' };
}

/** A StepConfig written back in a batch file's terms (the inverse of stepConfigFromBatch). */
export function batchConfigOf(config: StepConfig, model_type: string): BatchConfig {
  const { loss: l, optimizer, max_grad_norm, position_ids, scale_rewards, advantage_estimator, advantage_clip } = config;
  return {
    loss_type: l.loss_type, beta: l.beta, epsilon: l.epsilon_low, epsilon_high: l.epsilon_high, delta: l.delta, temperature: l.temperature,
    kl_estimator: l.kl_estimator, importance_sampling_level: l.importance_sampling_level, max_completion_length: l.max_completion_length,
    optimizer: { ...optimizer }, max_grad_norm, position_ids, scale_rewards, advantage_estimator, model_type,
    ...(advantage_clip ? { 'reward.clip_range': [...advantage_clip] } : {}), // the clamp the advantages were recomputed with
    ...(config.passes !== undefined && config.passes > 1 ? { num_iterations: config.passes } : {}),
  };
}

/** `o`'s keys that the table's rows of `scope` name: the optimizer step reads only those (a studio-only loss_type is not its business). */
const scoped = (table: SettingsTable, o: Record<string, unknown>, scope = 'optimizer') => rowsIn(table.filter((s) => s.scope === scope), o);

/**
 * TrainingArguments' fields that make a batch's optimizer step TRL's trainer's (decay groups, schedule): those
 * beyond the values every AdamW has (learning_rate, adam_beta1/2, weight_decay, which the page's loss panel
 * holds), and TrainerState's position (run).
 */
const TRAINER_STEP_FIELDS = ['optim', 'adam_epsilon', 'lr_scheduler_type', 'lr_scheduler_kwargs', 'warmup_steps', 'warmup_ratio'];
const STATE_FIELDS = TRL_RUN_SETTINGS.filter((x) => x.scope === 'optimizer').map((x) => x.name);

/**
 * Whether a TRL batch's optimizer step is TRL's trainer's (trlOptimizerOf): it names TrainingArguments' optimizer
 * or schedule (optim, adam_epsilon, lr_scheduler_*, warmup_*) or TrainerState's global_step / max_steps, and has
 * no studio `optimizer` object (torch.optim semantics: one decay group, a constant lr). The page decides the same
 * from its TRL preset, so the CLI and the page take the same step.
 */
export function trlOptimizerApplies(config: Record<string, unknown>, run: Record<string, unknown>): boolean {
  return config.optimizer === undefined && (TRAINER_STEP_FIELDS.some((k) => config[k] !== undefined && config[k] !== null) || STATE_FIELDS.some((k) => run[k] !== undefined && run[k] !== null));
}

/**
 * The optimizer step of TRL's trainer for a config and run in TRL's names (TrainingArguments' optimizer fields,
 * TrainerState; every other key is the objective's to check or list): src/grpo/trainers/trl_optimizer.ts.
 * Throws SettingsError naming the field.
 */
export function trlOptimizerOf(config: Record<string, unknown>, run: Record<string, unknown>): OptimizerConfig {
  return trlOptimizer(parseTrlConfig(scoped(TRL_SETTINGS, config)).values, parseTrlRun(scoped(TRL_RUN_SETTINGS, run)).values);
}

/** What the studio's own rows and the TRL rows the studio loss reads hold in a non-TRL trainer's config. */
const studioView = (settings: EffectiveSettings): BatchConfig => {
  // A TRL loss type that is no studio aggregation (sapo, cispo, …) is the objective's: the studio loss keeps its default.
  // max_completion_length left out is GRPOConfig's default, as TRL's objective takes it (not the batch's width); None
  // (no cap) leaves the studio loss's L_max the batch's width, as beside verl and OpenRLHF, except under dr_grpo,
  // which TRL cannot run with it.
  if (settings.trainer === 'trl') {
    const length = settings.config.max_completion_length;
    const none = drGrpoWithoutLength(settings.config.loss_type, length);
    if (none) throw new SettingsError(`config.max_completion_length: ${none}`);
    return {
      ...settings.config,
      ...pick(settings.run, ['num_items_in_batch']),
      max_completion_length: (length === null ? undefined : (length ?? specOf(TRL_SETTINGS, 'max_completion_length').default)) as number | undefined,
      loss_type: isAggregation(settings.config.loss_type) ? (settings.config.loss_type as string | undefined) : undefined,
    };
  }
  // Only the rows of this trainer's config table that are not its own (the studio's, TRL's scale_rewards): a TRL-named
  // key in its config (a stray `beta`) is no row of it, listed as not read (src/io/formats/index.ts), and reads nothing
  // here either — neither the studio loss's β nor, through it, the reference stage (step_objective.ts readsReference).
  const shared = configTable(settings.trainer).filter((s) => s.studio || s.trainer !== settings.trainer).map((s) => s.name);
  // verl's `temperature` is TRL's too (logits / T before the log-softmax); OpenRLHF's is rollout.temperature.
  const t = settings.trainer === 'verl' ? settings.config.temperature : settings.config['rollout.temperature'];
  return { ...Object.fromEntries(Object.entries(settings.config).filter(([k]) => shared.includes(k))), ...(t === undefined ? {} : { temperature: t as number }) };
};

const isAggregation = (v: unknown): boolean => v === undefined || (AGGREGATIONS as readonly unknown[]).includes(v);

const pick = (o: Record<string, unknown>, keys: readonly string[]) => Object.fromEntries(keys.filter((k) => o[k] !== undefined && o[k] !== null).map((k) => [k, o[k]]));

/**
 * The trainer's objective under these settings: the rows of its own tables (the studio's rows beside them left out;
 * TRL's table's studio-marked kl_estimator kept, so TRL's rules refuse an estimator its objective would drop).
 */
export function trainerObjectiveOf(settings: EffectiveSettings): TrainerObjective {
  const { trainer } = settings;
  return { trainer, config: rowsIn(TRAINER_TABLES[trainer].config, settings.config), run: rowsIn(runTable(trainer), settings.run) };
}

/** The actor's optimizer step of the trainers that are not TRL, from their own rows. */
const TRAINER_OPTIMIZERS = { verl: verlOptimizer, openrlhf: openrlhfOptimizer } satisfies Record<Exclude<TrainerId, 'trl'>, typeof verlOptimizer>;

/**
 * The update's StepConfig from the effective settings: the studio loss (TRL's names; max_completion_length left
 * out is GRPOConfig's 512 for TRL, as its objective; C = the batch's widest completion, the studio loss's L_max
 * beside verl's and OpenRLHF's objectives, whose tables have none), the trainer's objective wherever the studio loss is not
 * it, and the optimizer step — the studio's `optimizer` object (torch.optim), else TRL's trainer's when the
 * config names TrainingArguments' optimizer / schedule or TrainerState (trlOptimizerApplies; `steps_done`
 * updates after run.global_step, as the page's continued updates), else AdamW of learning_rate / adam_* /
 * weight_decay; for verl and OpenRLHF (without a studio `optimizer` object) the actor's own AdamW, schedule and
 * clipping (TRAINER_OPTIMIZERS: verl_optimizer.ts at run.global_steps, openrlhf_optimizer.ts at
 * run.actor_optimizer_steps, `steps_done` after it).
 * A combination the trainer refuses is refused here (TrainerRefusal, its reason and source).
 * Throws GrpoLossError / OptimizerConfigError / SettingsError naming the field.
 */
export function stepConfigOf(settings: EffectiveSettings, C: number, opts: { steps_done?: number; /** false: leave the trainer's refusal to its objective (a what-if shows it beside the studio loss) */ refuse?: boolean } = {}): StepConfig {
  const studio = studioView(settings);
  const config = stepConfigFromBatch(studio, C);
  const o = trainerObjectiveOf(settings);
  // The page's continued updates are later steps of the same run: TRL's rules on the step's position (the reference
  // sync_ref_model has mixed, the adaptive entropy coefficient that has moved) see run.global_step + steps_done.
  const later = opts.steps_done ?? 0;
  if (o.trainer === 'trl' && later > 0) o.run = { ...o.run, global_step: (typeof o.run.global_step === 'number' ? o.run.global_step : 0) + later };
  const held = (k: string) => settings.trainer === 'trl' && studioLossHolds(k) && (k !== 'loss_type' || isAggregation(o.config.loss_type));
  const trainer = objectiveFor(o.trainer, o.config, o.run, held);
  // What the trainer itself would refuse is refused before anything runs, with its reason (trl_rules.ts, …).
  const refusal = trainer && opts.refuse !== false ? trainerRefusal(trainer.trainer, trainer.config, trainer.run) : null;
  if (refusal) throw refusal;
  if (settings.trainer === 'trl' && trlOptimizerApplies(settings.config, settings.run)) {
    const g = settings.run.global_step;
    config.optimizer = trlOptimizerOf(settings.config, { ...settings.run, global_step: (typeof g === 'number' ? g : 0) + (opts.steps_done ?? 0) });
  }
  if (settings.config.optimizer === undefined && settings.trainer !== 'trl') Object.assign(config, TRAINER_OPTIMIZERS[settings.trainer](settings.config, settings.run, opts.steps_done ?? 0));
  // TRL's aggregation of several reward functions is an advantages row (no objective follows it): the studio's own
  // rollouts need it too. (verl's / OpenRLHF's estimator rows describe an imported batch's advantages.)
  const advantage_gap = settings.trainer === 'trl' ? rewardAdvantageGap({ trainer: 'trl', config: o.config }) : null;
  // OpenRLHF's clamp is its own row (reward.clip_range), outside the studio's view of the config.
  const training_dropout = trainingDropout(settings.trainer, settings.config);
  return { ...config, advantage_clip: advantageClipOf(settings.config, config.advantage_estimator), trainer, passes: passesOf(settings.trainer, settings.config), advantage_gap, training_dropout, reference_sync: referenceSync(settings, later) };
}

/** TRL's reference syncs between where each reference was taken and this update (after run.global_step + steps_done steps). */
function referenceSync(settings: EffectiveSettings, later: number): StepConfig['reference_sync'] {
  if (settings.trainer !== 'trl' || settingOf(settings, 'config', 'sync_ref_model').value !== true) return null;
  // Only the sync rows (the rest of the config may hold a studio aggregation as loss_type, which TRL's parse refuses).
  const v = (name: string) => settingOf(settings, 'config', name).value as number;
  const c = { sync_ref_model: true, beta: v('beta'), ref_model_sync_steps: v('ref_model_sync_steps'), ref_model_mixup_alpha: v('ref_model_mixup_alpha') };
  const g = typeof settings.run.global_step === 'number' ? settings.run.global_step : 0;
  return { studio: trlReferenceSync(c, 0, g + later), batch: trlReferenceSync(c, g, g + later) };
}