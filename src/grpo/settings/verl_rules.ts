// verl's cross-field rules on the fields of the verl table (verl.ts), at volcengine/verl b178a3c: the checks
// its actor config and worker make on these fields when the actor is built. Single-field checks are the
// table's; rollout_rs / rollout_rs_threshold are parsed (and refused as verl's _parse_rollout_rs_thresholds
// does) in src/grpo/settings/verl_rollout.ts. ppo_mini_batch_size is the actor's own value, as dp_actor.py
// reads it: after fsdp_workers.py has scaled it by rollout.n and divided it by the data-parallel size.
import type { VerlConfig, VerlRun } from './verl.ts';
import type { TrainerRule } from './trainer_rules.ts';

export const VERL_RULES: readonly TrainerRule<VerlConfig, VerlRun>[] = [
  {
    fields: ['config.ppo_micro_batch_size_per_gpu', 'config.use_dynamic_bsz'],
    by: 'trainer',
    source: 'volcengine/verl verl/workers/config/actor.py ActorConfig.__post_init__',
    check: (c) =>
      !c.use_dynamic_bsz && c.ppo_micro_batch_size_per_gpu === null
        ? `null with use_dynamic_bsz false: verl refuses (assert): "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or 'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled."`
        : null,
    // One micro-batch per mini-batch (loss scale 1): what a single-GPU update of the whole mini-batch does.
    offer: (c) => ({ ppo_micro_batch_size_per_gpu: c.ppo_mini_batch_size }),
  },
  {
    fields: ['config.ppo_micro_batch_size_per_gpu', 'config.ppo_mini_batch_size'],
    by: 'trainer',
    source: 'volcengine/verl verl/workers/fsdp_workers.py ActorRolloutRefWorker.__init__',
    // (Its second assert, mini // micro > 0, follows: the table keeps ppo_mini_batch_size ≥ 1.)
    check: (c) => {
      const [mini, micro] = [c.ppo_mini_batch_size, c.ppo_micro_batch_size_per_gpu];
      return micro !== null && mini % micro !== 0 ? `${micro}: verl refuses (assert): "normalized ppo_mini_batch_size ${mini} should be divisible by ppo_micro_batch_size_per_gpu ${micro}"` : null;
    },
  },
];
