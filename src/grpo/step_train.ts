// The GPU stages of one update: policy forward (per-token log-probs, entropy, saved activations) →
// reference forward → loss (every aggregation; the configured one drives the gradient, or, under a trainer
// preset (StepConfig.trainer), that trainer's objective: src/grpo/step_objective.ts, whose per-token terms,
// weights, KL and losses table are then what the loss stage, each pass and the re-evaluation show: trainerShown) → backward → clip +
// optimizer step (and, with μ > 1, further passes over the same batch: step()) → re-evaluate the same
// batch with the new weights.
//
// Buffers stay on the GPU between stages (StepState's `device` fields): the policy forward's activations
// and per-token log-probs / log-sum-exp feed the loss and the backward in place, and nothing goes CPU → GPU
// between policy forward and optimizer step except a trainer objective's per-token gradient (B·C floats).
// The (B·C, V) logits never exist at once: the policy is scored in row chunks (src/model/score.ts), the
// loss works on the per-token log-probs (GrpoLossInputs.scored) and stops at their gradient dlogp, and the
// backward recomputes each chunk's logits and turns them into dlogits in place (src/model/head.ts;
// CausalLM.logitsChunkRows caps the chunk). Each stage reads back only what is shown (per-token arrays
// (B, C), losses, norms), in one round trip.
//
// old_per_token_logps: the batch's, or else the policy's own log-probs before the step (ratio 1, as TRL
// with one iteration per generation). Reference: a given model (a second checkpoint, the LoRA base with
// the adapter off, or the studio's snapshot of the weights as loaded, which later updates keep using
// while the policy trains on: StepPipelineOptions.reference_source says which); with none and β > 0 a
// frozen copy of the policy, which for an update from the loaded weights is the policy itself before
// the step (same weights, same batch: its log-probs are the policy forward's); with β = 0 and none, no
// reference at all, as TRL.
import { score_completions, type CompletionScores } from '../model/score.ts';
import type { PaddedBatch } from './batch.ts';
import { grpo_loss, readGrpoLossFields, type GrpoLossInputs } from './loss.ts';
import { Optimizer } from './optimizer.ts';
import type { TrainingDropout } from './settings/dropout.ts';
import { dropoutWith, type ModelConfig } from '../model/config.ts';
import type { StepConfig } from './step_config.ts';
import { SettingsError } from './settings/types.ts';
import { specOf } from './settings/table.ts';
import { TRL_SETTINGS, type TrlConfig } from './settings/trl.ts';
import { trainerLossFromLogps } from './trainers/from_logps.ts';
import { readsReference, trainerAggregation, trainerInputs, trainerLosses, trainerObjective, updateScope, type PreparedObjective, type ScoredUpdate, type TrainerGrad } from './step_objective.ts';
import type { TrainerLossOutputs } from './trainers/types.ts';
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS, type ClipCounts, type LossType } from '../kernels/types.ts';
import { lossMaskOf } from './step_prepare.ts';
import { need, referenceLabel, type PassData, type Skipped, type StageContext, type StageData, type StageOutput, type StepState } from './step_types.ts';
import type { CausalLM } from '../model/model.ts';

/** The mask the loss (and so its gradient) applies: completion_mask · tool_mask when a tool mask exists. */
function lossMask(state: StepState, s: CompletionScores): GPUBuffer {
  return need(state, 'assemble').device.loss_mask ?? s.completion_mask;
}

/**
 * The loss's inputs over the assembled batch for these scores (policy forward or re-evaluation): their
 * per-token gather (every row scored at the loss's temperature); no logits.
 */
function lossInputs(ctx: StageContext, state: StepState, p: PaddedBatch, s: CompletionScores, old: GPUBuffer | null): GrpoLossInputs {
  return {
    B: p.B, T: p.C, V: ctx.opts.policy.config.vocab_size,
    completion_ids: s.completion_ids, completion_mask: lossMask(state, s), advantages: need(state, 'assemble').device.advantages,
    old_per_token_logps: old, ref_per_token_logps: state.reference_forward?.device.ref_per_token_logps ?? null, scored: s,
  };
}

