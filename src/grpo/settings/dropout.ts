// Whether a trainer's training forward runs with the model's dropout on, and how a run turns it off. The studio's
// forward has no dropout (eval mode), so a step whose trainer would drop activations at random in its loss and
// gradient is refused (src/grpo/step_train.ts, given config.json's non-zero dropout: ModelConfig.dropout, or the
// trainer's override of it) rather than shown as the trainer's number. Modern checkpoints (Llama, Qwen:
// attention_dropout 0) never meet it; GPT-2's do (0.1 each).
import { ALL_DROPOUT_KEYS } from '../../model/config.ts';
import { SettingsError, type TrainerId } from './types.ts';

/** Why the trainer's training forward applies the model's dropout, and what makes the step dropout-free. */
export interface TrainingDropout {
  why: string;
  fix: string;
  /** Keys the trainer sets over config.json before building the model (verl's model.override_config); absent: none. */
  override?: { field: string; values: Record<string, unknown> };
}

const NO_SETTING = 'the trainer has no setting that turns it off: set them to 0 in config.json to step the dropout-free model';

/**
 * Keys of verl's override_config that leave the forward's numbers alone besides the dropout keys: the attention
 * kernel's name, the KV cache, the token ids verl itself sets there (fsdp_workers.py). Any other key would change
 * the model the studio loads from config.json as saved: refused, naming it.
 */
const NUMBERS_UNCHANGED = new Set(['attn_implementation', 'use_cache', 'bos_token_id', 'eos_token_id', 'pad_token_id']);

function verlOverride(c: Record<string, unknown>): TrainingDropout['override'] {
  const field = 'config.model.override_config';
  const o = c['model.override_config'];
  if (o === undefined || o === null) return undefined;
  const values = o as Record<string, unknown>;
  const other = Object.keys(values).filter((k) => !NUMBERS_UNCHANGED.has(k) && !ALL_DROPOUT_KEYS.has(k));
  for (const k of Object.keys(values).filter((k) => ALL_DROPOUT_KEYS.has(k))) {
    const p = values[k];
    if (typeof p !== 'number' || !(p >= 0 && p <= 1)) throw new SettingsError(`${field}.${k}: expected a probability in [0, 1], got ${JSON.stringify(p)}`);
  }
  if (other.length) throw new SettingsError(`${field}: verl sets ${other.join(', ')} over the model's config.json (fsdp_workers.py update_model_config); the studio builds the model from config.json as saved: write the overridden values into config.json, then leave them out here`);
  return Object.keys(values).some((k) => ALL_DROPOUT_KEYS.has(k)) ? { field, values } : undefined;
}

/** Each trainer's train-mode forward, from its resolved config (a field left out is its table default). */
const TRAINING_DROPOUT: Record<TrainerId, (config: Record<string, unknown>) => TrainingDropout | null> = {
  // huggingface/trl trl/trainer/grpo_trainer.py __init__: disable_dropout_in_model only when args.disable_dropout.
  trl: (c) => (c.disable_dropout === true ? null : { why: 'TRL trains with the model\'s dropout on (disable_dropout false, GRPOConfig\'s default)', fix: 'set disable_dropout true to take the step a dropout-free run takes' }),
  // volcengine/verl verl/workers/actor/dp_actor.py update_policy: self.actor_module.train() before the loss; the
  // model's config is config.json updated with actor_rollout_ref.model.override_config (fsdp_workers.py).
  verl: (c) => ({ why: "verl's actor computes its loss in train mode (dp_actor.py update_policy: actor_module.train())", fix: `${NO_SETTING}, or to 0 in model.override_config`, override: verlOverride(c) }),
  // OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py: self.actor.train() before the training steps.
  openrlhf: () => ({ why: "OpenRLHF's actor computes its loss in train mode (ppo_actor.py: actor.train())", fix: NO_SETTING }),
};

export const trainingDropout = (trainer: TrainerId, config: Record<string, unknown>): TrainingDropout | null => TRAINING_DROPOUT[trainer](config);
