// The trainer preset's side of an update: the chosen trainer's objective (src/grpo/trainers/from_logps.ts) on
// the log-probs and entropies the step's policy forward scored, with the update's masks, advantages and
// old / reference / sampling log-probs; the effective loss mask with the factor that removed each token; the
// loss table (every loss type of the trainer on the same completions); the what-if's trainer side. The step
// itself forms its loss and gradient from the same objective (StepConfig.trainer, src/grpo/step_objective.ts).
import type { StepPipeline } from '../grpo/step.ts';
import { specOf } from '../grpo/settings/table.ts';
import { TRAINER_TABLES } from '../grpo/settings/trainers.ts';
import { maskFactors } from '../grpo/trainers/effective_mask.ts';
import { lossTable, trainerLossFromLogps } from '../grpo/trainers/from_logps.ts';
import { assertOneMicroBatch, trainerInputs, type PreparedObjective } from '../grpo/step_objective.ts';
import { trainerObjectiveOf } from '../grpo/step_config.ts';
import type { EffectiveSettings } from '../grpo/settings/effective.ts';
import { TrainerRefusal } from '../grpo/settings/trainer_rules.ts';
import type { Gpu } from '../gpu/context.ts';
import type { TrainerTerms, TrainerView, WhatIfResult } from '../bridge/protocol.ts';

const f32 = (a: ArrayLike<number> | null): Float32Array | null => (a ? Float32Array.from(a) : null);

/** The update's batch as the settings' trainer reads it (the step's own reading: src/grpo/step_objective.ts). */
function inputsOf(pipe: StepPipeline, settings: EffectiveSettings): PreparedObjective {
  const a = pipe.data('assemble');
  const pf = pipe.data('policy_forward');
  const adv = pipe.data('advantages');
  if (!a || !pf || !adv) throw new Error('the trainer view needs an update that has run its policy forward');
  const update = {
    padded: a.padded, per_token_logps: pf.per_token_logps, per_token_entropy: pf.per_token_entropy, advantages: adv.advantages,
    ref_per_token_logps: pipe.data('reference_forward')?.ref_per_token_logps ?? null, old_per_token_logps: pf.per_token_logps, temperature: pipe.config.loss.temperature,
  };
  return trainerInputs(update, trainerObjectiveOf(settings));
}

/** The objective on prepared inputs: terms, effective mask and the factor that removed each token. */
async function termsOf(gpu: Gpu, pipe: StepPipeline, { x, scored, truncated }: PreparedObjective): Promise<TrainerTerms> {
  assertOneMicroBatch(x); // as the step's objective: the same refusal on the page
  const o = await trainerLossFromLogps(gpu, x, scored);
  const p = pipe.data('assemble')!.padded;
  const vespo = x.trainer === 'trl' && (x.config.loss_type ?? specOf(TRAINER_TABLES.trl.config, 'loss_type').default) === 'vespo';
  const removed_by = maskFactors({ B: x.B, T: x.T, completion_mask: p.completion_mask, tool_mask: p.tool_mask ?? null, truncated }, o, !vespo);
  return {
    loss: o.loss,
    per_token_loss: f32(o.per_token_loss),
    per_token_kl: f32(o.per_token_kl),
    importance_sampling_ratio: f32(o.importance_sampling_ratio),
    effective_loss_mask: Float32Array.from(removed_by, (f) => (f === 0 ? 1 : 0)),
    removed_by,
    dlogp: f32(o.dlogp ?? null),
  };
}

/** The settings' trainer objective on the update's log-probs. Throws SettingsError naming a setting. */
function trainerTerms(gpu: Gpu, pipe: StepPipeline, settings: EffectiveSettings): Promise<TrainerTerms> {
  return termsOf(gpu, pipe, inputsOf(pipe, settings));
}

const settingsError = (e: unknown): string | null => (e instanceof Error && e.name === 'SettingsError' ? e.message : null);
/** The values a trainer's refusal offers (src/grpo/settings/trainer_rules.ts), for the page to propose. */
const offerOf = (e: unknown): Record<string, unknown> | null => (e instanceof TrainerRefusal ? e.offer : null);

/** The what-if's trainer side: the update's own trainer terms (`current`, null under another trainer) beside the what-if settings' objective. */
export async function trainerWhatIf(gpu: Gpu, pipe: StepPipeline, current: TrainerTerms | null, settings: EffectiveSettings): Promise<WhatIfResult['trainer']> {
  const { trainer } = settings;
  try {
    return { trainer, current, whatif: await trainerTerms(gpu, pipe, settings), error: null, offer: null };
  } catch (e) {
    const error = settingsError(e);
    if (error === null) throw e;
    return { trainer, current, whatif: null, error, offer: offerOf(e) };
  }
}

/** The loss stage's trainer view; a settings problem becomes its `error` (the step's backward refuses with the same one). */
export async function trainerView(gpu: Gpu, pipe: StepPipeline, settings: EffectiveSettings): Promise<TrainerView> {
  let prepared: PreparedObjective;
  try {
    prepared = inputsOf(pipe, settings);
  } catch (e) {
    // The batch as the trainer reads it is refused (TRL's truncation with an EOS it cannot tell): no column to show.
    const error = settingsError(e);
    if (error === null) throw e;
    const o = trainerObjectiveOf(settings);
    return { trainer: settings.trainer, config: o.config, run: o.run, terms: null, error, offer: null, table: [] };
  }
  const { x, scored } = prepared;
  const base = { trainer: settings.trainer, config: x.config, run: x.run };
  // The table is formed column by column (a column the trainer refuses shows why), also when the preset's own fails.
  const table = await lossTable(gpu, x, scored);
  try {
    return { ...base, terms: await termsOf(gpu, pipe, prepared), error: null, offer: null, table };
  } catch (e) {
    const error = settingsError(e);
    if (error === null) throw e;
    return { ...base, terms: null, error, offer: offerOf(e), table };
  }
}