/** The update as a trainer objective reads it, with these per-token log-probs / entropies (before or after the step). */
function scoredUpdate(ctx: StageContext, state: StepState, per_token_logps: Float32Array, per_token_entropy: Float32Array): ScoredUpdate {
  const a = need(state, 'assemble').data;
  return {
    padded: a.padded, per_token_logps, per_token_entropy, advantages: need(state, 'advantages').data.advantages,
    ref_per_token_logps: state.reference_forward?.data.ref_per_token_logps ?? null,
    old_per_token_logps: need(state, 'policy_forward').data.per_token_logps, temperature: ctx.opts.config.loss.temperature,
  };
}

/**
 * The policy forward is the trainer's training forward: where the trainer runs it with dropout on and config.json has
 * some (ModelConfig.dropout), the trainer's loss and gradient are a random draw the studio's dropout-free forward
 * does not reproduce. Refused, naming the probabilities and the fix, rather than shown as the trainer's number.
 */
function assertNoTrainingDropout(d: TrainingDropout | null, model: ModelConfig): void {
  if (!d) return;
  // The override's values were checked with the settings (dropout.ts): probabilities in [0, 1].
  const on = Object.entries(d.override ? dropoutWith(model, d.override.values) : model.dropout);
  if (on.length === 0) return;
  throw new SettingsError(`${d.why}, and config.json${d.override ? ` with ${d.override.field}` : ''} has dropout ${on.map(([k, p]) => `${k} ${p}`).join(', ')}: the trainer's loss and gradient drop activations at random, the studio's forward drops none; ${d.fix}`);
}

/**
 * TRL's sync_ref_model under PEFT: GRPOTrainer.__init__ raises NotImplementedError (huggingface/trl
 * trl/trainer/grpo_trainer.py): the reference is the base with the adapter disabled, so there is no model to
 * sync. The settings rules see no adapter (trl_rules.ts refuses the other cases); the policy forward does.
 */
function assertNoAdapterRefSync(objective: StepConfig['trainer'], adapter: boolean): void {
  if (!adapter || objective?.trainer !== 'trl' || objective.config.sync_ref_model !== true) return;
  throw new SettingsError('config.sync_ref_model: TRL refuses it with a PEFT adapter: "You passed `sync_ref_model=True` while using a PEFT model, which is currently not supported. With PEFT, GRPOTrainer does not keep a separate reference model in memory; instead, it recovers reference behavior by temporarily disabling the adapter. As a result, there is no standalone `ref_model` instance to synchronize." Leave sync_ref_model out, or step the full model');
}

/** Forward with saved activations, scoring every completion position (TRL computes them all; the masks decide). */
export async function policyForward(ctx: StageContext, state: StepState): Promise<StageOutput<'policy_forward'>> {
  const { gpu, opts } = ctx;
  const p = need(state, 'assemble').data.padded;
  // The batch's own reference log-probs need no frozen copy (referenceForward).
  if (ctx.weights.changed && !opts.reference && readsReference(opts.config.loss.beta, opts.config.trainer) && !p.ref_per_token_logps) {
    throw new Error('the frozen-copy reference is the policy as loaded, and its weights have changed: reload the model or give a reference model');
  }
  assertNoTrainingDropout(opts.config.training_dropout ?? null, opts.policy.config);
  assertNoAdapterRefSync(opts.config.trainer, opts.policy.adapter !== null);
  const rec = gpu.recorder('policy_forward', { stream: true });
  const scores = ctx.own(score_completions(rec, opts.policy, p, { temperature: opts.config.loss.temperature, save: true }));
  await rec.finish();
  const n = p.B * p.C;
  const [lp, ent] = await gpu.readAll([scores.per_token_logps, scores.per_token_entropy].map((buf) => ({ buf, byteSize: n * 4 })));
  return { data: { per_token_logps: new Float32Array(lp), per_token_entropy: new Float32Array(ent) }, device: { scores } };
}

