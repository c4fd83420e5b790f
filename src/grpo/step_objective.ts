// Which objective forms the step's loss and gradient. StepConfig.trainer names a trainer preset (trl | verl |
// openrlhf with its config and run context, in the trainer's own field names); when it is set, the loss
// stage runs that trainer's objective (src/grpo/trainers/from_logps.ts) on the policy forward's per-token
// log-probs and entropies, and the backward takes its ∂loss/∂logp and ∂loss/∂entropy to the logits chunk by
// chunk, so the update is the trainer's gradient. Unset: the studio loss (src/grpo/loss.ts, TRL's clipped
// objective with GrpoLossConfig). The page's trainer view and the CLI's `grpo-studio step` read the batch
// the same way through trainerInputs, so what the page shows and what the step differentiates agree.
import type { Gpu } from '../gpu/context.ts';
import type { PaddedBatch } from './batch.ts';
import { TRAINER_TABLES } from './settings/trainers.ts';
import { resolveSettings } from './settings/resolve.ts';
import { generationSplit, heldRanks, type GenerationSplit, type TrlRun } from './settings/trl.ts';
import type { OpenrlhfRun } from './settings/openrlhf.ts';
import type { VerlConfig } from './settings/verl.ts';
import { specOf } from './settings/table.ts';
import { SCOPES, SettingsError, type TrainerId } from './settings/types.ts';
import { lossTable, trainerLossFromLogps } from './trainers/from_logps.ts';
import { openrlhfAggregation, openrlhfKl, openrlhfKlInLoss } from './trainers/openrlhf.ts';
import { verlKl, verlStepRun } from './trainers/verl.ts';
import type { PpoKl, PpoLossParams } from '../kernels/types.ts';
import { AGGREGATIONS, type LossType } from '../kernels/types.ts';
import type { ScoredLogps, TrainerInputs, TrainerLossOutputs } from './trainers/types.ts';

/** A trainer and its settings: the objective a step's loss and gradient follow. */
export interface TrainerObjective {
  trainer: TrainerId;
  config: Record<string, unknown>;
  run: Record<string, unknown>;
}

/**
 * Each trainer's KL term on a reference in its loss, from its resolved config: TRL's β (grpo_trainer.py _compute_loss),
 * verl's use_kl_loss (verl/workers/actor/dp_actor.py update_policy), OpenRLHF's algo.kl.use_loss with a coefficient
 * above 0 (openrlhf/trainer/ray/ppo_actor.py training_step). A KL in the reward is the rewards' (already in the batch).
 */
const KL_IN_LOSS: Record<TrainerId, (v: (name: string) => unknown) => boolean> = {
  trl: (v) => v('beta') !== 0,
  verl: (v) => v('use_kl_loss') === true,
  openrlhf: (v) => openrlhfKlInLoss(v('algo.kl.use_loss'), v('algo.kl.init_coef')),
};

/**
 * Whether an update's loss reads reference log-probs: the studio loss's β, or the trainer objective's own KL term.
 * The reference stage runs for either (a verl / OpenRLHF dump's KL is its trainer's setting, not TRL's β).
 */
export function readsReference(beta: number, o: TrainerObjective | null | undefined): boolean {
  if (beta !== 0) return true;
  if (!o) return false;
  const table = TRAINER_TABLES[o.trainer].config;
  return KL_IN_LOSS[o.trainer]((name) => (name in o.config ? o.config[name] : specOf(table, name).default));
}

/** A batch format's trainer: verl and OpenRLHF dumps read as theirs, everything else as TRL. */
export function trainerOfFormat(format: string): TrainerId {
  return format === 'verl' || format === 'openrlhf' ? format : 'trl';
}

/**
 * The objective a step with this trainer, config and run follows, or null where the studio loss is that
 * objective: TRL with every loss / batch setting either one StepConfig.loss carries (`studio(name)`) or at
 * TRL's default, and every run-context value at its default. Anything else (another trainer, a TRL loss type
 * or setting the studio loss does not apply, processes / accumulation steps / num_items_in_batch) runs the
 * trainer's own objective, which names a setting it cannot take.
 */
