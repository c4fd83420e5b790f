// The GPU stages of one update: policy forward (per-token log-probs, entropy, saved activations) →
// reference forward → loss (every aggregation; the configured one drives the gradient, or, under a trainer
// preset (StepConfig.trainer), that trainer's objective: src/grpo/step_objective.ts) → backward → clip +
// optimizer step → re-evaluate the same batch with the new weights.
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
import { SettingsError } from './settings/types.ts';
import { trainerLossFromLogps } from './trainers/from_logps.ts';
import { trainerInputs, trainerObjective, type ScoredUpdate } from './step_objective.ts';
import { lossMaskOf } from './step_prepare.ts';
import { need, referenceLabel, type Skipped, type StageContext, type StageOutput, type StepState } from './step_types.ts';

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

/** Forward with saved activations, scoring every completion position (TRL computes them all; the masks decide). */
export async function policyForward(ctx: StageContext, state: StepState): Promise<StageOutput<'policy_forward'>> {
  const { gpu, opts } = ctx;
  if (ctx.weights.changed && !opts.reference && opts.config.loss.beta !== 0) {
    throw new Error('the frozen-copy reference is the policy as loaded, and its weights have changed: reload the model or give a reference model');
  }
  const p = need(state, 'assemble').data.padded;
  const rec = gpu.recorder('policy_forward');
  const scores = ctx.own(score_completions(rec, opts.policy, p, { temperature: opts.config.loss.temperature, save: true }));
  await rec.finish();
  const n = p.B * p.C;
  const [lp, ent] = await gpu.readAll([scores.per_token_logps, scores.per_token_entropy].map((buf) => ({ buf, byteSize: n * 4 })));
  return { data: { per_token_logps: new Float32Array(lp), per_token_entropy: new Float32Array(ent) }, device: { scores } };
}

export async function referenceForward(ctx: StageContext, state: StepState): Promise<StageOutput<'reference_forward'> | Skipped> {
  const { gpu, opts } = ctx;
  const ref = opts.reference;
  const policy = need(state, 'policy_forward');
  if (!ref) {
    if (opts.config.loss.beta === 0) return { skipped: 'β = 0: no reference model is loaded (as TRL)' };
    // The frozen copy has the policy's weights as they are before this step: its log-probs are the policy forward's.
    const frozen = opts.reference_source ?? { kind: 'frozen-copy' };
    const data = { ref_per_token_logps: policy.data.per_token_logps, reference: frozen.kind, reference_label: referenceLabel(frozen) };
    return { data, device: { ref_per_token_logps: policy.device.scores.per_token_logps } };
  }
  const source = opts.reference_source ?? { kind: 'model', name: 'reference' };
  const p = need(state, 'assemble').data.padded;
  const rec = gpu.recorder('reference_forward');
  const s = ctx.own(score_completions(rec, ref, p, { temperature: opts.config.loss.temperature }));
  await rec.finish();
  // Only the log-probs are used from here on: the reference's activations and logits would otherwise sit
  // under the backward's peak (src/model/plan.ts plans the peak this way).
  ref.releaseWorkspace();
  const data = { ref_per_token_logps: await gpu.readF32(s.per_token_logps, p.B * p.C), reference: source.kind, reference_label: referenceLabel(source) };
  return { data, device: { ref_per_token_logps: s.per_token_logps } };
}

/**
 * Per-token KL, loss and every aggregation, and the gradient of the chosen one with respect to the
 * per-token log-probs (dlogp; the backward takes it to the logits chunk by chunk). The loss splits into
 * its policy and β·KL terms with the backward's token weights (∂loss/∂per_token_loss): kl_term = Σ weight·β·KL.
 */
export async function loss(ctx: StageContext, state: StepState): Promise<StageOutput<'loss'>> {
  const { gpu, opts } = ctx;
  const p = need(state, 'assemble').data.padded;
  const s = need(state, 'policy_forward').device.scores;
  const rec = gpu.recorder('loss');
  const inputs = lossInputs(ctx, state, p, s, need(state, 'assemble').device.old_per_token_logps);
  const result = ctx.own(await grpo_loss(gpu, inputs, opts.config.loss, { rec, scoreMaskedRows: true }));
  await rec.finish();
  const r = await readGrpoLossFields(gpu, result, ['importance_ratio', 'per_token_kl', 'per_token_loss', 'clip', 'token_weight']);
  const weight = r.token_weight!;
  const beta = opts.config.loss.beta;
  let kl_term = 0;
  let klSum = 0;
  let tokens = 0;
  const mask = lossMaskOf(p);
  for (let i = 0; i < p.B * p.C; i++) {
    if (!mask[i]) continue;
    tokens++;
    klSum += r.per_token_kl?.[i] ?? 0;
    if (beta !== 0) kl_term += weight[i] * beta * r.per_token_kl![i];
  }
  // A trainer preset: its objective forms the loss and the gradient (the studio's per-token terms stay shown).
  const objective = opts.config.trainer ?? null;
  const pf = need(state, 'policy_forward').data;
  // A setting the trainer refuses is named here and by the backward, which then refuses (the stage's other terms stay shown).
  let t: Awaited<ReturnType<typeof trainerObjective>> | null = null;
  let objective_error: string | null = null;
  try {
    if (objective) t = await trainerObjective(gpu, trainerInputs(scoredUpdate(ctx, state, pf.per_token_logps, pf.per_token_entropy), objective));
  } catch (e) {
    if (!(e instanceof SettingsError)) throw e;
    objective_error = e.message;
  }
  if (t) ctx.own({ destroy: () => [t.grad.dlogp, t.grad.dentropy].forEach((b) => b?.destroy()) });
  return {
    data: {
      old_per_token_logps: p.old_per_token_logps ?? pf.per_token_logps,
      importance_ratio: r.importance_ratio,
      per_token_kl: r.per_token_kl,
      per_token_loss: r.per_token_loss,
      token_weight: weight,
      clip: r.clip,
      loss: t ? t.out.loss : objective ? NaN : r.loss,
      losses: r.losses,
      policy_term: t ? NaN : r.loss - kl_term,
      kl_term: t ? NaN : kl_term,
      mean_kl: r.per_token_kl ? klSum / Math.max(1, tokens) : NaN,
      clip_counts: r.clip_counts,
      objective,
      objective_error,
    },
    device: { result, trainer: t?.grad ?? null },
  };
}

