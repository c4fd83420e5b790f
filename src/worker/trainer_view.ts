// The trainer preset's side of an update: the chosen trainer's objective (src/grpo/trainers/from_logps.ts) on
// the log-probs and entropies the step's policy forward scored, with the update's masks, advantages and
// old / reference / sampling log-probs; the effective loss mask with the factor that removed each token; the
// loss table (every loss type of the trainer on the same completions); the what-if's trainer side. And the
// step's guard: the gradient is the studio loss's (src/grpo/loss.ts), so the backward refuses when the preset
// asks for another objective.
import { firstEos } from '../grpo/batch.ts';
import type { StepPipeline } from '../grpo/step.ts';
import { specOf } from '../grpo/settings/table.ts';
import { TRAINER_TABLES } from '../grpo/settings/trainers.ts';
import { maskFactors } from '../grpo/trainers/effective_mask.ts';
import { lossTable, trainerLossFromLogps } from '../grpo/trainers/from_logps.ts';
import type { ScoredLogps, TrainerInputs } from '../grpo/trainers/types.ts';
import type { Gpu } from '../gpu/context.ts';
import { trainerConfigOf } from './settings.ts';
import type { LossSettings, TrainerPreset, TrainerTerms, TrainerView, WhatIfResult } from './protocol.ts';

const f32 = (a: ArrayLike<number> | null): Float32Array | null => (a ? Float32Array.from(a) : null);

/** The update's batch as the preset's trainer reads it, and the forward's scored log-probs. */
function inputsOf(pipe: StepPipeline, preset: TrainerPreset, loss: LossSettings): { x: TrainerInputs; scored: ScoredLogps; truncated: Float32Array | null } {
  const a = pipe.data('assemble');
  const pf = pipe.data('policy_forward');
  const adv = pipe.data('advantages');
  if (!a || !pf || !adv) throw new Error('the trainer view needs an update that has run its policy forward');
  const p = a.padded;
  const { B, C: T } = p;
  const config = trainerConfigOf(preset, loss);
  // TRL's mask_truncated_completions: rows without EOS leave completion_mask (and so the loss) before it is counted.
  const truncated = preset.trainer === 'trl' && config.mask_truncated_completions === true
    ? Float32Array.from({ length: B }, (_, b) => (firstEos(p.completion_ids.subarray(b * T, b * T + p.completion_lengths[b]), p.eos_token_ids) < 0 ? 1 : 0))
    : null;
  const tool = p.tool_mask ?? null;
  // TRL reads tool_mask itself; verl's and OpenRLHF's response mask already excludes tool output.
  const completion_mask = Int32Array.from(p.completion_mask, (m, i) => m * (truncated?.[Math.floor(i / T)] ? 0 : 1) * (tool && preset.trainer !== 'trl' ? tool[i] : 1));
  const rowAdv = Float32Array.from(adv.advantages);
  const ref = pipe.data('reference_forward')?.ref_per_token_logps ?? null;
  const x: TrainerInputs = {
    trainer: preset.trainer,
    config,
    run: preset.run,
    B,
    T,
    completion_ids: p.completion_ids,
    completion_mask,
    tool_mask: preset.trainer === 'trl' && tool ? tool : null,
    advantages: preset.trainer === 'trl' ? rowAdv : Float32Array.from({ length: B * T }, (_, i) => rowAdv[Math.floor(i / T)]),
    // No stored old log-probs: the policy's own before the step (TRL's detach; verl's and OpenRLHF's actors
    // compute old_log_probs with the same weights before the update).
    old_per_token_logps: f32(p.old_per_token_logps ?? (preset.trainer === 'trl' ? null : pf.per_token_logps)),
    ref_per_token_logps: f32(ref),
    sampling_per_token_logps: f32(p.sampling_per_token_logps ?? null),
  };
  return { x, scored: { per_token_logps: pf.per_token_logps, per_token_entropy: pf.per_token_entropy, temperature: pipe.config.loss.temperature }, truncated };
}

type Prepared = ReturnType<typeof inputsOf>;