/**
 * The reference log-probs the loss reads. A batch that carries ref_per_token_logps (a trainer's dump: TRL's
 * ref_per_token_logps, verl's ref_log_prob, OpenRLHF's base_action_log_probs) holds the trainer's own, computed by its
 * reference model (the initial policy, or TRL's synced one): the loss reads them, as it reads old_per_token_logps,
 * whatever reference is loaded — a checkpoint stepped past the rollout's policy would otherwise be its own reference
 * (KL 0). A reference model loaded too is scored as a check (its largest |Δ| over the loss tokens). Without them:
 * the reference model, or the frozen copy of the policy as loaded.
 */
export async function referenceForward(ctx: StageContext, state: StepState): Promise<StageOutput<'reference_forward'> | Skipped> {
  const { gpu, opts } = ctx;
  const ref = opts.reference;
  const policy = need(state, 'policy_forward');
  const p = need(state, 'assemble').data.padded;
  const reads = readsReference(opts.config.loss.beta, opts.config.trainer);
  if (!reads && !ref) return { skipped: 'β = 0 and no KL term of the trainer: no reference model is loaded (as TRL)' };
  // No KL term with a reference model: its KL is shown, not trained on (the model's, below).
  if (reads) {
    // TRL's sync_ref_model: the reference this stage uses must be the one TRL's has been synced to by now.
    const sync = opts.config.reference_sync?.[p.ref_per_token_logps ? 'batch' : 'studio'];
    if (sync) throw new SettingsError(sync);
    const stored = storedReference(p);
    if (stored) {
      const source = opts.reference_source ?? { kind: 'model', name: 'reference' };
      const check = ref ? await referenceCheck(ctx, ref, p, referenceLabel(source)) : null;
      const label = `the batch's ref_per_token_logps${check ? ` (${check.model}: max |Δ| ${check.max_abs_diff.toPrecision(3)} over ${check.tokens} loss tokens)` : ''}`;
      return { data: { ref_per_token_logps: stored, reference: 'batch', reference_label: label, reference_check: check }, device: { ref_per_token_logps: ctx.own(gpu.upload('ref_per_token_logps', stored)) } };
    }
    if (!ref) {
      // The frozen copy has the policy's weights as they are before this step: its log-probs are the policy forward's.
      const frozen = opts.reference_source ?? { kind: 'frozen-copy' };
      const data = { ref_per_token_logps: policy.data.per_token_logps, reference: frozen.kind, reference_label: referenceLabel(frozen), reference_check: null };
      return { data, device: { ref_per_token_logps: policy.device.scores.per_token_logps } };
    }
  }
  const source = opts.reference_source ?? { kind: 'model', name: 'reference' };
  const s = await scoreReference(ctx, ref!, p);
  const data = { ref_per_token_logps: await gpu.readF32(s.per_token_logps, p.B * p.C), reference: source.kind, reference_label: referenceLabel(source), reference_check: null };
  return { data, device: { ref_per_token_logps: s.per_token_logps } };
}

/** The reference model's per-token log-probs of the batch (B, C), on the GPU. */
async function scoreReference(ctx: StageContext, ref: CausalLM, p: PaddedBatch) {
  const rec = ctx.gpu.recorder('reference_forward', { stream: true });
  const s = ctx.own(score_completions(rec, ref, p, { temperature: ctx.opts.config.loss.temperature }));
  await rec.finish();
  // Only the log-probs are used from here on: the reference's activations and logits would otherwise sit
  // under the backward's peak (src/model/plan.ts plans the peak this way).
  ref.releaseWorkspace();
  return s;
}

/**
 * The reference log-probs a batch carries itself (a trainer's dump: TRL's ref_per_token_logps, verl's ref_log_prob,
 * OpenRLHF's base_action_log_probs), or null. They are the trainer's own reference: every verb reads them, whatever
 * reference model is loaded (that one is only checked against them: referenceDiff) — the step's reference stage and
 * `grpo-studio score`.
 */
export function storedReference(p: PaddedBatch): Float32Array | null {
  return p.ref_per_token_logps ?? null;
}

