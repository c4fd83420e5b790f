// Whether a trainer's training forward runs with the model's dropout on, and how a run turns it off. The studio's
// forward has no dropout (eval mode), so a step whose trainer would drop activations at random in its loss and
// gradient is refused (src/grpo/step_train.ts, given config.json's non-zero dropout: ModelConfig.dropout) rather
// than shown as the trainer's number. Modern checkpoints (Llama, Qwen: attention_dropout 0) never meet it; GPT-2's
// do (0.1 each).
import type { TrainerId } from './types.ts';

/** Why the trainer's training forward applies the model's dropout, and what makes the step dropout-free. */
export interface TrainingDropout {
  why: string;
  fix: string;
}

const NO_SETTING = 'the trainer has no setting that turns it off: set them to 0 in config.json to step the dropout-free model';

/** Each trainer's train-mode forward, from its resolved config (a field left out is its table default). */
const TRAINING_DROPOUT: Record<TrainerId, (config: Record<string, unknown>) => TrainingDropout | null> = {
  // huggingface/trl trl/trainer/grpo_trainer.py __init__: disable_dropout_in_model only when args.disable_dropout.
  trl: (c) => (c.disable_dropout === true ? null : { why: 'TRL trains with the model\'s dropout on (disable_dropout false, GRPOConfig\'s default)', fix: 'set disable_dropout true to take the step a dropout-free run takes' }),
  // volcengine/verl verl/workers/actor/dp_actor.py update_policy: self.actor_module.train() before the loss.
  verl: () => ({ why: "verl's actor computes its loss in train mode (dp_actor.py update_policy: actor_module.train())", fix: NO_SETTING }),
  // OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py: self.actor.train() before the training steps.
  openrlhf: () => ({ why: "OpenRLHF's actor computes its loss in train mode (ppo_actor.py: actor.train())", fix: NO_SETTING }),
};

export const trainingDropout = (trainer: TrainerId, config: Record<string, unknown>): TrainingDropout | null => TRAINING_DROPOUT[trainer](config);