/** The objective on prepared inputs: terms, effective mask and the factor that removed each token. */
async function termsOf(gpu: Gpu, pipe: StepPipeline, { x, scored, truncated }: Prepared): Promise<TrainerTerms> {
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

/** The preset's objective on the update's log-probs. Throws SettingsError naming a setting. */
function trainerTerms(gpu: Gpu, pipe: StepPipeline, preset: TrainerPreset, loss: LossSettings): Promise<TrainerTerms> {
  return termsOf(gpu, pipe, inputsOf(pipe, preset, loss));
}

const settingsError = (e: unknown): string | null => (e instanceof Error && e.name === 'SettingsError' ? e.message : null);

/** The what-if's trainer side: the update's own trainer terms (`current`) beside `preset`'s under the what-if's loss settings. */
export async function trainerWhatIf(gpu: Gpu, pipe: StepPipeline, current: TrainerTerms | null, preset: TrainerPreset, loss: LossSettings): Promise<WhatIfResult['trainer']> {
  try {
    return { preset, current, whatif: await trainerTerms(gpu, pipe, preset, loss), error: null };
  } catch (e) {
    const error = settingsError(e);
    if (error === null) throw e;
    return { preset, current, whatif: null, error };
  }
}

/** The loss stage's trainer view; a settings problem becomes its `error` (the backward then refuses with it). */
export async function trainerView(gpu: Gpu, pipe: StepPipeline, preset: TrainerPreset, loss: LossSettings): Promise<TrainerView> {
  const prepared = inputsOf(pipe, preset, loss);
  const { x, scored } = prepared;
  const base = { trainer: preset.trainer, config: x.config, run: x.run };
  // The table is formed column by column (a column the trainer refuses shows why), also when the preset's own fails.
  const table = await lossTable(gpu, x, scored);
  try {
    return { ...base, terms: await termsOf(gpu, pipe, prepared), error: null, table };
  } catch (e) {
    const error = settingsError(e);
    if (error === null) throw e;
    return { ...base, terms: null, error, table };
  }
}

/**
 * Why the step cannot take the gradient for this preset, or null. The step's gradient is the studio loss's
 * (TRL's clipped objective with LossSettings); another trainer, a TRL setting LossSettings does not carry, or
 * a run context that changes the value (the trainer's loss ≠ the studio's) would make it another gradient.
 */
export function gradientProblem(view: TrainerView, studioLoss: number, preset: TrainerPreset, loss: LossSettings): string | null {
  if (view.error) return view.error;
  if (preset.trainer !== 'trl') {
    return `trainer: ${preset.trainer} — the step's gradient runs TRL's objective only; ${preset.trainer}'s loss, loss table and what-if are shown, its gradient is not computed (choose trl to take the step)`;
  }
  const table = TRAINER_TABLES.trl.config;
  for (const [k, v] of Object.entries(preset.config)) {
    const spec = table.find((s) => s.name === k);
    if (spec && (spec.scope === 'loss' || spec.scope === 'batch') && JSON.stringify(v) !== JSON.stringify(spec.default)) {
      return `config.${k} = ${JSON.stringify(v)}: the step's gradient runs the studio loss, which does not apply it (its loss, loss table and what-if are shown; set it back to ${JSON.stringify(spec.default)} to take the step)`;
    }
  }
  // The studio's own aggregations (verl names) and KL estimators other than TRL's k3 are studio settings, not TRL's.
  const studioOnly = !view.config.loss_type || (loss.beta !== 0 && loss.kl_estimator !== 'k3');
  const t = view.terms!;
  if (!studioOnly && Math.abs(t.loss - studioLoss) > 1e-4 * Math.abs(studioLoss) + 1e-6) {
    const set = Object.keys(preset.run).map((k) => `run.${k}`);
    return `the TRL loss ${t.loss} differs from the studio loss ${studioLoss} that the step would differentiate${set.length ? ` (${set.join(', ')})` : ''}: the step refuses rather than take another gradient`;
  }
  return null;
}