/** A loaded reference model against the batch's ref_per_token_logps: its largest |Δ| over the loss tokens (B·C floats read back once). */
async function referenceCheck(ctx: StageContext, ref: CausalLM, p: PaddedBatch, model: string): Promise<NonNullable<StageData['reference_forward']['reference_check']>> {
  const s = await scoreReference(ctx, ref, p);
  return referenceDiff(await ctx.gpu.readF32(s.per_token_logps, p.B * p.C), p, model);
}

/** A reference model's log-probs `got` (B, C) against the batch's own ref_per_token_logps: the largest |Δ| over the loss tokens. */
export function referenceDiff(got: ArrayLike<number>, p: PaddedBatch, model: string): NonNullable<StageData['reference_forward']['reference_check']> {
  const mask = lossMaskOf(p);
  let [max_abs_diff, tokens] = [0, 0];
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    tokens++;
    max_abs_diff = Math.max(max_abs_diff, Math.abs(got[i] - p.ref_per_token_logps![i]));
  }
  return { model, max_abs_diff, tokens };
}

/** The per-token fields each pass reads back (what the loss stage and the pass selector show). */
const PASS_FIELDS = ['importance_ratio', 'per_token_kl', 'per_token_loss', 'clip', 'token_weight'] as const;

/** The per-token fields and scalars a pass shows (the loss stage's StageData, a later pass's PassData). */
type PassShown = Pick<StageData['loss'], 'importance_ratio' | 'per_token_kl' | 'per_token_loss' | 'token_weight' | 'clip' | 'clip_counts' | 'losses' | 'policy_term' | 'kl_term' | 'mean_kl' | 'aggregation'>;

/** One pass's loss terms (the loss stage's, or a later pass's over the same batch): what it shows, the studio loss's buffers and the trainer objective's gradient. */
interface PassTerms {
  result: Awaited<ReturnType<typeof grpo_loss>>;
  t: Awaited<ReturnType<typeof trainerObjective>> | null;
  objective_error: string | null;
  loss: number;
  shown: PassShown;
  /** The studio loss's aggregations (StageData['loss'].studio_losses). */
  studio_losses: Record<LossType, number>;
}

/**
 * The clip TRL's metrics count for each of its loss types (grpo_trainer.py _compute_loss): the PPO clip's is_low /
 * is_high_clipped, cispo's cap, or none. Keyed by the loss_type row's values, so a type the table gains must be named.
 */
const TRL_CLIP_METRIC: Record<TrlConfig['loss_type'], 'ppo' | 'cispo' | null> = { grpo: 'ppo', bnpo: 'ppo', dr_grpo: 'ppo', dapo: 'ppo', luspo: 'ppo', cispo: 'cispo', sapo: null, vespo: null };

/**
 * TRL's clip flags as its _compute_loss counts them (huggingface/trl trl/trainer/grpo_trainer.py, its clip
 * metrics): grpo / bnpo / dr_grpo / dapo / luspo the PPO clip's is_low / is_high_clipped — the studio loss's flags
 * for the same ratio, ε and advantages (`studio`); cispo coef_1 > epsilon_high with A > 0 (cispo_clip_ratio),
 * flagged high; sapo and vespo none. `ratio`: coef_1 (the studio loss's ratio, at TRL's importance_sampling_level).
 */
function trlClip(x: PreparedObjective['x'], ratio: Float32Array, studio: Uint32Array): Uint32Array {
  const metric = TRL_CLIP_METRIC[trainerAggregation(x) as TrlConfig['loss_type']];
  if (metric === 'ppo') return studio;
  const clip = new Uint32Array(ratio.length);
  if (metric !== 'cispo') return clip;
  const c = x.config;
  const eps = (c.epsilon_high ?? c.epsilon ?? specOf(TRL_SETTINGS, 'epsilon').default) as number;
  for (let i = 0; i < ratio.length; i++) if (ratio[i] > eps && x.advantages[Math.floor(i / x.T)] > 0) clip[i] = CLIP_HIGH;
  return clip;
}

