// logged-kl: the KL the trainer logged for this batch against Schulman's estimators recomputed from the
// batch's own log-probs (d = old_per_token_logps − ref_per_token_logps; k1 d, k2 ½d², k3 e^(−d) + d − 1),
// averaged over the loss mask (completion_mask × tool_mask) per token — TRL's `kl` (masked mean of its k3,
// huggingface/trl trl/trainer/grpo_trainer.py `_compute_loss`), verl's `actor/kl_loss` under token-mean
// (verl/trainer/ppo/core_algos.py kl_penalty + agg_loss) — and per sequence, then over sequences —
// OpenRLHF's `kl` (masked_mean(kl, action_mask, dim=-1), then the mean over samples). Each also clamped per token
// to ±10 where a token's value passes it, as verl's low_var_kl (kl_penalty_forward: the log-ratio to ±20, then
// ±10) and every OpenRLHF estimator (openrlhf/models/utils.py compute_approx_kl) log it. Says which estimator and
// average reproduce the logged value, and warns when none does: the log-probs in the batch are then not the ones
// the trainer used (another checkpoint, temperature or step), or the estimator is not the one configured.
import { msg, showNumber } from '../util.ts';
import type { GrpoBatch } from '../../io/batch.ts';
import type { Rule } from '../types.ts';

const ID = 'logged-kl';
/** Where trainers log the policy–reference KL: TRL and OpenRLHF `kl`, verl `actor/kl_loss`. */
const KEYS = ['kl', 'actor/kl_loss'];
const ESTIMATORS = ['k1', 'k2', 'k3'] as const;
/** A logged float32 mean of float32 terms: 0.1 % relative, plus an absolute floor for KL ≈ 0. */
const RTOL = 1e-3;
const ATOL = 1e-7;

/** The trainers' per-token clamp: verl's low_var_kl and OpenRLHF's estimators bound each token's KL to ±10. */
const CLAMP = 10;
/** k1 d, k2 ½d², k3 e^(−d) + d − 1 of one token's d = old − ref; then each clamped (k3's log-ratio first to ±20, as verl). */
function estimates(d: number): { raw: number[]; clamped: number[] } {
  const raw = [d, 0.5 * d * d, Math.expm1(-d) + d];
  const c = Math.max(-20, Math.min(20, d));
  const clamped = [d, raw[1], Math.expm1(-c) + c].map((v) => Math.max(-CLAMP, Math.min(CLAMP, v)));
  return { raw, clamped };
}

/**
 * Mean of k1/k2/k3 over the loss mask: per token (token mean) and per row, then over rows (sequence mean); the
 * clamped estimators too where a token's value passes ±10 (otherwise they are the same numbers).
 */
function means(batch: GrpoBatch): Record<string, number> | undefined {
  const { old_per_token_logps: o, ref_per_token_logps: r, completion_mask: m, tool_mask: tool } = batch;
  const tokSum = new Array<number>(6).fill(0); // k1, k2, k3, then clamped
  const seqSum = new Array<number>(6).fill(0);
  let tokens = 0;
  let rows = 0;
  let clampBinds = false;
  for (let b = 0; b < m.length; b++) {
    const [mb, ob, rb, tb] = [m[b], o![b] ?? [], r![b] ?? [], tool?.[b]];
    const row = new Array<number>(6).fill(0);
    let n = 0;
    const T = Math.min(mb.length, ob.length, rb.length);
    for (let t = 0; t < T; t++) {
      const d = ob[t] - rb[t];
      if (mb[t] !== 1 || tb?.[t] === 0 || !Number.isFinite(d)) continue;
      const { raw, clamped } = estimates(d);
      [...raw, ...clamped].forEach((v, j) => (row[j] += v));
      clampBinds ||= raw.some((v, j) => v !== clamped[j]);
      n++;
    }
    if (n === 0) continue;
    row.forEach((v, j) => ((tokSum[j] += v), (seqSum[j] += v / n)));
    tokens += n;
    rows++;
  }
  if (tokens === 0) return undefined;
  const out: Record<string, number> = {};
  const names = [...ESTIMATORS, ...(clampBinds ? ESTIMATORS.map((k) => `${k} clamped ±${CLAMP}`) : [])];
  names.forEach((k, j) => ((out[`${k} token mean`] = tokSum[j] / tokens), (out[`${k} sequence mean`] = seqSum[j] / rows)));
  return out;
}


export const loggedKl: Rule = {
  id: ID,
  title: 'Logged KL versus k1 / k2 / k3 of the batch',
  severity: 'warning',
  description: 'The KL the trainer logged (metrics.kl, verl metrics["actor/kl_loss"]) compared with the mean k1, k2 and k3 of old vs reference log-probs over the loss mask (token mean and sequence mean; also clamped to ±10 per token, as verl\'s low_var_kl and OpenRLHF log them): which estimator it is, or a warning when none matches.',
  seed: 'TRL logs k3 as "kl"; OpenRLHF algo.kl.estimator (clamped ±10); verl kl_loss_type (low_var_kl = k3, clamped ±10)',
  check(ctx) {
    const { batch } = ctx;
    const key = KEYS.find((k) => typeof batch.metrics?.[k] === 'number');
    if (key === undefined) return 'no logged KL in the batch (metrics.kl or metrics["actor/kl_loss"])';
    if (!batch.old_per_token_logps || !batch.ref_per_token_logps) return 'needs old_per_token_logps and ref_per_token_logps';
    const logged = batch.metrics![key];
    const m = means(batch);
    if (!m) return 'no loss-mask token with finite old and reference log-probs';
    const all = Object.entries(m);
    const matches = all.filter(([, v]) => Math.abs(logged - v) <= ATOL + RTOL * Math.abs(v)).sort(([, a], [, b]) => Math.abs(logged - a) - Math.abs(logged - b));
    const table = all.map(([k, v]) => `${k} ${showNumber(v)}`).join(', ');
    if (matches.length === 0) {
      return [{
        rule: ID, severity: 'warning', field: `metrics.${key}`,
        message: msg`logged ${key} = ${logged} matches none of the estimators over the loss mask (${table})`,
        hint: 'The log-probs in the batch are not the ones the trainer logged KL from (another step, checkpoint or temperature), or the trainer averaged over other tokens (TRL logs one mean over every rank’s loss-mask tokens, and the mean of those values over the logging steps; a single rank’s batch holds part of them).',
      }];
    }
    const names = matches.map(([k]) => k);
    return [{
      rule: ID, severity: 'info', field: `metrics.${key}`,
      message: msg`logged ${key} = ${logged} is ${names[0]} (${matches[0][1]})${names.length > 1 ? `; also within ${RTOL * 100} %: ${names.slice(1).join(', ')}` : ''} — over the loss mask: ${table}`,
      hint: names.length > 1 ? 'Several estimators agree at this KL size (k2 ≈ k3 for small log-ratios): the logged value cannot tell them apart.' : 'The logged KL follows from the batch’s old and reference log-probs.',
    }];
  },
};
