// importance-sampling-correction: the sequences and tokens a trainer's sampler–trainer correction masks
// (drops from the loss) or truncates (clamps the weight of), with the ratio that decided it. The correction
// is the trainer's own (src/grpo/is_correction.ts for TRL's vLLM correction and OpenRLHF's PolicyLoss,
// src/grpo/settings/verl_rollout.ts for verl's rollout IS weights and rejection sampling), on the batch's
// old_per_token_logps (trainer) and sampling_per_token_logps (sampler), under its config. Row by row, so
// linear in the batch; verl's batch normalisation rescales weights but decides nothing, so it is left out.
import { openrlhfIs, trlVllmIs, type IsCorrection } from '../../grpo/is_correction.ts';
import { rolloutCorrection, type RolloutCorrectionSettings } from '../../grpo/settings/verl_rollout.ts';
import type { OpenrlhfConfig } from '../../grpo/settings/openrlhf.ts';
import type { TrlConfig } from '../../grpo/settings/trl.ts';
import type { GrpoBatch } from '../../io/batch.ts';
import { SettingsError } from '../../grpo/settings/types.ts';
import { settingOf } from '../trainer.ts';
import { trainerOfBatch } from '../../grpo/settings/effective.ts';
import type { DoctorContext, Finding, Rule } from '../types.ts';
import { firstRun, msg, showNumber } from '../util.ts';

const ID = 'importance-sampling-correction';
const SHOWN = 4;

/** One row's inputs: old, sampling and loss mask (completion_mask × tool_mask) over their common length. */
function rowOf(batch: GrpoBatch, b: number): { old: number[]; s: number[]; M: Float64Array } {
  const o = batch.old_per_token_logps![b] ?? [];
  const s = batch.sampling_per_token_logps![b] ?? [];
  const m = batch.completion_mask[b] ?? [];
  const tool = batch.tool_mask?.[b];
  const M = new Float64Array(Math.min(o.length, s.length, m.length));
  for (let t = 0; t < M.length; t++) M[t] = m[t] === 1 && tool?.[t] !== 0 ? 1 : 0;
  return { old: o, s, M };
}

/** How a correction is named in messages: the trainer's setting names for its mode and bounds. */
interface Names {
  mode: string;
  min: string;
  max: string;
}

/** The finding for row b of one correction's decisions, or none when every loss token is inside [min, max]. */
function judge(b: number, c: IsCorrection, M: Float64Array, names: Names): Finding | undefined {
  const lo = c.min ?? -Infinity;
  const hi = c.max ?? Infinity;
  const hit: number[] = [];
  for (let t = 0; t < M.length; t++) if (M[t] === 1 && !(c.raw[t] >= lo && c.raw[t] <= hi)) hit.push(t);
  if (hit.length === 0) return undefined;
  const n = M.reduce((a, m) => a + m, 0);
  const verb = c.action === 'mask' ? 'masked (weight 0)' : 'truncated';
  const side = (r: number) => (r > hi ? `> ${names.max} = ${c.max}` : r < lo ? `< ${names.min} = ${c.min}` : 'NaN');
  let message: string;
  if (c.level === 'sequence') {
    const r = c.raw[hit[0]];
    message = msg`sample ${b}: sequence IS ratio ${r} ${side(r)}: all ${n} loss tokens ${verb}${c.action === 'truncate' ? ` to ${r > hi ? c.max : c.min}` : ''} (${names.mode})`;
  } else {
    let worst = hit[0];
    for (const t of hit) if (Math.abs(Math.log(c.raw[t])) > Math.abs(Math.log(c.raw[worst]))) worst = t;
    const listed = hit.slice(0, SHOWN).map((t) => `${t}: ${showNumber(c.raw[t])}`).join(', ');
    message = msg`sample ${b}: ${hit.length} of ${n} loss tokens ${verb} by the token IS ratio outside [${c.min ?? '−∞'}, ${c.max ?? '∞'}] (${names.mode}) — position: ratio ${listed}${hit.length > SHOWN ? ', …' : ''}; worst ${c.raw[worst]} at position ${worst} (${side(c.raw[worst])})`;
  }
  return {
    rule: ID,
    severity: c.action === 'mask' ? 'warning' : 'info',
    sample: b,
    span: c.level === 'sequence' ? [M.indexOf(1), M.lastIndexOf(1) + 1] : firstRun(hit)!.span,
    message,
    hint: c.action === 'mask'
      ? 'These tokens get no gradient: sampler and trainer disagree on them. A few are expected; many point at a temperature, weights-sync or template mismatch between the inference engine and the trainer.'
      : 'Truncation bounds the weight of off-policy tokens; frequent truncation means the sampler drifts from the trainer (stale weights, different temperature or kernels).',
  };
}

function trl(ctx: DoctorContext): Finding[] {
  const c = ctx.batch;
  const get = <K extends keyof TrlConfig>(k: K) => settingOf<NonNullable<TrlConfig[K]>>(c, 'trl', k) as TrlConfig[K];
  const mode = get('vllm_importance_sampling_mode');
  const max = get('vllm_importance_sampling_cap') ?? get('vllm_importance_sampling_clip_max'); // __post_init__: the deprecated cap wins
  const min = get('vllm_importance_sampling_clip_min');
  const names = { mode: `vllm_importance_sampling_mode = ${mode}`, min: 'vllm_importance_sampling_clip_min', max: 'vllm_importance_sampling_clip_max' };
  // vespo does not multiply its loss by the ratio: it enters the γ weights φ (clamped log), so nothing is zeroed.
  const vespo = c.config?.loss_type === 'vespo';
  const out: Finding[] = [];
  for (let b = 0; b < ctx.B; b++) {
    const { old, s, M } = rowOf(c, b);
    const f = judge(b, trlVllmIs(old, s, M, 1, M.length, mode, min, max), M, names);
    if (f && vespo) out.push({ ...f, severity: 'info', message: msg`${f.message} — loss_type vespo folds this ratio into φ instead of multiplying the loss by it` });
    else if (f) out.push(f);
  }
  return out;
}