/** Clip counts over the tokens of `mask` (the studio loss's ClipCounts, from per-token flags). */
function clipCounts(clip: Uint32Array, mask: ArrayLike<number>): ClipCounts {
  const c = { low: 0, high: 0, region: 0, delta_binding: 0, tokens: 0 };
  for (let i = 0; i < clip.length; i++) {
    if (!mask[i]) continue;
    c.tokens++;
    if (clip[i] & CLIP_LOW) c.low++;
    if (clip[i] & CLIP_HIGH) c.high++;
    if (clip[i] & (CLIP_LOW | CLIP_HIGH)) c.region++;
    if (clip[i] & DELTA_BINDS) c.delta_binding++;
  }
  return c;
}

/**
 * What a pass shows under a trainer objective: the trainer's own per-token terms (TrainerLossOutputs) and the
 * scalars from them, never the studio loss's. per_token_loss is the trainer's tensor as it forms it (TRL's after its
 * IS weights; verl's pg_losses, which keep rejected and masked tokens unmasked — as `grpo-studio loss` writes it and
 * the page's trainer view shows it), and token_weight (∂loss/∂per_token_loss) is 0 where its aggregation removes a
 * token; NaN where the trainer forms none (verl geo_mean: one value per sequence). per_token_kl and mean_kl (over the
 * trainer's loss_mask) are its KL estimator's (clamps included), null / NaN where its loss has no KL term. The ratio
 * and clip flags are the trainer's where it exposes them (verl / OpenRLHF); TRL's ratio is the studio loss's (TRL's
 * coef_1 for the same old log-probs and importance_sampling_level) and its flags the ones TRL's metrics count for its
 * loss type (trlClip). `fallback`: those, for TRL.
 */
function trainerShown(o: TrainerLossOutputs, N: number, fallback: { importance_ratio: Float32Array; clip: Uint32Array; clip_counts: ClipCounts }, losses: PassShown['losses'], aggregation: string): PassShown {
  const w = o.token_weight ? Float32Array.from(o.token_weight) : new Float32Array(N).fill(NaN);
  const { per_token_loss: ptl, per_token_kl: kl } = trainerTensors(o, N);
  let [klSum, tokens, kl_term, weighted] = [0, 0, 0, 0];
  for (let i = 0; i < N; i++) {
    if (w[i] !== 0) weighted += w[i] * ptl[i]; // a removed token adds nothing, whatever the trainer left there
    if (kl && o.kl_weight && o.kl_weight[i] !== 0) kl_term += o.kl_weight[i] * kl[i]; // as the loss: a removed token adds nothing
    if (!o.loss_mask[i]) continue;
    tokens++;
    if (kl) klSum += kl[i];
  }
  const clip = o.clip ?? fallback.clip;
  return {
    importance_ratio: o.policy_ratio ? Float32Array.from(o.policy_ratio) : fallback.importance_ratio,
    per_token_kl: kl,
    per_token_loss: ptl,
    token_weight: w,
    clip,
    clip_counts: o.clip ? clipCounts(clip, o.loss_mask) : fallback.clip_counts,
    losses,
    // TRL's per_token_loss holds β·KL: its policy term is the rest.
    policy_term: o.per_token_loss_includes_kl ? weighted - kl_term : weighted,
    kl_term,
    mean_kl: kl ? klSum / Math.max(1, tokens) : NaN,
    aggregation,
  };
}

/** The trainer's per-token loss (NaN where it forms none: verl geo_mean) and KL (null: no KL term), as shown. */
function trainerTensors(o: TrainerLossOutputs, N: number): { per_token_loss: Float32Array; per_token_kl: Float32Array | null } {
  return { per_token_loss: o.per_token_loss ? Float32Array.from(o.per_token_loss) : new Float32Array(N).fill(NaN), per_token_kl: o.per_token_kl ? Float32Array.from(o.per_token_kl) : null };
}

/**
 * Per-token KL, loss and every aggregation for these scores against `old` (the batch's old log-probs; for
 * a later pass, fixed to the policy's before the first), and the gradient of the chosen one with respect to
 * the per-token log-probs (dlogp). The loss splits into its policy and β·KL terms with the backward's token
 * weights (∂loss/∂per_token_loss): kl_term = Σ weight·β·KL. Under a trainer preset its objective forms the
 * loss and the gradient, and every field shown is the trainer's (trainerShown); a setting it refuses is named
 * (objective_error), the loss and per-token fields are NaN and the backward then refuses.
 */