export function objectiveFor(trainer: TrainerId, config: Record<string, unknown>, run: Record<string, unknown>, studio: (name: string) => boolean): TrainerObjective | null {
  const t = TRAINER_TABLES.trl;
  const offDefault = (table: typeof t.config, values: Record<string, unknown>, held: (name: string) => boolean) =>
    Object.entries(values).some(([k, v]) => {
      const spec = table.find((s) => s.name === k);
      return !spec || (SCOPES[spec.scope].objective && !held(k) && JSON.stringify(v) !== JSON.stringify(spec.default));
    });
  const isStudio = trainer === 'trl' && !offDefault(t.config, config, studio) && !offDefault(t.run, run, () => false) && microBatches({ config, run }) === null;
  return isStudio ? null : { trainer, config, run };
}

/**
 * TRL's split of the generation batch past one micro-batch (generationSplit: steps_per_generation > 1, as given or
 * as GRPOConfig derives it), or null. TRL then shuffles the generation batch with its own RNG and splits it into
 * micro-batches whose gradients accumulate (src/grpo/trainers/micro_batches.ts); the step takes the batch as one
 * micro-batch, so it refuses rather than differentiate another split (bnpo and other per-micro-batch normalisers
 * depend on it). Throws SettingsError for a split GRPOConfig itself refuses.
 */
function microBatches(o: { config: Record<string, unknown>; run: Record<string, unknown> }): GenerationSplit | null {
  const split = generationSplit(o.config, o.run);
  return split.steps > 1 ? split : null;
}

/** Throws the step's refusal of a TRL generation batch it would have to split (microBatches); the page's trainer view calls it too. */
export function assertOneMicroBatch(x: Pick<TrainerInputs, 'trainer' | 'config' | 'run'>): void {
  const micro = x.trainer === 'trl' ? microBatches(x) : null;
  if (micro) throw new SettingsError(`${micro.why}: the step takes the generation batch as one micro-batch (TRL's shuffled split and accumulation are not reproduced); ${micro.fix} to take the step`);
}

/**
 * What the trainer's optimizer step sums besides the batch, in words, or null where the batch is the whole step.
 * The step differentiates the loss the trainer hands to backward on the rows the batch holds (that loss, its
 * per-token terms and gradient are the trainer's); DDP / DeepSpeed then average the gradients of num_processes
 * ranks and accumulate gradient_accumulation_steps micro-batches before the optimizer steps, so the grad norm, clip
 * coefficient and update the studio shows are those of the batch's own gradient. TRL's merged rank files (run.rank
 * a list) are averaged as DDP does (src/kernels/trl_loss.ts); verl's dumps hold every rank's rows and every
 * micro-batch of the mini-batch (src/grpo/trainers/verl.ts chunks them), so theirs is whole. OpenRLHF's window is
 * train.batch_size samples: where the batch and the run's other_samples hold fewer (and no loss_batch_info gives the
 * window's counts), its loss normalises over those alone, which is said too. B: the batch's rows.
 */
export function updateScope(o: TrainerObjective | null, B: number): string | null {
  if (!o || o.trainer === 'verl') return null;
  const { ranks, held, gas, short } = o.trainer === 'trl' ? trlWindow(o.run) : openrlhfWindow(o.config, o.run, B);
  const parts = [
    ...(held.n < ranks ? [`averages the gradients of ${ranks} processes (the batch holds ${held.words})`] : []),
    ...(gas > 1 ? [`accumulates ${gas} micro-batches per process (gradient_accumulation_steps; the batch is one)`] : []),
    ...(short ? [short] : []),
  ];
  return parts.length ? `the trainer's optimizer step ${parts.join(' and ')}: the grad norm, clip coefficient and update here are those of the batch's own gradient, not the trainer's step` : null;
}

/** One optimizer step's processes and micro-batches, the processes whose rows the batch holds, and a window the run context leaves short. */
interface StepWindow {
  ranks: number;
  held: { n: number; words: string };
  gas: number;
  short?: string;
}

function trlWindow(given: Record<string, unknown>): StepWindow {
  const run = resolveSettings<TrlRun>(TRAINER_TABLES.trl.run, given, 'run');
  const n = heldRanks(run);
  return { ranks: run.num_processes, held: { n, words: n === 1 ? `rank ${String(run.rank)}'s rows` : `ranks ${String(run.rank)}` }, gas: run.gradient_accumulation_steps };
}

