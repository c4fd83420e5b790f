// transformers' learning-rate schedules (huggingface/transformers src/transformers/optimization.py,
// _get_{linear,cosine,constant}_schedule_with_warmup_lr_lambda and the cosine one's min_lr_rate), one λ for the
// trainers that build them through get_scheduler: TRL's Trainer (trl_optimizer.ts) and OpenRLHF's DeepSpeed
// strategy (openrlhf_optimizer.ts). verl has its own lambdas (verl_optimizer.ts).
import type { OPENRLHF_LR_SCHEDULERS } from '../settings/openrlhf.ts';

/** The schedules computed here: OpenRLHF's row lists every one (TRL's a subset of them). */
export type HfSchedule = (typeof OPENRLHF_LR_SCHEDULERS)[number];

/**
 * λ after `s` scheduler steps, with W warmup steps of T in all (the optimizer step then runs at lr · λ).
 * min_lr_rate only for cosine_with_min_lr; num_cycles for the cosines (transformers' default 0.5).
 */
export function hfLrLambda(type: HfSchedule, s: number, W: number, T: number, o: { num_cycles: number; min_lr_rate: number }): number {
  if (type === 'constant') return 1; // get_constant_schedule: no warmup at all
  if (s < W) return s / Math.max(1, W);
  if (type === 'constant_with_warmup') return 1;
  if (type === 'linear') return Math.max(0, (T - s) / Math.max(1, T - W));
  const progress = (s - W) / Math.max(1, T - W);
  const f = 0.5 * (1 + Math.cos(Math.PI * o.num_cycles * 2 * progress));
  return Math.max(0, type === 'cosine_with_min_lr' ? f * (1 - o.min_lr_rate) + o.min_lr_rate : f);
}
