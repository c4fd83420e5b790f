// OpenRLHF's actor objective on one micro-batch (OpenRLHF/OpenRLHF 3c3be62), from its own argument names:
// ActorPPOTrainer.training_step (openrlhf/trainer/ray/ppo_actor.py: actor_loss + kl_ctl·kl_loss −
// entropy_coef·entropy_loss), PolicyLoss.forward and aggregate_loss (openrlhf/models/loss.py: ppo / gspo,
// dual clip, vLLM IS correction tis / icepop / seq-mask-tis), compute_approx_kl (openrlhf/models/utils.py,
// clamped ±10) and the optimizer-step normalisers of openrlhf/utils/loss_utils.py _optimizer_step_loss_norm.
// Log-probs are × action_mask (0 on padding); the entropy is that of the untempered logits (Actor.forward).
// Where OpenRLHF's float32 IS weight overflows (openrlhf_overflow.ts) the outputs carry its NaN / inf, not a
// finite stand-in; the combinations OpenRLHF cannot run are refused first (settings/openrlhf_rules.ts).
// A batch written by OpenRLHF before ed62d0e2 (config openrlhf_code, set by the readers for its flat arg names) gets
// that code's aggregation (every term the micro-batch's masked_mean: ed62d0e2~1 loss.py PolicyLoss.forward,
// ppo_actor.py training_step) and is refused where that code's formulas differ in the data (no ±20 ratio clamp,
// gspo ÷ action_mask.sum() unclamped).
import { SettingsError } from '../settings/types.ts';
import { resolveSettings } from '../settings/resolve.ts';
import { trainerRefusal } from '../settings/rules.ts';
import { BEFORE_ED62D0E2, OPENRLHF_RUN, OPENRLHF_SETTINGS, type OpenrlhfConfig, type OpenrlhfRun } from '../settings/openrlhf.ts';
import type { PpoKl, PpoLossParams } from '../../kernels/types.ts';
import { aggregationWeights, packInputs, rowCounts, ppoOutputs, runPpo, withGpuBackend, type Aggregation, type PpoBackend } from './ppo_run.ts';
import type { TrainerLoss, TrainerInputs, TrainerLossOutputs } from './types.ts';
import { openrlhfIs } from '../is_correction.ts';
import { openrlhfIsOverflow, type IsOverflowToken } from './openrlhf_overflow.ts';

/**
 * The window normalisers training_step passes to aggregate_loss: given, or derived as _optimizer_step_loss_norm does.
 * OpenRLHF before ed62d0e2 (`before`) had none: PolicyLoss, the KL and the entropy term were each this micro-batch's
 * masked_mean (ed62d0e2~1 openrlhf/models/loss.py PolicyLoss.forward, openrlhf/trainer/ray/ppo_actor.py
 * training_step), i.e. Σ L·M / Σ M (token level) and the mean over the B rows of Σ_t L·M / n_b (gspo), which
 * aggregate_loss gives with dp 1 and this micro-batch's own counts (an empty gspo row aside: refused by the caller).
 */
function lossBatchInfo(c: TrainerInputs, run: OpenrlhfRun, before: boolean): { dp: number; tokens: number; samples: number } {
  const info = run.loss_batch_info as Record<string, unknown> | null;
  if (before) return { dp: 1, tokens: rowCounts(c.completion_mask, c.B, c.T).reduce((a, b) => a + b, 0), samples: c.B };
  if (info) {
    const num = (k: string): number => {
      const v = info[k];
      if (typeof v !== 'number' || !(v > 0)) throw new SettingsError(`run.loss_batch_info.${k}: expected a positive number, got ${JSON.stringify(v)}`);
      return v;
    };
    return { dp: num('dp_size'), tokens: num('batch_num_tokens'), samples: num('global_batch_size') };
  }
  const n = rowCounts(c.completion_mask, c.B, c.T);
  const gas = run.gradient_accumulation_steps;
  return {
    dp: run.num_processes,
    tokens: (n.reduce((a, b) => a + b, 0) + run.other_tokens) / gas,
    samples: (n.filter((x) => x > 0).length + run.other_samples) / gas,
  };
}

/**
 * aggregate_loss's mode for OpenRLHF's policy term (openrlhf/models/loss.py PolicyLoss.forward): gspo's per-sample
 * mean, else the token mean; OpenRLHF has no setting for it (its KL and entropy terms are token means).
 */
