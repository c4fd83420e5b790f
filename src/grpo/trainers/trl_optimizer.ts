// The optimizer step TRL's GRPOTrainer takes, from its config (GRPOConfig inherits transformers'
// TrainingArguments) and run (TrainerState): torch.optim.AdamW with adam_beta1/2, adam_epsilon, weight decay on
// every parameter but biases and norm weights, at the learning rate the scheduler gives this step.
//   - Decay groups: no_decay 'biases_and_norms' (src/grpo/optimizer.ts hfNoDecay).
//   - Schedules: transformers' lambdas (hf_schedule.ts); the warmup length is
//     TrainingArguments.get_warmup_steps (warmup_steps ≥ 1 as is, in (0, 1) a ratio, else ⌈T·warmup_ratio⌉).
// The scheduler is stepped after each optimizer step, so the step after global_step completed ones runs at
// learning_rate · λ(global_step). Without run.global_step this is the run's first step (λ(0)); a schedule that
// needs run.max_steps there (linear or cosine past a warmup) is an error naming it, never a guessed rate.
import { SettingsError } from '../settings/types.ts';
import { TRL_LR_SCHEDULERS, TRL_OPTIMS, type TrlConfig, type TrlRun } from '../settings/trl.ts';
import type { OptimizerConfig } from '../optimizer.ts';
import { hfLrLambda } from './hf_schedule.ts';

/** The warmup length for T total steps (TrainingArguments.get_warmup_steps). */
function warmupSteps(c: TrlConfig, T: number | null): number {
  const ratio = c.warmup_steps > 0 && c.warmup_steps < 1 ? c.warmup_steps : c.warmup_steps >= 1 ? null : (c.warmup_ratio ?? 0);
  if (ratio === null) return Math.floor(c.warmup_steps);
  if (ratio === 0) return 0;
  if (T === null) throw new SettingsError(`run.max_steps: needed for a warmup given as a ratio (${c.warmup_steps > 0 ? `warmup_steps ${c.warmup_steps}` : `warmup_ratio ${c.warmup_ratio}`}); give trainer.state.max_steps`);
  return Math.ceil(T * ratio);
}

/** cosine's num_cycles: lr_scheduler_kwargs may set it; any other kwarg is refused (it would change the rate). */
function numCycles(c: TrlConfig): number {
  const kw = c.lr_scheduler_kwargs ?? {};
  const other = Object.keys(kw).filter((k) => !(c.lr_scheduler_type === 'cosine' && k === 'num_cycles'));
  if (other.length) throw new SettingsError(`config.lr_scheduler_kwargs: ${other.join(', ')} for ${c.lr_scheduler_type} is not reproduced by the studio (only cosine's num_cycles)`);
  const n = kw.num_cycles ?? 0.5;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new SettingsError(`config.lr_scheduler_kwargs.num_cycles: expected a number, got ${JSON.stringify(n)}`);
  return n;
}

/** λ(step) of the schedule, learning_rate · λ being the rate of the optimizer step after `step` completed ones. */
export function trlLrFactor(c: TrlConfig, run: TrlRun): number {
  if (!(TRL_LR_SCHEDULERS as readonly string[]).includes(c.lr_scheduler_type)) {
    throw new SettingsError(`config.lr_scheduler_type: expected one of ${TRL_LR_SCHEDULERS.join(', ')}, got ${JSON.stringify(c.lr_scheduler_type)}`);
  }
  const cycles = numCycles(c);
  const type = c.lr_scheduler_type as (typeof TRL_LR_SCHEDULERS)[number];
  if (type === 'constant') return 1; // get_constant_schedule has no warmup: no length needed
  const s = run.global_step ?? 0;
  const T = run.max_steps;
  const W = warmupSteps(c, T);
  if (T === null && s >= W && type !== 'constant_with_warmup') {
    // The first step after a warmup of 0 is λ = 1 for both decays; any later one needs the run's length.
    if (s === 0) return 1;
    throw new SettingsError(`run.max_steps: lr_scheduler_type ${type} at run.global_step ${s} needs the run's length (trainer.state.max_steps)`);
  }
  return hfLrLambda(type, s, W, T ?? 0, { num_cycles: cycles, min_lr_rate: 0 });
}

/** The AdamW of TRL's optimizer step for this config and run. Throws SettingsError naming the field. */
export function trlOptimizer(c: TrlConfig, run: TrlRun): OptimizerConfig {
  if (!(TRL_OPTIMS as readonly string[]).includes(c.optim)) {
    throw new SettingsError(`config.optim: expected one of ${TRL_OPTIMS.join(', ')}, got ${JSON.stringify(c.optim)}: the studio does not reproduce that optimizer's update`);
  }
  for (const k of ['adam_beta1', 'adam_beta2'] as const) if (!(c[k] < 1)) throw new SettingsError(`config.${k}: expected a number in [0, 1), got ${c[k]}`);
  return {
    name: c.optim === 'sgd' ? 'sgd' : 'adamw',
    lr: c.learning_rate * trlLrFactor(c, run),
    betas: [c.adam_beta1, c.adam_beta2],
    eps: c.adam_epsilon,
    weight_decay: c.weight_decay,
    momentum: 0,
    no_decay: 'biases_and_norms',
  };
}
