// The optimizer step of verl's actor (volcengine/verl b178a3c), from the rows of scope `optimizer` in
// src/grpo/settings/verl.ts and the run's global_steps:
//   - verl/workers/fsdp_workers.py ActorRolloutRefWorker._build_model_optimizer: torch.optim.AdamW
//     (build_optimizer, verl/workers/config/optimizer.py) over all actor parameters — one group, no bias / norm
//     exemption — with lr, betas, weight_decay and torch's eps 1e-8; the warmup is lr_warmup_steps, or when that
//     is < 0 int(lr_warmup_steps_ratio · total_training_steps); lr_scheduler_type constant | cosine;
//     optimizer / optimizer_impl other than AdamW / torch.optim is refused here, a non-empty override_optimizer_config
//     by the reader (src/io/formats/verl.ts);
//   - verl/utils/torch_functional.py get_constant_schedule_with_warmup / get_cosine_schedule_with_warmup: verl's
//     own lambdas (the cosine one has a floor min_lr_ratio, and the warmup is truncated, not transformers'
//     ⌈T · ratio⌉), so transformers' math in trl_optimizer.ts is not reused;
//   - verl/workers/actor/dp_actor.py _optimizer_step: clip_grad_norm_(max_norm = grad_clip), the step skipped
//     when the norm is not finite (the studio's optimizer step does the same for max_grad_norm); the engine worker
//     (use_legacy_worker_impl disable, verl/workers/engine/fsdp/transformer_impl.py optimizer_step) clips at
//     optim.clip_grad instead.
// update_actor steps the scheduler once per training step, after the update, and the driver's global_steps
// is 1 on the first: the update of global_steps g runs at lr · λ(g − 1); without it, the run's first step (λ(0)).
import type { OptimizerConfig } from '../optimizer.ts';
import { parseSettings, rowsIn } from '../settings/table.ts';
import { SettingsError } from '../settings/types.ts';
import { VERL_RUN, VERL_SETTINGS, type VerlConfig, type VerlRun } from '../settings/verl.ts';

const ROWS = VERL_SETTINGS.filter((s) => s.scope === 'optimizer' || s.name === 'use_legacy_worker_impl');
const RUN_ROWS = VERL_RUN.filter((s) => s.scope === 'optimizer');

/** λ at the update after `s` scheduler steps. Throws SettingsError naming the field verl's value depends on. */
export function verlLrFactor(c: VerlConfig, s: number): number {
  const type = c['optim.lr_scheduler_type'];
  if (c.warmup_style !== null && c.warmup_style !== type) {
    throw new SettingsError(`config.warmup_style: ${c.warmup_style} differs from optim.lr_scheduler_type ${type}; FSDPOptimizerConfig lets warmup_style win, fsdp_workers.py reads lr_scheduler_type: set one value`);
  }
  const T = c.total_training_steps;
  let W = c.lr_warmup_steps;
  if (W < 0) {
    if (c.lr_warmup_steps_ratio > 0 && T < 1) throw new SettingsError(`config.total_training_steps: needed for lr_warmup_steps_ratio ${c.lr_warmup_steps_ratio} (the driver injects it into actor.optim)`);
    W = Math.trunc(c.lr_warmup_steps_ratio * Math.max(T, 0));
  }
  if (s < W) return s / Math.max(1, W);
  if (type === 'constant') return 1;
  const m = c.min_lr_ratio ?? 0;
  if (T < 1 && s > W) throw new SettingsError(`config.total_training_steps: optim.lr_scheduler_type cosine past the warmup (step ${s}) needs the run's length`);
  const progress = (s - W) / Math.max(1, T - W);
  return Math.max(m, Math.cos(Math.PI * c.num_cycles * 2 * progress) * ((1 - m) * 0.5) + (1 + m) * 0.5);
}

/** verl's actor optimizer and grad_clip for a config and run in verl's names. Throws SettingsError naming the field. */
export function verlOptimizer(config: Record<string, unknown>, run: Record<string, unknown>, steps_done = 0): { optimizer: OptimizerConfig; max_grad_norm: number } {
  const c = parseSettings<VerlConfig>(ROWS, rowsIn(ROWS, config), 'config').values;
  const r = parseSettings<VerlRun>(RUN_ROWS, rowsIn(RUN_ROWS, run), 'run').values;
  if (c['optim.optimizer'] !== 'AdamW') throw new SettingsError(`config.optim.optimizer: ${JSON.stringify(c['optim.optimizer'])} is not reproduced by the studio (AdamW of torch.optim only)`);
  if (c.optimizer_impl !== 'torch.optim') throw new SettingsError(`config.optimizer_impl: ${JSON.stringify(c.optimizer_impl)} is not reproduced by the studio (torch.optim only)`);
  if (c.betas.some((b) => !(b >= 0 && b < 1))) throw new SettingsError(`config.betas: expected two numbers in [0, 1), got ${JSON.stringify(c.betas)}`);
  const s = (r.global_steps ?? 1) - 1 + steps_done;
  return {
    optimizer: { name: 'adamw', lr: c.lr * verlLrFactor(c, s), betas: [c.betas[0], c.betas[1]], eps: 1e-8, weight_decay: c['optim.weight_decay'], momentum: 0, no_decay: 'none' },
    max_grad_norm: c.use_legacy_worker_impl === 'disable' ? c['optim.clip_grad'] : c.grad_clip,
  };
}