export const openrlhfAggregation = (policyLossType: unknown): 'token-mean' | 'seq-mean-token-mean' => (policyLossType === 'gspo' ? 'seq-mean-token-mean' : 'token-mean');

/** compute_approx_kl (openrlhf/models/utils.py): the estimator (d = logp − base), clamped to ±10. The objective's KL term and `grpo-studio score`'s KL of an OpenRLHF batch. */
export const openrlhfKl = (estimator: PpoKl): Pick<PpoLossParams, 'kl' | 'kl_inner' | 'kl_outer'> => ({ kl: estimator, kl_inner: Infinity, kl_outer: 10 });

/** OpenRLHF's KL term in the actor loss: algo.kl.use_loss with a coefficient above 0 (≤ 0: the term is zero). */
export const openrlhfKlInLoss = (useLoss: unknown, coef: unknown): boolean => useLoss === true && (coef as number) > 0;

/** The objective on any backend (GPU kernels, or their float64 twins in the tests). */
export async function openrlhfObjective(be: PpoBackend, c: TrainerInputs, opts: { backward: boolean }): Promise<TrainerLossOutputs> {
  assertFlatNames(c.config);
  const cfg = resolveSettings<OpenrlhfConfig>(OPENRLHF_SETTINGS, c.config, 'config');
  const run = resolveSettings<OpenrlhfRun>(OPENRLHF_RUN, c.run, 'run');
  const before = cfg.openrlhf_code === BEFORE_ED62D0E2;
  if (before) assertBeforeEd62d0e2(cfg, c);
  const refusal = trainerRefusal('openrlhf', { ...cfg }, { ...run }); // openrlhf_rules.ts: what OpenRLHF cannot run
  if (refusal) throw refusal;
  const { B, T } = c;
  const N = B * T;
  const old = c.old_per_token_logps;
  if (!old) throw new SettingsError('old_per_token_logps (action_log_probs): required');
  const eps = cfg['actor.eps_clip_low_high'] === null ? [cfg['actor.eps_clip'], cfg['actor.eps_clip']] : cfg['actor.eps_clip_low_high']; // [low, high]: the row's length
  const gspo = cfg['actor.policy_loss_type'] === 'gspo';
  const isOn: boolean = cfg['algo.advantage.is_correction_enable'];
  const rollout = c.sampling_per_token_logps;
  if (isOn && !rollout) throw new SettingsError('sampling_per_token_logps (rollout_log_probs): required by algo.advantage.is_correction_enable');
  const klOn = openrlhfKlInLoss(cfg['algo.kl.use_loss'], cfg['algo.kl.init_coef']);
  if (klOn && !c.ref_per_token_logps) throw new SettingsError('ref_per_token_logps (base_action_log_probs): required by algo.kl.use_loss');
  const entCoef: number | null = cfg['actor.entropy_coef'];
  const temperature: number = cfg['rollout.temperature'];
  const info = lossBatchInfo(c, run, before);
  // ppo_train draws a rank's micro-batches from the shuffled replay buffer, and DeepSpeed steps at its accumulation
  // boundary, every train.batch_size ÷ dp samples of a rank (deepspeed.py: gas = train_batch_size ÷ micro ÷ world
  // size): a rank's rows past that window are several optimizer steps, over windows the studio cannot draw.
  const ranks = before ? run.num_processes : info.dp;
  const window = cfg['train.batch_size'] / ranks;
  if (B > window) throw new SettingsError(`config.train.batch_size: ${cfg['train.batch_size']} samples per optimizer step over ${ranks} rank(s), ${window} on each, but the batch holds ${B}: OpenRLHF steps at every ${window} of a rank's samples, drawn shuffled (ppo_actor.py ppo_train), so these rows span several optimizer steps and the studio takes one; convert one step's experiences (every rank's merged: set num_processes 1, their averaged gradient is the whole window's), or give the run's train.batch_size`);
  const M = Float64Array.from(c.completion_mask);
  const token: Aggregation = { mode: 'token-mean', dp: info.dp, tokens: info.tokens, seqs: null, norm: T, scale: 1 };
  const wPg = aggregationWeights(M, B, T, gspo ? { ...token, mode: openrlhfAggregation('gspo'), seqs: info.samples } : token);
  const wAux = aggregationWeights(M, B, T, token);
  const isType = cfg['algo.advantage.is_correction_type'];
  const [lo, hi] = cfg['algo.advantage.is_correction_threshold'];
  const bounds: [number, number] = [lo, hi];
  const isw = isOn && !gspo ? openrlhfIs(old, rollout!, c.completion_mask, B, T, isType, bounds).factor : null;
  // Where OpenRLHF's float32 weight is inf or NaN the kernels take a finite 0 (WGSL promises nothing for
  // non-finite arithmetic); the trainer's non-finite outcome is written in after them (withOverflow).
  const overflow = isw ? openrlhfIsOverflow(old, rollout!, c.completion_mask, B, T, isType, bounds) : [];
  for (const o of overflow) isw![o.b * T + o.t] = 0;
  const klParams = openrlhfKl(cfg['algo.kl.estimator']);
  const kl: PpoKl = klOn ? klParams.kl : 'none';
  const params: PpoLossParams = {
    mode: gspo ? 'gspo_seq' : 'clip',
    kl,
    eps_low: eps[0],
    eps_high: eps[1],
    dual_clip: cfg['actor.dual_clip'] ?? 0,
    ratio_clamp: gspo ? 0 : 20,
    kl_inner: klParams.kl_inner,
    kl_outer: klParams.kl_outer,
    kl_coef: klOn ? cfg['algo.kl.init_coef'] : 0,
    ent_coef: entCoef ?? 0,
    tau_pos: 1,
    tau_neg: 1,
    kl_cov_coef: 0,
    geo_seq_is: false,
  };
  // gspo with IS correction takes its sequence ratio against the rollout log-probs and applies no factor.
  const ratioBase = gspo && isOn ? rollout! : old;
  const inputs = packInputs(N, { old: ratioBase, ref: c.ref_per_token_logps, advantages: c.advantages, isw, sel: null, mask: M, w_pg: wPg, w_aux: wAux }, { isw: 1, sel: 1 });
  const r = await runPpo(be, {
    temperature,
    entropyTemperature: entCoef === null ? temperature : 1,
    backward: opts.backward,
    plan: (logp) => {
      if (before && !gspo) assertWithinRatioClamp(logp, old, M, T);
      return { params, inputs };
    },
  });
  const out = ppoOutputs(r, { T, entropy: entCoef !== null, kl: klOn, loss: true, importance_sampling_ratio: isw, loss_mask: M });
  return overflow.length ? withOverflow(out, overflow, c.advantages, wPg, T) : out;
}