function openrlhfWindow(config: Record<string, unknown>, runGiven: Record<string, unknown>, B: number): StepWindow {
  const run = resolveSettings<OpenrlhfRun>(TRAINER_TABLES.openrlhf.run, runGiven, 'run');
  // The one row it reads (the objective has checked the config).
  const given = config['train.batch_size'];
  const window = typeof given === 'number' ? given : (specOf(TRAINER_TABLES.openrlhf.config, 'train.batch_size').default as number);
  const dp = (run.loss_batch_info as { dp_size?: unknown } | null)?.dp_size;
  const counted = B + run.other_samples;
  const short = run.loss_batch_info === null && counted < window ? `spans train.batch_size ${window} samples, of which the batch and run.other_samples hold ${counted} (its loss normalises over those: give run.other_tokens / other_samples for the rest)` : undefined;
  return { ranks: typeof dp === 'number' ? dp : run.num_processes, held: { n: 1, words: "one rank's micro-batch" }, gas: run.gradient_accumulation_steps, short };
}

/** What the update has scored: the batch, the forward's per-token log-probs / entropies, advantages, reference. */
export interface ScoredUpdate {
  padded: PaddedBatch;
  per_token_logps: Float32Array; // (B, C)
  per_token_entropy: Float32Array; // (B, C)
  advantages: ArrayLike<number>; // (B)
  ref_per_token_logps: ArrayLike<number> | null; // (B, C)
  /** old_per_token_logps when the batch has none: the policy's own before the step. */
  old_per_token_logps: ArrayLike<number>; // (B, C)
  temperature: number;
}

/** The objective's inputs, and the rows TRL's mask_truncated_completions removes (1 = removed), (B). */
export interface PreparedObjective {
  x: TrainerInputs;
  scored: ScoredLogps;
  truncated: Float32Array | null;
}

const f32 = (a: ArrayLike<number> | null | undefined): Float32Array | null => (a ? Float32Array.from(a) : null);

/**
 * TRL's mask_truncated_completions: a row whose LAST token is neither the tokenizer's EOS nor pad (`ids[-1] not in
 * eos_and_pad`, eos_and_pad = [self._tokenizer.eos_token_id, self._tokenizer.pad_token_id], grpo_trainer.py
 * _generate_and_score_completions) leaves completion_mask (and so the loss) before it is counted, (B), 1 = removed.
 * The last token, not any EOS: a tool-calling row holds its earlier turns' EOS, and a last turn cut at
 * max_completion_length still makes it truncated. An empty row (TRL would fail on ids[-1]) counts as truncated.
 * One EOS, the tokenizer's (run.eos_token_id, else the loaded tokenizer's on the studio's own rollout): a vLLM
 * rollout also stops on generation_config's other EOS ids, and a row ending in one of those is truncated for TRL.
 * Where the batch lists several and nothing says which is the tokenizer's, a row ending in one of them is refused
 * rather than guessed.
 */
function trlTruncated(p: PaddedBatch, given: Record<string, unknown>): Float32Array {
  const { B, C: T } = p;
  const eos = resolveSettings<TrlRun>(TRAINER_TABLES.trl.run, given, 'run').eos_token_id ?? p.tokenizer_eos_token_id ?? null;
  const last = (b: number) => (p.completion_lengths[b] > 0 ? p.completion_ids[b * T + p.completion_lengths[b] - 1] : null);
  if (eos === null && p.eos_token_ids.length > 1) {
    const b = Array.from({ length: B }, (_, k) => k).find((k) => last(k) !== null && last(k) !== p.pad_token_id && p.eos_token_ids.includes(last(k)!));
    if (b !== undefined) throw new SettingsError(`run.eos_token_id: sample ${b} ends in ${last(b)}, one of the batch's EOS ids [${p.eos_token_ids.join(', ')}], and mask_truncated_completions keeps only rows ending in the tokenizer's eos_token_id or pad: give the tokenizer's eos_token_id (TRL's self._tokenizer.eos_token_id) in run`);
  }
  const endsWell = new Set([eos ?? p.eos_token_ids[0], p.pad_token_id]);
  return Float32Array.from({ length: B }, (_, b) => (last(b) !== null && endsWell.has(last(b)!) ? 0 : 1));
}