export async function backward(ctx: StageContext, state: StepState): Promise<StageOutput<'backward'>> {
  const { gpu, opts } = ctx;
  const rec = gpu.recorder('backward');
  const s = need(state, 'policy_forward').device.scores;
  const objective_error = need(state, 'loss').data.objective_error;
  if (objective_error) throw new SettingsError(objective_error);
  const l = need(state, 'loss').device;
  // The trainer's gradient when a preset drives the step (its entropy term through dentropy), else the studio loss's.
  const dlogp = l.trainer?.dlogp ?? l.result.dlogp!;
  const dentropy = l.trainer?.dentropy ? { dentropy: l.trainer.dentropy, entropy: s.per_token_entropy } : null;
  opts.policy.backward(rec, { dlogp, lse: s.lse, ids: s.completion_ids, mask: lossMask(state, s), temperature: opts.config.loss.temperature, dentropy });
  // Under a LoRA adapter only A and B train: the norms and the step see the adapter alone (TRL + PEFT).
  const optimizer = opts.optimizer ?? ctx.own(new Optimizer(gpu, opts.policy.trainableParams.values(), opts.config.optimizer));
  // The gradient norms go in the backward's own submit and pass; their sums stay on the GPU for the step's clip coefficient.
  optimizer.recordGradNorms(rec, opts.policy.trainableGrads!);
  await rec.finish();
  return { data: await optimizer.readGradNorms(), device: { optimizer } };
}

export async function step(ctx: StageContext, state: StepState): Promise<StageOutput<'step'>> {
  const { opts } = ctx;
  const back = need(state, 'backward');
  await ctx.weights.beforeStep();
  // One submit, one compute pass: clip coefficient (on the GPU, from the backward's sums) and every parameter's update.
  const u = await back.device.optimizer.step(opts.policy.trainableGrads!, opts.config.max_grad_norm);
  return { data: { optimizer: opts.config.optimizer, ...u } };
}

/** The same batch through the updated policy: log-probs after, their change, KL to the same reference, the loss again. */
export async function reEvaluate(ctx: StageContext, state: StepState): Promise<StageOutput<'re_evaluate'>> {
  const { gpu, opts } = ctx;
  const p = need(state, 'assemble').data.padded;
  const before = need(state, 'policy_forward');
  const rec = gpu.recorder('re_evaluate');
  // save: true keeps the one training workspace instead of allocating an inference one beside it.
  const s = ctx.own(score_completions(rec, opts.policy, p, { temperature: opts.config.loss.temperature, save: true }));
  const inputs = lossInputs(ctx, state, p, s, need(state, 'assemble').device.old_per_token_logps ?? before.device.scores.per_token_logps);
  const res = ctx.own(await grpo_loss(gpu, inputs, opts.config.loss, { rec, backward: false, scoreMaskedRows: true }));
  await rec.finish();
  const r = await readGrpoLossFields(gpu, res, ['per_token_logps', 'per_token_kl', 'per_token_loss']);
  const pre = before.data.per_token_logps;
  // Under a trainer preset the loss after the step is that trainer's objective too (old log-probs: the policy's before).
  const objective = opts.config.trainer;
  let loss_after = r.loss;
  if (objective) {
    const entropy = await gpu.readF32(s.per_token_entropy, p.B * p.C);
    const x = trainerInputs(scoredUpdate(ctx, state, r.per_token_logps, entropy), objective);
    loss_after = (await trainerLossFromLogps(gpu, { ...x.x, old_per_token_logps: x.x.old_per_token_logps ?? Float32Array.from(pre) }, x.scored)).loss;
  }
  return {
    data: {
      post_per_token_logps: r.per_token_logps,
      delta_per_token_logps: r.per_token_logps.map((x, i) => x - pre[i]),
      post_per_token_kl: r.per_token_kl,
      post_per_token_loss: r.per_token_loss,
      loss_after,
      losses_after: r.losses,
    },
  };
}