const OLD_CODE = 'OpenRLHF before ed62d0e2 (OpenRLHF/OpenRLHF ed62d0e2~1, whose flat arg names the batch carries)';

/**
 * A loss case's or batch's config keys are the OpenRLHF table's: train_ppo_ray.py's dotted dests, flat. A nested
 * object (the args as hierarchize leaves them) or a name before ed62d0e2 is what a dump's reader
 * (src/io/formats/openrlhf.ts) turns into those; here it is refused saying so, before resolveSettings' generic line.
 */
function assertFlatNames(config: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(config)) {
    if (OPENRLHF_SETTINGS.some((s) => s.name === k)) continue;
    const row = OPENRLHF_SETTINGS.find((s) => s.formerly === k);
    if (row) throw new SettingsError(`config.${k}: OpenRLHF's name before ed62d0e2 for ${row.name}; an OpenRLHF loss case takes today's flat dotted names ("${row.name}"): a dump under the old names is read by convert / step, which keep that the old code wrote it`);
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && OPENRLHF_SETTINGS.some((s) => s.name.startsWith(`${k}.`))) throw new SettingsError(`config.${k}: not an openrlhf setting the studio knows: an OpenRLHF loss case takes flat dotted names (e.g. "${OPENRLHF_SETTINGS.find((s) => s.name.startsWith(`${k}.`))!.name}"), not nested objects`);
    throw new SettingsError(`config.${k}: not an openrlhf setting the studio knows (an OpenRLHF loss case takes train_ppo_ray.py's flat dotted names, e.g. "actor.eps_clip")`);
  }
}