/** The update's batch as `o`'s trainer reads it. */
export function trainerInputs(u: ScoredUpdate, o: TrainerObjective): PreparedObjective {
  const p = u.padded;
  const { B, C: T } = p;
  const truncated = o.trainer === 'trl' && o.config.mask_truncated_completions === true ? trlTruncated(p, o.run) : null;
  const tool = p.tool_mask ?? null;
  // TRL reads tool_mask itself; verl's and OpenRLHF's response mask already excludes tool output.
  const completion_mask = Int32Array.from(p.completion_mask, (m, i) => m * (truncated?.[Math.floor(i / T)] ? 0 : 1) * (tool && o.trainer !== 'trl' ? tool[i] : 1));
  const rowAdv = Float32Array.from(u.advantages);
  const x: TrainerInputs = {
    trainer: o.trainer,
    config: o.config,
    run: o.trainer === 'verl' ? verlStepRun(o.config, o.run, B) : o.run,
    B,
    T,
    completion_ids: p.completion_ids,
    completion_mask,
    tool_mask: o.trainer === 'trl' && tool ? tool : null,
    advantages: o.trainer === 'trl' ? rowAdv : Float32Array.from({ length: B * T }, (_, i) => rowAdv[Math.floor(i / T)]),
    // No stored old log-probs: the policy's own before the step (TRL's detach; verl's and OpenRLHF's actors
    // compute old_log_probs with the same weights before the update).
    old_per_token_logps: f32(p.old_per_token_logps ?? (o.trainer === 'trl' ? null : u.old_per_token_logps)),
    ref_per_token_logps: f32(u.ref_per_token_logps),
    // TRL holds sampling log-probs only when vLLM generated (grpo_trainer.py _generate_single_turn: logprobs =
    // None otherwise), so its off-policy mask compares against old_per_token_logps there: the studio sampler's
    // log-probs (a processed distribution) must not stand in for them.
    sampling_per_token_logps: o.trainer === 'trl' && o.config.use_vllm !== true ? null : f32(p.sampling_per_token_logps),
    sequence_width: p.L,
    sequence_lengths: Int32Array.from({ length: B }, (_, b) => {
      let n = 0;
      for (let t = 0; t < p.L; t++) n += p.attention_mask[b * p.L + t];
      return n;
    }),
  };
  return { x, scored: { per_token_logps: u.per_token_logps, per_token_entropy: u.per_token_entropy, temperature: u.temperature }, truncated };
}

/** The trainer's per-token gradient on the GPU for the backward: dlogp, and dentropy when an entropy term has one. */
export interface TrainerGrad {
  dlogp: GPUBuffer; // (B, C)
  dentropy: GPUBuffer | null; // (B, C)
}

/**
 * The objective's loss, per-token terms and gradient (∂loss/∂logp, ∂loss/∂entropy uploaded for the backward:
 * B·C floats each, the only CPU → GPU copy between forward and step). Throws SettingsError naming a setting.
 */
export async function trainerObjective(gpu: Gpu, p: PreparedObjective): Promise<{ out: TrainerLossOutputs; grad: TrainerGrad }> {
  assertOneMicroBatch(p.x);
  const out = await trainerLossFromLogps(gpu, p.x, p.scored);
  if (!out.dlogp) throw new Error(`${p.x.trainer}: the objective formed no per-token gradient`);
  // The trainer's own outcome can be NaN / ±inf: its float32 code overflowing (OpenRLHF icepop over an overflowing
  // IS ratio), or its aggregation dividing 0 by 0 when its corrections remove every loss token (verl rollout_rs
  // rejecting them all: agg_loss over an empty mask). The trainer would then step its weights to NaN; the studio
  // shows that loss and refuses the step, naming which it is.
  if (!Number.isFinite(out.loss)) {
    const kept = out.effective_loss_mask ?? out.loss_mask;
    const count = (m: ArrayLike<number>) => {
      let n = 0;
      for (let i = 0; i < m.length; i++) if (m[i]) n++;
      return n;
    };
    // The batch's loss tokens (TRL's tool_mask too), and those the trainer keeps.
    const tokens = count(p.x.tool_mask ? Float32Array.from(p.x.completion_mask, (m, i) => m * p.x.tool_mask![i]) : p.x.completion_mask);
    const left = count(kept);
    const why =
      tokens === 0 ? 'the batch has no loss token, and its aggregation divides 0 by 0, as the trainer\'s own does'
      : left === 0 ? `its corrections remove all ${tokens} loss tokens (rejected or masked), and its aggregation divides 0 by 0, as the trainer's own does`
      : p.x.trainer === 'openrlhf' ? "its float32 code overflows: see the Doctor's trainer-nonfinite finding for the tokens"
      : 'its float32 arithmetic is not finite on this batch (an overflowing ratio or weight, or a non-finite input)';
    throw new SettingsError(`${p.x.trainer}: the trainer's loss is ${out.loss} on this batch: ${why}; the step is not taken`);
  }
  const dent = out.dentropy && out.dentropy.some((v) => v !== 0) ? out.dentropy : null;
  return {
    out,
    grad: {
      dlogp: gpu.upload('trainer_dlogp', Float32Array.from(out.dlogp)),
      dentropy: dent ? gpu.upload('trainer_dentropy', Float32Array.from(dent)) : null,
    },
  };
}