async function passTerms(ctx: StageContext, state: StepState, s: CompletionScores, old: GPUBuffer | null, pf: { per_token_logps: Float32Array; per_token_entropy: Float32Array }): Promise<PassTerms> {
  const { gpu, opts } = ctx;
  const p = need(state, 'assemble').data.padded;
  const N = p.B * p.C;
  const rec = gpu.recorder('loss');
  const result = ctx.own(await grpo_loss(gpu, lossInputs(ctx, state, p, s, old), opts.config.loss, { rec, scoreMaskedRows: true }));
  await rec.finish();
  const r = await readGrpoLossFields(gpu, result, PASS_FIELDS);
  const objective = opts.config.trainer ?? null;
  if (!objective) {
    const weight = r.token_weight!;
    const beta = opts.config.loss.beta;
    let kl_term = 0;
    let klSum = 0;
    let tokens = 0;
    const mask = lossMaskOf(p);
    for (let i = 0; i < N; i++) {
      if (!mask[i]) continue;
      tokens++;
      klSum += r.per_token_kl?.[i] ?? 0;
      if (beta !== 0) kl_term += weight[i] * beta * r.per_token_kl![i];
    }
    const shown: PassShown = {
      importance_ratio: r.importance_ratio, per_token_kl: r.per_token_kl, per_token_loss: r.per_token_loss, token_weight: weight, clip: r.clip, clip_counts: r.clip_counts,
      losses: r.losses, policy_term: r.loss - kl_term, kl_term, mean_kl: r.per_token_kl ? klSum / Math.max(1, tokens) : NaN, aggregation: opts.config.loss.loss_type,
    };
    return { result, t: null, objective_error: null, loss: r.loss, shown, studio_losses: r.losses };
  }
  let t: PassTerms['t'] = null;
  let objective_error: string | null = null;
  const prepared = () => trainerInputs(scoredUpdate(ctx, state, pf.per_token_logps, pf.per_token_entropy), objective);
  let x: PreparedObjective | null = null;
  try {
    x = prepared();
    t = await trainerObjective(gpu, x);
  } catch (e) {
    if (!(e instanceof SettingsError)) throw e;
    objective_error = e.message;
  }
  if (!t || !x) {
    // No trainer numbers to show: NaN, with the objective's refusal (never the studio loss's terms in their place).
    const nan = () => new Float32Array(N).fill(NaN);
    const losses = Object.fromEntries(Object.keys(r.losses).map((k) => [k, NaN])) as PassShown['losses'];
    const shown: PassShown = { importance_ratio: nan(), per_token_kl: null, per_token_loss: nan(), token_weight: nan(), clip: new Uint32Array(N), clip_counts: { low: 0, high: 0, region: 0, delta_binding: 0, tokens: 0 }, losses, policy_term: NaN, kl_term: NaN, mean_kl: NaN, aggregation: trainerAggregation(objective) };
    return { result, t: null, objective_error, loss: NaN, shown, studio_losses: r.losses };
  }
  const tt = t;
  ctx.own({ destroy: () => [tt.grad.dlogp, tt.grad.dentropy].forEach((b) => b?.destroy()) });
  const losses = await trainerLosses(gpu, x, t.out.loss);
  // TRL's objective forms no clip flags of its own: the ones its metrics count for its loss type.
  const flags = objective.trainer === 'trl' ? trlClip(x.x, r.importance_ratio, r.clip) : r.clip;
  const shown = trainerShown(t.out, N, { importance_ratio: r.importance_ratio, clip: flags, clip_counts: flags === r.clip ? r.clip_counts : clipCounts(flags, t.out.loss_mask) }, losses, trainerAggregation(objective));
  return { result, t, objective_error, loss: t.out.loss, shown, studio_losses: r.losses };
}