/**
 * What OpenRLHF before ed62d0e2 computes differently from 3c3be62 in the batch's data: refused naming the old code
 * (its use_dynamic_batch and a loss_batch_info given for it are openrlhf_rules.ts'). ed62d0e2~1
 * openrlhf/models/loss.py PolicyLoss.forward divides a gspo row's log-ratio sum by action_mask.sum(dim=-1) without
 * clamp(min=1), so an empty row is 0/0 = NaN (masked_mean's per-row mean is NaN there too).
 */
function assertBeforeEd62d0e2(cfg: OpenrlhfConfig, c: TrainerInputs): void {
  if (cfg['actor.policy_loss_type'] !== 'gspo') return;
  const empty = rowCounts(c.completion_mask, c.B, c.T).findIndex((n) => n === 0);
  if (empty >= 0) throw new SettingsError(`config.actor.policy_loss_type: gspo with sample ${empty} holding no action token: ${OLD_CODE} divides a row's log-ratio sum by action_mask.sum(dim=-1) without today's clamp(min=1) (loss.py PolicyLoss.forward), so that row's ratio, and the loss, are NaN; the studio does not compute 3c3be62's finite value in its place`);
}

/**
 * OpenRLHF before ed62d0e2 forms the ppo ratio as exp(logp − old) (ed62d0e2~1 openrlhf/models/loss.py
 * PolicyLoss.forward); 3c3be62 clamps logp − old to ±20 first. The two agree wherever |logp − old| ≤ 20 at every
 * action token, and that is known once the log-probs are: past it (e.g. exp(40) unclamped, or +inf past 88.7 in
 * float32), the step is refused rather than given the clamped number.
 */
function assertWithinRatioClamp(logp: ArrayLike<number>, old: ArrayLike<number>, M: ArrayLike<number>, T: number): void {
  for (let i = 0; i < logp.length; i++) {
    const d = logp[i] - old[i];
    if (M[i] !== 0 && !(Math.abs(d) <= 20)) throw new SettingsError(`config.openrlhf_code: before-ed62d0e2, and at sample ${Math.floor(i / T)}, token ${i % T} logp − old = ${d}: ${OLD_CODE} takes the ppo ratio as exp(logp − old) without 3c3be62's clamp to ±20 (loss.py PolicyLoss.forward), so its ratio there is exp(${d}), not exp(${Math.sign(d) * 20}); the studio computes only the clamped one and refuses rather than show it as that code's loss`);
  }
}

/**
 * OpenRLHF's outcome at tokens whose IS weight w is NaN or +inf (openrlhf_overflow.ts): the per-token loss is
 * w · L, where L = −min(r·A, clip(r)·A) (or its dual clip) has the sign of −A (r > 0) and is 0 when A = 0,
 * so NaN, or ±inf (NaN again at A = 0: inf · 0); aggregate_loss adds it × the token's weight (0 on padding:
 * NaN again), so the loss is NaN or ±inf. Its gradient is NaN at those tokens (torch gives NaN or ±inf there,
 * by the clip branch; both are non-finite) and, through the softmax, on every logit of their position.
 */
function withOverflow(out: TrainerLossOutputs, overflow: IsOverflowToken[], advantages: ArrayLike<number>, wPg: ArrayLike<number>, T: number): TrainerLossOutputs {
  const loss = Float64Array.from(out.per_token_loss!);
  const ratio = Float64Array.from(out.importance_sampling_ratio!);
  const dlogp = out.dlogp ? Float64Array.from(out.dlogp) : null;
  const dlogits = out.dlogits ? Float64Array.from(out.dlogits) : null;
  const V = dlogits ? dlogits.length / loss.length : 0;
  let total = out.loss;
  for (const o of overflow) {
    const i = o.b * T + o.t;
    ratio[i] = o.weight;
    loss[i] = o.weight * -Math.sign(advantages[i]);
    total += loss[i] * wPg[i];
    if (dlogp) dlogp[i] = NaN;
    dlogits?.fill(NaN, i * V, (i + 1) * V);
  }
  return { ...out, per_token_loss: loss, importance_sampling_ratio: ratio, loss: total, dlogp, dlogits };
}

export const openrlhfLoss: TrainerLoss = (gpu, c, opts) => withGpuBackend(gpu, c, (be) => openrlhfObjective(be, c, opts));
