// The optimizer step of OpenRLHF's actor (OpenRLHF/OpenRLHF 3c3be62), from the rows of scope `optimizer` in
// src/grpo/settings/openrlhf.ts:
//   - openrlhf/utils/deepspeed/deepspeed.py DeepspeedStrategy.prepare (_ds_init_train_model's optim_dict): DeepSpeed's AdamW
//     ({"type": "AdamW"} → FusedAdam with adam_w_mode, bias correction; DeepSpeedCPUAdam under adam_offload does the
//     same update) with actor.adam.{lr, betas, eps, weight_decay} over get_optimizer_grouped_parameters' two
//     groups (deepspeed_utils.py: no decay where the name holds bias / layer_norm.weight / layernorm.weight /
//     norm.weight / ln_f.weight: src/grpo/optimizer.ts openrlhfNoDecay); Muon is refused;
//   - the scheduler: transformers get_scheduler(actor.lr_scheduler, num_warmup_steps = ⌈max_steps ·
//     lr_warmup_ratio⌉, num_training_steps = max_steps, min_lr_rate = min_lr_ratio for cosine_with_min_lr)
//     (hf_schedule.ts). DeepSpeed steps it after every update and LambdaLR applies λ(0) when built, so the k-th
//     update (k = run.actor_optimizer_steps, 0-based) runs at lr · λ(k): with any warmup the run's FIRST update has
//     lr 0 (Adam's moments move, the weights do not);
//   - DeepSpeed gradient_clipping = actor.max_norm (deepspeed_utils.py get_train_ds_config): the global norm before
//     clipping, grads × 1 / max(1, (norm + 1e-6) / max_norm), none when max_norm ≤ 0 — the studio's
//     clip_grad_norm_ (the same factor).
import type { OptimizerConfig } from '../optimizer.ts';
import { parseSettings, rowsIn } from '../settings/table.ts';
import { SettingsError } from '../settings/types.ts';
import { OPENRLHF_RUN, OPENRLHF_SETTINGS, type OpenrlhfConfig, type OpenrlhfRun } from '../settings/openrlhf.ts';
import { hfLrLambda } from './hf_schedule.ts';

const ROWS = OPENRLHF_SETTINGS.filter((s) => s.scope === 'optimizer');
const RUN_ROWS = OPENRLHF_RUN.filter((s) => s.scope === 'optimizer');

/** λ of the update after `k` earlier ones, the schedule `T` steps long (null: not known). Throws SettingsError naming run.max_steps. */
export function openrlhfLrFactor(c: OpenrlhfConfig, k: number, T: number | null): number {
  const type = c['actor.lr_scheduler'];
  if (type === 'constant') return 1;
  const ratio = c['actor.lr_warmup_ratio'];
  if (T === null) {
    // A run has T ≥ 1 steps, so W = ⌈T · ratio⌉ is ≥ 1 whenever ratio > 0 and 0 otherwise: the first update is
    // λ(0) = 0 under any warmup, else 1 (every decay starts at 1), whatever T is. A later one needs T.
    if (k === 0) return ratio > 0 ? 0 : 1;
    throw new SettingsError(`run.max_steps: actor.lr_scheduler ${type} at run.actor_optimizer_steps ${k} needs the schedule's length (ppo_trainer.py max_steps: ⌊prompts · n_samples_per_prompt ÷ train.batch_size⌋ · num_episodes · max_epochs)`);
  }
  return hfLrLambda(type, k, Math.ceil(T * ratio), T, { num_cycles: 0.5, min_lr_rate: c['actor.min_lr_ratio'] });
}

/**
 * OpenRLHF's actor optimizer and clipping for a config and run in its names; `steps_done` updates after the run's
 * actor_optimizer_steps (the page's continued updates). Throws SettingsError naming the field.
 */
export function openrlhfOptimizer(config: Record<string, unknown>, run: Record<string, unknown>, steps_done = 0): { optimizer: OptimizerConfig; max_grad_norm: number } {
  const c = parseSettings<OpenrlhfConfig>(ROWS, rowsIn(ROWS, config), 'config').values;
  const r = parseSettings<OpenrlhfRun>(RUN_ROWS, rowsIn(RUN_ROWS, run), 'run').values;
  if (c['actor.optim'] !== 'adam') throw new SettingsError(`config.actor.optim: ${JSON.stringify(c['actor.optim'])} is not reproduced by the studio (DeepSpeed's AdamW only)`);
  const betas = c['actor.adam.betas'];
  if (betas.some((b) => !(b >= 0 && b < 1))) throw new SettingsError(`config.actor.adam.betas: expected two numbers in [0, 1), got ${JSON.stringify(betas)}`);
  const k = r.actor_optimizer_steps + steps_done;
  if (r.max_steps !== null && k >= r.max_steps) throw new SettingsError(`run.actor_optimizer_steps: update ${k} of a schedule of run.max_steps ${r.max_steps} (0 … ${r.max_steps - 1}): past the run's end`);
  return {
    optimizer: { name: 'adamw', lr: c['actor.adam.lr'] * openrlhfLrFactor(c, k, r.max_steps), betas: [betas[0], betas[1]], eps: c['actor.adam.eps'], weight_decay: c['actor.adam.weight_decay'], momentum: 0, no_decay: 'openrlhf' },
    max_grad_norm: Math.max(0, c['actor.max_norm']),
  };
}
