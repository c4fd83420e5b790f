// OpenRLHF's cross-field rules on the fields of the OpenRLHF table (openrlhf.ts), at OpenRLHF/OpenRLHF
// 3c3be62. train_ppo_ray.py's argument checks and PolicyLoss.__init__'s assertions concern single fields
// (the table's rows: dual_clip > 1, the correction type); the one combination OpenRLHF cannot run is a
// failure of its own code rather than a check, listed here so it is refused with its reason; and those the studio
// cannot reproduce from a batch alone (the adaptive KL controller, dynamic batching's normalisers, and what
// OpenRLHF before ed62d0e2 computed otherwise: openrlhf_code; its data-dependent differences are the objective's,
// src/grpo/trainers/openrlhf.ts).
import { BEFORE_ED62D0E2, type OpenrlhfConfig, type OpenrlhfRun } from './openrlhf.ts';
import type { TrainerRule } from './trainer_rules.ts';

export const OPENRLHF_RULES: readonly TrainerRule<OpenrlhfConfig, OpenrlhfRun>[] = [
  {
    fields: ['config.actor.entropy_coef', 'config.rollout.temperature'],
    by: 'trainer',
    source: 'OpenRLHF/OpenRLHF openrlhf/models/actor.py Actor.forward, openrlhf/models/utils.py log_probs_from_logits',
    // Actor.forward takes the entropy of output["logits"], then log_probs_from_logits divides that same tensor
    // by the temperature in place: autograd's in-place check fails in loss.backward().
    check: (c) => {
      const coef = c['actor.entropy_coef'];
      const t = c['rollout.temperature'];
      return coef !== null && coef !== 0 && t !== 1 ? `${coef} with rollout.temperature = ${t}: OpenRLHF fails in backward when rollout.temperature ≠ 1 and entropy_coef ≠ 0 (the entropy's logits are divided by the temperature in place)` : null;
    },
  },
  {
    fields: ['config.algo.kl.target', 'config.algo.kl.use_loss'],
    by: 'studio',
    source: 'OpenRLHF/OpenRLHF openrlhf/trainer/ppo_trainer.py (AdaptiveKLController, kl_ctl.update after every step)',
    // The adaptive controller starts at init_coef and moves after every step by the run's measured KL: the
    // coefficient of the KL loss at this step is not in the batch.
    check: (c) =>
      c['algo.kl.target'] !== null && c['algo.kl.target'] !== 0 && c['algo.kl.use_loss'] && c['algo.kl.init_coef'] > 0 // `if args.algo.kl.target:`
        ? `${c['algo.kl.target']} with algo.kl.use_loss: the adaptive KL controller's coefficient at this step depends on the steps before it (it starts at init_coef and moves by the measured KL); set algo.kl.target to null with algo.kl.init_coef = the coefficient the run logged for this step`
        : null,
  },
  {
    fields: ['config.train.dynamic_batch_enable', 'config.openrlhf_code'],
    by: 'studio',
    source: 'OpenRLHF/OpenRLHF ed62d0e2~1 openrlhf/trainer/ray/ppo_actor.py training_step (loss * replay_buffer.dynamic_loss_scale[step])',
    // Before ed62d0e2 (use_dynamic_batch) the packing scaled each micro-batch's loss by its own factor; no
    // loss_batch_info existed, so the rule below cannot be satisfied for such a batch.
    check: (c) =>
      c['train.dynamic_batch_enable'] && c.openrlhf_code === BEFORE_ED62D0E2
        ? "true (use_dynamic_batch) in a batch OpenRLHF before ed62d0e2 wrote (openrlhf_code before-ed62d0e2): that code multiplies each micro-batch's loss by the replay buffer's dynamic_loss_scale[step], which one batch does not hold"
        : null,
  },
  {
    fields: ['run.loss_batch_info', 'config.openrlhf_code'],
    by: 'studio',
    source: 'OpenRLHF/OpenRLHF ed62d0e2~1 openrlhf/models/loss.py PolicyLoss.forward, openrlhf/trainer/ray/ppo_actor.py training_step',
    // That code's terms are each the micro-batch's masked_mean (src/grpo/trainers/openrlhf.ts lossBatchInfo): a
    // window normaliser given for it is 3c3be62's, which it never read.
    check: (c, r) =>
      r.loss_batch_info !== null && c.openrlhf_code === BEFORE_ED62D0E2
        ? "given for a batch OpenRLHF before ed62d0e2 wrote (openrlhf_code before-ed62d0e2): that code has no loss_batch_info (PolicyLoss, the KL and the entropy term are each the micro-batch's masked_mean); leave it out"
        : null,
  },
  {
    fields: ['config.train.dynamic_batch_enable', 'run.loss_batch_info'],
    by: 'studio',
    source: 'OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py ppo_train, training_step (get_loss_batch_info with dynamic_batch)',
    // The packing is of the whole replay buffer (every rank's experiences, by tokens): its token count for this
    // micro-batch is not in the batch, and the window the studio derives (other_tokens, gas) is not that packing's.
    check: (c, r) =>
      c['train.dynamic_batch_enable'] && r.loss_batch_info === null
        ? "true without run.loss_batch_info: dynamic batching normalises each micro-batch by its packing's token counts (the replay buffer's dynamic_batch_num_tokens), which one batch does not hold; give run.loss_batch_info ({dp_size, batch_num_tokens, global_batch_size}) as get_loss_batch_info computed it for this micro-batch"
        : null,
  },
];