/** The loss stage: pass 1's terms (its old log-probs: the batch's, or the policy's own, ratio 1). */
export async function loss(ctx: StageContext, state: StepState): Promise<StageOutput<'loss'>> {
  const p = need(state, 'assemble').data.padded;
  const pf = need(state, 'policy_forward');
  const x = await passTerms(ctx, state, pf.device.scores, need(state, 'assemble').device.old_per_token_logps, pf.data);
  return {
    data: {
      old_per_token_logps: p.old_per_token_logps ?? pf.data.per_token_logps,
      ...x.shown,
      studio_losses: x.studio_losses,
      loss: x.loss,
      objective: ctx.opts.config.trainer ?? null,
      objective_error: x.objective_error,
    },
    device: { result: x.result, trainer: x.t?.grad ?? null },
  };
}

/** Records the backward of one pass's loss through the policy's saved forward and the gradient norms; reads the norms. */
async function passBackward(ctx: StageContext, state: StepState, s: CompletionScores, l: { result: PassTerms['result']; trainer: TrainerGrad | null }, objective_error: string | null) {
  const { gpu, opts } = ctx;
  if (objective_error) throw new SettingsError(objective_error);
  const rec = gpu.recorder('backward', { stream: true });
  // The trainer's gradient when a preset drives the step (its entropy term through dentropy), else the studio loss's.
  const dlogp = l.trainer?.dlogp ?? l.result.dlogp!;
  const dentropy = l.trainer?.dentropy ? { dentropy: l.trainer.dentropy, entropy: s.per_token_entropy } : null;
  opts.policy.backward(rec, { dlogp, lse: s.lse, ids: s.completion_ids, mask: lossMask(state, s), temperature: opts.config.loss.temperature, dentropy });
  // Under a LoRA adapter only A and B train: the norms and the step see the adapter alone (TRL + PEFT).
  const optimizer = state.backward?.device.optimizer ?? opts.optimizer ?? ctx.own(new Optimizer(gpu, opts.policy.trainableParams.values(), opts.config.optimizer));
  // The gradient norms go in the backward's own recording (its last piece); their sums stay on the GPU for the step's clip coefficient.
  optimizer.recordGradNorms(rec, opts.policy.trainableGrads!);
  await rec.finish();
  return { data: await optimizer.readGradNorms(), optimizer };
}

export async function backward(ctx: StageContext, state: StepState): Promise<StageOutput<'backward'>> {
  const l = need(state, 'loss');
  const b = await passBackward(ctx, state, need(state, 'policy_forward').device.scores, l.device, l.data.objective_error);
  return { data: b.data, device: { optimizer: b.optimizer } };
}

/**
 * The optimizer step, and with μ = StepConfig.passes > 1 the further passes over the same batch, each a
 * forward with the weights the previous pass stepped to, the loss against old log-probs fixed to the
 * policy's before the first pass (so the ratio moves off 1, ε clips and the KL moves), a backward and a
 * step. The trainers do the same over one mini-batch: TRL GRPOTrainer (trl/trainer/grpo_trainer.py)
 * computes old_per_token_logps at generation when num_iterations > 1 and replays the batch from
 * `_buffered_inputs` num_iterations times; verl's DataParallelPPOActor.update_policy
 * (verl/workers/actor/dp_actor.py) loops `ppo_epochs` over its mini-batches against the rollout's
 * old_log_probs; OpenRLHF's PPOTrainer loops `max_epochs` over the replay buffer's experiences
 * (openrlhf/trainer/ppo_trainer.py), whose action_log_probs are the old ones. Each pass's ratio, clip
 * counts, KL and loss are kept (`passes`, pass 2 on; pass 1 is the loss stage).
 */