/**
 * The setting that names each trainer's aggregation (the row whose values are its loss types / agg modes), or null
 * where the trainer has none: OpenRLHF's is fixed by actor.policy_loss_type (openrlhfAggregation).
 */
const AGGREGATION_SETTING: Record<TrainerId, string | null> = { trl: 'loss_type', verl: 'loss_agg_mode', openrlhf: null };

const configValue = (o: Pick<TrainerObjective, 'trainer' | 'config'>, name: string): unknown => (name in o.config ? o.config[name] : specOf(TRAINER_TABLES[o.trainer].config, name).default);

/** The name of the aggregation `o`'s loss is (TRL's loss_type, verl's loss_agg_mode, OpenRLHF's by its policy loss type). */
export function trainerAggregation(o: Pick<TrainerObjective, 'trainer' | 'config'>): string {
  const setting = AGGREGATION_SETTING[o.trainer];
  return setting ? String(configValue(o, setting)) : openrlhfAggregation(configValue(o, 'actor.policy_loss_type'));
}

/**
 * The loss under every aggregation the trainer has, the rest of its config and run as given: each a run of the
 * trainer's own objective with its aggregation setting changed (TRL: every loss_type, so the run's scalings — gas,
 * num_items_in_batch / num_processes — are TRL's own for each; verl: every loss_agg_mode; OpenRLHF: its one), the
 * trainer's own one being `loss` itself. The studio's aggregation names the trainer does not have (verl's under TRL,
 * TRL's under verl and OpenRLHF, …) are NaN: not the trainer's number. A setting the trainer refuses under a changed
 * aggregation is NaN too.
 */
export async function trainerLosses(gpu: Gpu, p: PreparedObjective, loss: number): Promise<Record<LossType, number> & Record<string, number>> {
  const o = p.x;
  const chosen = trainerAggregation(o);
  const setting = AGGREGATION_SETTING[o.trainer];
  const names = setting ? ((specOf(TRAINER_TABLES[o.trainer].config, setting).values ?? []) as readonly string[]).filter((n) => n !== chosen) : [];
  const out: Record<string, number> = Object.fromEntries(AGGREGATIONS.map((a) => [a, NaN]));
  const cells = names.length ? await lossTable(gpu, o, p.scored, { columns: names.map((n) => ({ label: n, patch: { [setting!]: n }, formula: '' })) }) : [];
  for (const c of cells) out[c.label] = c.loss ?? NaN;
  out[chosen] = loss;
  return out as Record<LossType, number> & Record<string, number>;
}

/**
 * The KL estimator of a batch's trainer, with its clamps, where it is not the studio loss's kl_forward (TRL's k3,
 * StepConfig.loss.kl_estimator): verl's kl_loss_type (verlKl), OpenRLHF's algo.kl.estimator (openrlhfKl). What the
 * objective's KL term takes, for a verb that shows the KL without a loss (`grpo-studio score`).
 */
export function trainerKl(o: Pick<TrainerObjective, 'trainer' | 'config'>): Pick<PpoLossParams, 'kl' | 'kl_inner' | 'kl_outer'> | null {
  if (o.trainer === 'verl') return verlKl(configValue(o, 'kl_loss_type') as VerlConfig['kl_loss_type']);
  if (o.trainer === 'openrlhf') return openrlhfKl(configValue(o, 'algo.kl.estimator') as PpoKl);
  return null;
}
