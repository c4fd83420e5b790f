// OpenRLHF's actor objective on one micro-batch (OpenRLHF/OpenRLHF 3c3be62), from its own argument names:
// ActorPPOTrainer.training_step (openrlhf/trainer/ray/ppo_actor.py: actor_loss + kl_ctl·kl_loss −
// entropy_coef·entropy_loss), PolicyLoss.forward and aggregate_loss (openrlhf/models/loss.py: ppo / gspo,
// dual clip, vLLM IS correction tis / icepop / seq-mask-tis), compute_approx_kl (openrlhf/models/utils.py,
// clamped ±10) and the optimizer-step normalisers of openrlhf/utils/loss_utils.py _optimizer_step_loss_norm.
// Log-probs are × action_mask (0 on padding); the entropy is that of the untempered logits (Actor.forward).
// Where OpenRLHF's float32 IS weight overflows (openrlhf_overflow.ts) the outputs carry its NaN / inf, not a
// finite stand-in; the combinations OpenRLHF cannot run are refused first (settings/openrlhf_rules.ts).
import { SettingsError } from '../settings/types.ts';
import { resolveSettings } from '../settings/resolve.ts';
import { trainerRefusal } from '../settings/rules.ts';
import { OPENRLHF_RUN, OPENRLHF_SETTINGS, type OpenrlhfConfig, type OpenrlhfRun } from '../settings/openrlhf.ts';
import type { PpoKl, PpoLossParams } from '../../kernels/types.ts';
import { aggregationWeights, packInputs, rowCounts, ppoOutputs, runPpo, withGpuBackend, type Aggregation, type PpoBackend } from './ppo_run.ts';
import type { TrainerLoss, TrainerInputs, TrainerLossOutputs } from './types.ts';
import { openrlhfIs } from '../is_correction.ts';
import { openrlhfIsOverflow, type IsOverflowToken } from './openrlhf_overflow.ts';

/** The window normalisers training_step passes to aggregate_loss: given, or derived as _optimizer_step_loss_norm does. */
function lossBatchInfo(c: TrainerInputs, run: OpenrlhfRun): { dp: number; tokens: number; samples: number } {
  const info = run.loss_batch_info as Record<string, unknown> | null;
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

/** The objective on any backend (GPU kernels, or their float64 twins in the tests). */
/** OpenRLHF's KL term in the actor loss: algo.kl.use_loss with a coefficient above 0 (≤ 0: the term is zero). */
export const openrlhfKlInLoss = (useLoss: unknown, coef: unknown): boolean => useLoss === true && (coef as number) > 0;

export async function openrlhfObjective(be: PpoBackend, c: TrainerInputs, opts: { backward: boolean }): Promise<TrainerLossOutputs> {
  const cfg = resolveSettings<OpenrlhfConfig>(OPENRLHF_SETTINGS, c.config, 'config');
  const run = resolveSettings<OpenrlhfRun>(OPENRLHF_RUN, c.run, 'run');
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
  const info = lossBatchInfo(c, run);
  // ppo_train draws a rank's micro-batches from the shuffled replay buffer, and DeepSpeed steps at its accumulation
  // boundary, every train.batch_size ÷ dp samples of a rank (deepspeed.py: gas = train_batch_size ÷ micro ÷ world
  // size): a rank's rows past that window are several optimizer steps, over windows the studio cannot draw.
  const window = cfg['train.batch_size'] / info.dp;
  if (B > window) throw new SettingsError(`config.train.batch_size: ${cfg['train.batch_size']} samples per optimizer step over ${info.dp} rank(s), ${window} on each, but the batch holds ${B}: OpenRLHF steps at every ${window} of a rank's samples, drawn shuffled (ppo_actor.py ppo_train), so these rows span several optimizer steps and the studio takes one; convert one step's experiences (every rank's merged: set num_processes 1, their averaged gradient is the whole window's), or give the run's train.batch_size`);
  const M = Float64Array.from(c.completion_mask);
  const token: Aggregation = { mode: 'token-mean', dp: info.dp, tokens: info.tokens, seqs: null, norm: T, scale: 1 };
  const wPg = aggregationWeights(M, B, T, gspo ? { ...token, mode: 'seq-mean-token-mean', seqs: info.samples } : token);
  const wAux = aggregationWeights(M, B, T, token);
  const isType = cfg['algo.advantage.is_correction_type'];
  const [lo, hi] = cfg['algo.advantage.is_correction_threshold'];
  const bounds: [number, number] = [lo, hi];
  const isw = isOn && !gspo ? openrlhfIs(old, rollout!, c.completion_mask, B, T, isType, bounds).factor : null;
  // Where OpenRLHF's float32 weight is inf or NaN the kernels take a finite 0 (WGSL promises nothing for
  // non-finite arithmetic); the trainer's non-finite outcome is written in after them (withOverflow).
  const overflow = isw ? openrlhfIsOverflow(old, rollout!, c.completion_mask, B, T, isType, bounds) : [];
  for (const o of overflow) isw![o.b * T + o.t] = 0;
  const kl: PpoKl = klOn ? cfg['algo.kl.estimator'] : 'none';
  const params: PpoLossParams = {
    mode: gspo ? 'gspo_seq' : 'clip',
    kl,
    eps_low: eps[0],
    eps_high: eps[1],
    dual_clip: cfg['actor.dual_clip'] ?? 0,
    ratio_clamp: gspo ? 0 : 20,
    kl_inner: Infinity,
    kl_outer: 10,
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
    plan: () => ({ params, inputs }),
  });
  const out = ppoOutputs(r, { entropy: entCoef !== null, kl: klOn, loss: true, importance_sampling_ratio: isw, loss_mask: M });
  return overflow.length ? withOverflow(out, overflow, c.advantages, wPg, T) : out;
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