export async function step(ctx: StageContext, state: StepState): Promise<StageOutput<'step'>> {
  const { gpu, opts } = ctx;
  const back = need(state, 'backward');
  await ctx.weights.beforeStep();
  // One submit, one compute pass: clip coefficient (on the GPU, from the backward's sums) and every parameter's update.
  const u = await back.device.optimizer.step(opts.policy.trainableGrads!, opts.config.max_grad_norm);
  const passes: PassData[] = [];
  const p = need(state, 'assemble').data.padded;
  const n = p.B * p.C;
  const old = need(state, 'assemble').device.old_per_token_logps ?? need(state, 'policy_forward').device.scores.per_token_logps; // (B, C) fixed over the passes
  for (let pass = 2; pass <= (opts.config.passes ?? 1); pass++) {
    const rec = gpu.recorder('policy_forward', { stream: true });
    const s = ctx.own(score_completions(rec, opts.policy, p, { temperature: opts.config.loss.temperature, save: true }));
    await rec.finish();
    const [lp, ent] = await gpu.readAll([s.per_token_logps, s.per_token_entropy].map((buf) => ({ buf, byteSize: n * 4 })));
    const x = await passTerms(ctx, state, s, old, { per_token_logps: new Float32Array(lp), per_token_entropy: new Float32Array(ent) });
    const b = await passBackward(ctx, state, s, { result: x.result, trainer: x.t?.grad ?? null }, x.objective_error);
    const v = await b.optimizer.step(opts.policy.trainableGrads!, opts.config.max_grad_norm);
    const { importance_ratio, per_token_kl, per_token_loss, token_weight, clip, clip_counts, mean_kl } = x.shown;
    passes.push({ pass, per_token_logps: new Float32Array(lp), importance_ratio, per_token_kl, per_token_loss, token_weight, clip, clip_counts, loss: x.loss, mean_kl, grad_norm: b.data.grad_norm, clip_coef: v.clip_coef, update_norm: v.update_norm });
  }
  return { data: { optimizer: opts.config.optimizer, ...u, passes, scope: updateScope(opts.config.trainer ?? null, need(state, 'assemble').data.padded.B) } };
}

/** The same batch through the updated policy: log-probs after, their change, KL to the same reference, the loss again. */
export async function reEvaluate(ctx: StageContext, state: StepState): Promise<StageOutput<'re_evaluate'>> {
  const { gpu, opts } = ctx;
  const p = need(state, 'assemble').data.padded;
  const before = need(state, 'policy_forward');
  const rec = gpu.recorder('re_evaluate', { stream: true });
  // save: true keeps the one training workspace instead of allocating an inference one beside it.
  const s = ctx.own(score_completions(rec, opts.policy, p, { temperature: opts.config.loss.temperature, save: true }));
  const inputs = lossInputs(ctx, state, p, s, need(state, 'assemble').device.old_per_token_logps ?? before.device.scores.per_token_logps);
  const res = ctx.own(await grpo_loss(gpu, inputs, opts.config.loss, { rec, backward: false, scoreMaskedRows: true }));
  await rec.finish();
  const r = await readGrpoLossFields(gpu, res, ['per_token_logps', 'per_token_kl', 'per_token_loss']);
  const pre = before.data.per_token_logps;
  // Under a trainer preset the loss after the step, its per-token terms and its losses are that trainer's objective's
  // too (old log-probs: the batch's, else the policy's before), as the loss stage's.
  const objective = opts.config.trainer;
  let [loss_after, losses_after, post_kl, post_loss]: [number, StageData['re_evaluate']['losses_after'], Float32Array | null, Float32Array] = [r.loss, r.losses, r.per_token_kl, r.per_token_loss];
  if (objective) {
    const entropy = await gpu.readF32(s.per_token_entropy, p.B * p.C);
    const x = trainerInputs(scoredUpdate(ctx, state, r.per_token_logps, entropy), objective);
    const prepared = { ...x, x: { ...x.x, old_per_token_logps: x.x.old_per_token_logps ?? Float32Array.from(pre) } };
    const o = await trainerLossFromLogps(gpu, prepared.x, prepared.scored);
    const shown = trainerTensors(o, p.B * p.C);
    [loss_after, losses_after, post_kl, post_loss] = [o.loss, await trainerLosses(gpu, prepared, o.loss), shown.per_token_kl, shown.per_token_loss];
  }
  return {
    data: {
      post_per_token_logps: r.per_token_logps,
      delta_per_token_logps: r.per_token_logps.map((x, i) => x - pre[i]),
      post_per_token_kl: post_kl,
      post_per_token_loss: post_loss,
      loss_after,
      losses_after,
    },
  };
}