function openrlhf(ctx: DoctorContext): Finding[] {
  const c = ctx.batch;
  const get = <K extends keyof OpenrlhfConfig>(k: K) => settingOf<NonNullable<OpenrlhfConfig[K]>>(c, 'openrlhf', k) as OpenrlhfConfig[K];
  // gspo takes its sequence ratio against the rollout log-probs and applies no IS factor.
  if (get('actor.policy_loss_type') === 'gspo') return [];
  const type = get('algo.advantage.is_correction_type');
  const [lo, hi] = get('algo.advantage.is_correction_threshold');
  const names = { mode: `algo.advantage.is_correction_type = ${type}`, min: 'is_correction_threshold[0]', max: 'is_correction_threshold[1]' };
  const out: Finding[] = [];
  for (let b = 0; b < ctx.B; b++) {
    const { old, s, M } = rowOf(c, b);
    const f = M.includes(1) ? judge(b, openrlhfIs(old, s, M, 1, M.length, type, [lo, hi]), M, names) : undefined;
    if (f) out.push(f);
  }
  return out;
}

function verl(ctx: DoctorContext): Finding[] | string {
  const c = ctx.batch;
  if (settingOf<boolean>(c, 'verl', 'bypass_mode')) return 'verl bypass_mode corrects against the current policy’s log-probs, which the batch does not hold';
  const rc: RolloutCorrectionSettings = {
    rollout_is: settingOf(c, 'verl', 'rollout_is'),
    rollout_is_threshold: settingOf(c, 'verl', 'rollout_is_threshold'),
    rollout_is_batch_normalize: false,
    rollout_rs: settingOf(c, 'verl', 'rollout_rs'),
    rollout_rs_threshold: settingOf(c, 'verl', 'rollout_rs_threshold'),
  };
  const out: Finding[] = [];
  for (let b = 0; b < ctx.B; b++) {
    const { old, s, M } = rowOf(c, b);
    if (!M.includes(1)) continue;
    const lr = Float64Array.from(M, (_, t) => old[t] - s[t]);
    const r = rolloutCorrection(lr, M, 1, M.length, rc);
    if (r.raw) {
      const is: IsCorrection = { raw: r.raw, factor: r.weights!, level: rc.rollout_is!, action: 'truncate', min: null, max: rc.rollout_is_threshold };
      const f = judge(b, is, M, { mode: `rollout_is = ${rc.rollout_is}`, min: '', max: 'rollout_is_threshold' });
      if (f) out.push(f);
    }
    const rejected: number[] = [];
    for (let t = 0; t < M.length; t++) if (M[t] === 1 && r.mask[t] === 0) rejected.push(t);
    if (rejected.length === 0) continue;
    let worst = rejected[0];
    for (const t of rejected) if (Math.abs(lr[t]) > Math.abs(lr[worst])) worst = t;
    const n = M.reduce((a, m) => a + m, 0);
    out.push({
      rule: ID,
      severity: 'warning',
      sample: b,
      span: firstRun(rejected)!.span,
      message: msg`sample ${b}: ${rejected.length} of ${n} loss tokens rejected by rollout_rs = ${rc.rollout_rs} (threshold ${rc.rollout_rs_threshold}); largest token ratio exp(old − rollout) ${Math.exp(lr[worst])} at position ${worst}`,
      hint: 'Rejection sampling removes these tokens from response_mask: they get no gradient and leave the token counts.',
    });
  }
  return out;
}

export const importanceSamplingCorrection: Rule = {
  id: ID,
  title: 'Tokens the importance-sampling correction masks or truncates',
  severity: 'warning',
  description: 'Under the trainer’s sampler-mismatch correction (TRL vllm_importance_sampling_*, verl rollout_is / rollout_rs, OpenRLHF is_correction_*), the sequences or tokens whose ratio exp(old − sampling) falls outside the bounds: masked (no gradient) or truncated, with their ratios.',
  seed: 'TRL vllm_importance_sampling_correction (IcePop-style masking); verl rollout_corr_helper; OpenRLHF PolicyLoss',
  check(ctx) {
    const { batch } = ctx;
    const needs = !batch.old_per_token_logps || !batch.sampling_per_token_logps ? 'needs both old_per_token_logps and sampling_per_token_logps' : undefined;
    try {
      switch (trainerOfBatch(batch)) {
        case 'trl':
          return settingOf(batch, 'trl', 'use_vllm') && settingOf(batch, 'trl', 'vllm_importance_sampling_correction') ? (needs ?? trl(ctx)) : [];
        case 'openrlhf':
          return settingOf(batch, 'openrlhf', 'algo.advantage.is_correction_enable') ? (needs ?? openrlhf(ctx)) : [];
        case 'verl': // verl corrects whenever the rollout log-probs exist (decoupled mode)
          return batch.sampling_per_token_logps ? (needs ?? verl(ctx)) : [];
      }
    } catch (e) {
      if (e instanceof SettingsError) return `${e.message}: the correction cannot be reproduced`;
      throw e;
    }
  },
};
