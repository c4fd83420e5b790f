// What a sampler–trainer correction would do on this batch: the corrections the trainers offer (TRL's vLLM
// importance sampling, verl's rollout IS weights and rejection sampling, OpenRLHF's tis / icepop /
// seq-mask-tis), each as the config values that turn it on in its trainer's own names, and for each the
// tokens it masks or truncates, the effective sample size of its weights and — on the GPU, by the trainer's
// own objective (trainers/from_logps.ts) — the loss and per-token gradient with it on and off. The explorer's
// live controls edit the same rows (`controls`), so a control is a setting the trainer's table checks.
// Decisions are the trainers' rules on the host in float64 (is_correction.ts, settings/verl_rollout.ts, the
// code the Doctor's importance-sampling-correction rule and the objectives use); the loss is taken at the
// first pass of the update, policy = the trainer side, so the PPO ratio is 1 and everything that moves is
// the correction.
import type { Gpu } from '../../gpu/context.ts';
import type { GrpoBatch } from '../../io/batch.ts';
import { InputError } from '../../io/validate.ts';
import { padBatch } from '../batch.ts';
import { openrlhfIs, trlVllmIs, type IsCorrection } from '../is_correction.ts';
import { effectiveSettings, fileLayer, settingOf, trainerOfBatch, type EffectiveSettings, type SettingsLayer } from '../settings/effective.ts';
import { OPENRLHF_SETTINGS, type OpenrlhfConfig } from '../settings/openrlhf.ts';
import { trainerRefusal } from '../settings/rules.ts';
import { specOf, type SettingsTable } from '../settings/table.ts';
import { TRL_SETTINGS, type TrlConfig } from '../settings/trl.ts';
import type { TrainerId } from '../settings/types.ts';
import { VERL_SETTINGS } from '../settings/verl.ts';
import { stepConfigOf, trainerObjectiveOf } from '../step_config.ts';
import { readsReference, trainerInputs, type PreparedObjective } from '../step_objective.ts';
import { rewardAdvantages } from '../step_prepare.ts';
import { trainerLossFromLogps } from '../trainers/from_logps.ts';
import type { TrainerLossOutputs } from '../trainers/types.ts';
import { rolloutCorrection, type RolloutCorrectionSettings } from '../settings/verl_rollout.ts';

/** One correction the explorer offers. */
export interface Correction {
  id: string;
  trainer: TrainerId;
  label: string;
  /** The config values, in the trainer's names, that turn it on (over the batch's own settings). */
  settings: Readonly<Record<string, unknown>>;
  /** Config rows of the trainer's table the page offers as live controls. */
  controls: readonly string[];
  /** Where the trainer implements it (repository, path, function). */
  source: string;
}

const TRL_SOURCE = 'huggingface/trl trl/trainer/grpo_trainer.py _generate_and_score_completions (f2cd577)';
const VERL_HELPER = 'volcengine/verl verl/trainer/ppo/rollout_corr_helper.py';
const VERL_PRESETS = 'volcengine/verl verl/trainer/config/algorithm.py RolloutCorrectionConfig';
const OPENRLHF_SOURCE = 'OpenRLHF/OpenRLHF openrlhf/models/loss.py PolicyLoss (3c3be62)';

/** verl's decoupled-mode presets of the IS level (RolloutCorrectionConfig.decoupled_token_is / decoupled_seq_is). */
const VERL_IS_PRESETS: Record<string, string> = { token: 'decoupled_token_is', sequence: 'decoupled_seq_is' };
/**
 * verl's decoupled-mode rejection-sampling presets and their default thresholds: the geometric-mean filter
 * (decoupled_geo_rs: seq_mean_k1 within ±0.1 %) and the K3 filter (decoupled_k3_rs: mean k3 ≤ 0.01). The
 * table's rollout_rs_threshold has no default (null), so the thresholds are the presets'.
 */
const VERL_RS_PRESETS = [
  { preset: 'decoupled_geo_rs', rollout_rs: 'seq_mean_k1', rollout_rs_threshold: '0.999_1.001' },
  { preset: 'decoupled_k3_rs', rollout_rs: 'seq_mean_k3', rollout_rs_threshold: '0.01' },
];

/** The trainer with no correction: loss_off's settings (verl corrects whenever rollout log-probs exist, by default per sequence). */
const OFF: Record<TrainerId, Record<string, unknown>> = {
  trl: { vllm_importance_sampling_correction: false },
  verl: { rollout_is: null, rollout_rs: null },
  openrlhf: { 'algo.advantage.is_correction_enable': false },
};

const valuesOf = (table: SettingsTable, name: string): readonly string[] => specOf(table, name).values ?? [];

/** id and label from the values that tell a correction from the trainer's others (switches and nulls aside). */
function correction(trainer: TrainerId, settings: Record<string, unknown>, controls: readonly string[], source: string): Correction {
  const named = Object.entries(settings).filter(([, v]) => typeof v !== 'boolean' && v !== null);
  return { id: `${trainer}:${named.map(([, v]) => v).join(':')}`, trainer, label: `${trainer} ${named.map(([k, v]) => `${k} = ${v}`).join(', ')}`, settings, controls, source };
}

/** Every correction the explorer offers, default variants side by side. */
export const CORRECTIONS: readonly Correction[] = [
  ...valuesOf(TRL_SETTINGS, 'vllm_importance_sampling_mode').map((mode) =>
    correction('trl', { use_vllm: true, vllm_importance_sampling_correction: true, vllm_importance_sampling_mode: mode }, ['vllm_importance_sampling_mode', 'vllm_importance_sampling_clip_min', 'vllm_importance_sampling_clip_max'], TRL_SOURCE),
  ),
  ...valuesOf(VERL_SETTINGS, 'rollout_is').map((level) =>
    correction('verl', { rollout_is: level, rollout_rs: null }, ['rollout_is_threshold', 'rollout_is_batch_normalize'], `${VERL_HELPER} compute_rollout_correction_weights; ${VERL_PRESETS}.${VERL_IS_PRESETS[level]}`),
  ),
  ...VERL_RS_PRESETS.map((p) =>
    correction('verl', { rollout_is: null, rollout_rs: p.rollout_rs, rollout_rs_threshold: p.rollout_rs_threshold }, ['rollout_rs', 'rollout_rs_threshold'], `${VERL_HELPER} compute_rollout_rejection_mask; ${VERL_PRESETS}.${p.preset}`),
  ),
  ...valuesOf(OPENRLHF_SETTINGS, 'algo.advantage.is_correction_type').map((type) =>
    correction('openrlhf', { 'algo.advantage.is_correction_enable': true, 'algo.advantage.is_correction_type': type }, ['algo.advantage.is_correction_threshold'], OPENRLHF_SOURCE),
  ),
];

/** How the per-token gradient weight (∂loss/∂logp) moves when the correction is turned on. */
export interface GradientChange {
  /** Loss tokens compared. */
  tokens: number;
  /** mean and max over loss tokens of |dlogp_on − dlogp_off|. */
  mean_abs: number;
  max_abs: number;
  /** dlogp_on / dlogp_off over the loss tokens where dlogp_off ≠ 0 (n of them). */
  factor: { n: number; min: number; mean: number; max: number };
}

/** One correction's effect on the batch. Counts are over loss tokens (completion × tool mask, as the trainer reads them). */
export interface CorrectionEffect {
  id: string;
  trainer: TrainerId;
  label: string;
  /** The correction rows as resolved (batch settings, then the correction's, then the edits). */
  settings: Record<string, unknown>;
  /** Token or sequence decisions; null where the settings leave the correction off. */
  level: 'token' | 'sequence' | null;
  tokens: number | null;
  /** Loss tokens given weight 0 (mask modes, rejection sampling). */
  masked: number | null;
  /** Loss tokens whose weight was clamped to a bound. */
  truncated: number | null;
  /** Rows with loss tokens of which every one is masked. */
  rows_masked: number | null;
  /** (Σw)² / (n·Σw²) over the n loss tokens, w the correction weight. */
  ess: number | null;
  mean_weight: number | null;
  /** The trainer's loss without the correction and with it, at ratio 1 (policy = trainer side). */
  loss_off: number | null;
  loss_on: number | null;
  gradient: GradientChange | null;
  /** Why there is no loss without an error: the batch holds no advantages the objective can take. */
  loss_note: string | null;
  /**
   * What the trainer refuses (its SettingsError, one line): the correction's settings (then no count either),
   * or its objective on this batch (counts kept, no loss).
   */
  error: string | null;
  /** Extra settings a trainer's rule asked for where the batch is another trainer's (TrainerRule.offer). */
  assumed: Record<string, unknown> | null;
  /** (B, T) per token: the correction weight w, NaN off the loss mask; for a heat overlay (not for JSON). */
  weights: Float64Array | null;
  /** (B, T) per token: dlogp_on / dlogp_off, NaN where undefined; for a heat overlay (not for JSON). */
  gradient_factor: Float64Array | null;
  /** Padded width of the per-token arrays. */
  T: number;
}

/** The trainer's decisions of a correction over loss mask M. */
interface Decisions {
  level: 'token' | 'sequence' | null;
  w: Float64Array; // (B, T) the weight, 1 where uncorrected
  masked: Uint8Array; // (B, T)
  truncated: Uint8Array; // (B, T)
}

const outside = (r: number, lo: number | null, hi: number | null): boolean => !(r >= (lo ?? -Infinity) && r <= (hi ?? Infinity));

function fromIs(c: IsCorrection, M: ArrayLike<number>): Decisions {
  const n = M.length;
  const masked = new Uint8Array(n);
  const truncated = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (!M[i] || !outside(c.raw[i], c.min, c.max)) continue;
    if (c.action === 'mask') masked[i] = 1;
    else truncated[i] = 1;
  }
  return { level: c.level, w: Float64Array.from(c.factor), masked, truncated };
}

const uncorrected = (n: number): Decisions => ({ level: null, w: new Float64Array(n).fill(1), masked: new Uint8Array(n), truncated: new Uint8Array(n) });

/**
 * The correction the resolved settings turn on, on trainer log-probs `old` and sampler log-probs `sampling`
 * (B, T): the rules the objectives apply (TRL's cap wins over clip_max as its __post_init__ does; OpenRLHF's
 * gspo takes no IS factor; verl's weights enter the loss except in bypass mode with ppo_clip).
 */
function decisions(s: EffectiveSettings, old: Float64Array, sampling: Float64Array, M: Float64Array, B: number, T: number): Decisions {
  const get = <V>(name: string) => settingOf(s, 'config', name).value as V;
  switch (s.trainer) {
    case 'trl': {
      if (!get<boolean>('use_vllm') || !get<boolean>('vllm_importance_sampling_correction')) return uncorrected(B * T);
      const max = get<number | null>('vllm_importance_sampling_cap') ?? get<number | null>('vllm_importance_sampling_clip_max');
      return fromIs(trlVllmIs(old, sampling, M, B, T, get<TrlConfig['vllm_importance_sampling_mode']>('vllm_importance_sampling_mode'), get<number | null>('vllm_importance_sampling_clip_min'), max), M);
    }
    case 'openrlhf': {
      if (!get<boolean>('algo.advantage.is_correction_enable') || get<string>('actor.policy_loss_type') === 'gspo') return uncorrected(B * T);
      const [lo, hi] = get<number[]>('algo.advantage.is_correction_threshold');
      return fromIs(openrlhfIs(old, sampling, M, B, T, get<OpenrlhfConfig['algo.advantage.is_correction_type']>('algo.advantage.is_correction_type'), [lo, hi]), M);
    }
    case 'verl': {
      const rc: RolloutCorrectionSettings = {
        rollout_is: get('rollout_is'),
        rollout_is_threshold: get('rollout_is_threshold'),
        rollout_is_batch_normalize: get('rollout_is_batch_normalize'),
        rollout_rs: get('rollout_rs'),
        rollout_rs_threshold: get('rollout_rs_threshold'),
      };
      const r = rolloutCorrection(Float64Array.from(old, (o, i) => o - sampling[i]), M, B, T, rc);
      const weighs = r.weights !== null && !(get<boolean>('bypass_mode') && get<string>('loss_type') === 'ppo_clip');
      const d = uncorrected(B * T);
      for (let i = 0; i < B * T; i++) {
        if (!M[i]) continue;
        d.w[i] = (weighs ? r.weights![i] : 1) * r.mask[i];
        if (r.mask[i] === 0) d.masked[i] = 1;
        else if (weighs && r.raw![i] > rc.rollout_is_threshold) d.truncated[i] = 1;
      }
      const levels = [...(weighs ? [rc.rollout_is] : []), ...(rc.rollout_rs ?? '').split(',').map((o) => o.trim()).filter(Boolean).map((o) => (o.startsWith('token') ? 'token' : 'sequence'))];
      d.level = levels.length === 0 ? null : levels.includes('sequence') ? 'sequence' : 'token';
      return d;
    }
  }
}

/** The settings of `trainer` for this batch under `layers`; a rule's offer is taken only for another trainer's batch. */
function resolve(batch: GrpoBatch, name: string, trainer: TrainerId, layers: SettingsLayer[]): { settings: EffectiveSettings; assumed: Record<string, unknown> | null } {
  const base = [fileLayer(batch, name), ...layers];
  let settings = effectiveSettings(trainer, base);
  let o = trainerObjectiveOf(settings);
  let refusal = trainerRefusal(trainer, o.config, o.run);
  // A TRL batch holds nothing of verl's run shape (its micro-batch size): the rule's own offer stands in, named.
  const assumed = refusal?.offer && trainer !== trainerOfBatch(batch) ? refusal.offer : null;
  if (assumed) {
    settings = effectiveSettings(trainer, [fileLayer(batch, name), { origin: 'edited', label: 'assumed', config: assumed }, ...layers]);
    o = trainerObjectiveOf(settings);
    refusal = trainerRefusal(trainer, o.config, o.run);
  }
  if (refusal) throw refusal;
  return { settings, assumed };
}

const isSettingsError = (e: unknown): e is Error => e instanceof Error && e.name === 'SettingsError';

/** (B, T) float64 of ragged rows, 0 on padding. */
function padded64(rows: readonly ArrayLike<number>[], B: number, T: number): Float64Array {
  const out = new Float64Array(B * T);
  rows.forEach((r, b) => {
    for (let t = 0; t < r.length; t++) out[b * T + t] = r[t];
  });
  return out;
}

/** The advantages the objective takes: per row, per token (verl / OpenRLHF), or why there are none. */
interface Advantages {
  rows: number[];
  perToken: Float32Array | null;
  note: string | null;
}

function advantagesOf(batch: GrpoBatch, s: EffectiveSettings, B: number, T: number): Advantages {
  const none = (note: string): Advantages => ({ rows: new Array<number>(B).fill(0), perToken: null, note });
  // A batch's per-token advantages are the trainer's own (a constant row is read into `advantages`).
  if (batch.per_token_advantages && s.trainer !== 'trl') return { rows: new Array<number>(B).fill(0), perToken: Float32Array.from(padded64(batch.per_token_advantages, B, T)), note: null };
  if (batch.advantages) return { rows: batch.advantages, perToken: null, note: null };
  if (batch.per_token_advantages) return none('per_token_advantages vary inside a sequence: TRL takes one advantage per sequence');
  try {
    // As the step takes them: the group advantages of the rewards under the batch's advantage settings.
    return { rows: Array.from(rewardAdvantages(batch, batch.num_generations, batch.group_ids, stepConfigOf(s, T, { refuse: false })).advantages), perToken: null, note: null };
  } catch (e) {
    return none(`no advantages: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * What each variant (a CORRECTIONS id, with edits to its rows) does on the batch: decisions and weights on the
 * host, loss and gradient with the correction on and off by the trainer's objective on the GPU. The sampler
 * side is the batch's sampling_per_token_logps; the trainer side `trainerLogps` (B, C_i) — the dump's
 * old_per_token_logps or a recompute. Entropy terms see entropy 0 on both sides (the log-probs are all that
 * is scored): they do not change with the correction. A setting the trainer refuses is the effect's `error`.
 */
export async function correctionEffects(
  gpu: Gpu,
  batch: GrpoBatch,
  trainerLogps: ArrayLike<number>[],
  variants: { id: string; edits?: Record<string, unknown> }[],
  opts: {
    name?: string;
    /**
     * The reference a step takes when the batch holds no ref_per_token_logps (ragged like completion_ids): a frozen
     * copy of the trainer's weights — the trainer side itself (the default), or with an adapter the base without it,
     * as `grpo-studio step` without --ref-model (src/cli/step.ts). An objective that reads a reference then runs
     * against it, and the effect's `assumed` says so.
     */
    reference?: readonly ArrayLike<number>[];
  } = {},
): Promise<CorrectionEffect[]> {
  const name = opts.name ?? 'batch';
  const sampling = batch.sampling_per_token_logps;
  if (!sampling) throw new InputError(`${name}: field "sampling_per_token_logps" is absent: a correction weighs the trainer's log-probs against the sampler's`);
  batch.completion_ids.forEach((row, b) => {
    if (trainerLogps[b]?.length !== row.length) throw new InputError(`${name}: the trainer log-probs of sample ${b} hold ${trainerLogps[b]?.length ?? 0} values for ${row.length} completion tokens`);
  });
  // The trainer side is old_per_token_logps and the policy's: ratio 1, the first pass of the update.
  const padded = padBatch({ ...batch, old_per_token_logps: trainerLogps.map((r) => Array.from(r)) });
  const { B, C: T } = padded;
  const old = padded64(trainerLogps, B, T);
  const samp = padded64(sampling, B, T);
  const scoredLogps = Float32Array.from(old);
  const entropy = new Float32Array(B * T);
  const frozen = padded.ref_per_token_logps ? null : Float32Array.from(opts.reference ? padded64(opts.reference, B, T) : old);

  /** Whether `s`'s objective reads a reference the batch does not hold (the frozen copy stands in). */
  const standsIn = (s: EffectiveSettings) => frozen !== null && readsReference(0, trainerObjectiveOf(s));
  const prepare = (s: EffectiveSettings): { p: PreparedObjective; adv: Advantages } => {
    const adv = advantagesOf(batch, s, B, T);
    const temperature = settingOf(s, 'config', s.trainer === 'openrlhf' ? 'rollout.temperature' : 'temperature').value as number;
    const u = { padded, per_token_logps: scoredLogps, per_token_entropy: entropy, advantages: adv.rows, ref_per_token_logps: padded.ref_per_token_logps ?? (standsIn(s) ? frozen : null), old_per_token_logps: padded.old_per_token_logps!, temperature };
    const p = trainerInputs(u, trainerObjectiveOf(s));
    if (adv.perToken) p.x.advantages = adv.perToken;
    return { p, adv };
  };
  const offRuns = new Map<string, Promise<TrainerLossOutputs>>();

  const effectOf = async (v: { id: string; edits?: Record<string, unknown> }): Promise<CorrectionEffect> => {
    const c = CORRECTIONS.find((x) => x.id === v.id);
    if (!c) throw new Error(`no correction "${v.id}" (one of ${CORRECTIONS.map((x) => x.id).join(', ')})`);
    const edits: SettingsLayer[] = v.edits ? [{ origin: 'edited', label: 'edits', config: v.edits }] : [];
    const effect: CorrectionEffect = {
      id: c.id, trainer: c.trainer, label: c.label, settings: {}, level: null, tokens: null, masked: null, truncated: null, rows_masked: null, ess: null, mean_weight: null,
      loss_off: null, loss_on: null, gradient: null, loss_note: null, error: null, assumed: null, weights: null, gradient_factor: null, T,
    };
    let on: EffectiveSettings;
    let off: EffectiveSettings;
    let d: Decisions;
    let M: Float64Array;
    let prepared: { p: PreparedObjective; adv: Advantages };
    try {
      const r = resolve(batch, name, c.trainer, [{ origin: 'edited', label: c.label, config: { ...c.settings } }, ...edits]);
      on = r.settings;
      effect.assumed = standsIn(on) ? { ...r.assumed, reference: `a frozen copy of the ${opts.reference ? 'base without the adapter' : "trainer's weights"} (the batch holds no ref_per_token_logps), as grpo-studio step without --ref-model` } : r.assumed;
      off = resolve(batch, name, c.trainer, [...edits, { origin: 'edited', label: 'correction off', config: OFF[c.trainer] }]).settings;
      effect.settings = Object.fromEntries([...new Set([...Object.keys(c.settings), ...c.controls])].map((k) => [k, settingOf(on, 'config', k).value]));
      prepared = prepare(on);
      const x = prepared.p.x;
      // The loss tokens as this trainer reads them (TRL: completion × tool mask, its truncation mask applied).
      M = Float64Array.from(x.completion_mask, (m, i) => m * (x.tool_mask ? x.tool_mask[i] : 1));
      d = decisions(on, old, samp, M, B, T);
    } catch (e) {
      if (!isSettingsError(e)) throw e;
      effect.error = e.message;
      return effect;
    }
    let n = 0;
    let sw = 0;
    let sw2 = 0;
    let masked = 0;
    let truncated = 0;
    let rowsMasked = 0;
    const weights = new Float64Array(B * T).fill(NaN);
    for (let b = 0; b < B; b++) {
      let rowN = 0;
      let rowMasked = 0;
      for (let t = 0; t < T; t++) {
        const i = b * T + t;
        if (!M[i]) continue;
        const w = d.w[i];
        weights[i] = w;
        [n, sw, sw2, rowN] = [n + 1, sw + w, sw2 + w * w, rowN + 1];
        masked += d.masked[i];
        rowMasked += d.masked[i];
        truncated += d.truncated[i];
      }
      if (rowN > 0 && rowMasked === rowN) rowsMasked++;
    }
    Object.assign(effect, { level: d.level, tokens: n, masked, truncated, rows_masked: rowsMasked, ess: n && sw2 > 0 ? (sw * sw) / (n * sw2) : n ? 0 : null, mean_weight: n ? sw / n : null, weights });
    if (prepared.adv.note) {
      effect.loss_note = prepared.adv.note;
      return effect;
    }
    try {
      const key = `${c.trainer} ${JSON.stringify(v.edits ?? {})}`;
      if (!offRuns.has(key)) {
        const po = prepare(off).p;
        offRuns.set(key, trainerLossFromLogps(gpu, po.x, po.scored));
      }
      const [lossOff, lossOn] = [await offRuns.get(key)!, await trainerLossFromLogps(gpu, prepared.p.x, prepared.p.scored)];
      if (!lossOff.dlogp || !lossOn.dlogp) throw new Error(`${c.trainer}: the objective formed no per-token gradient`);
      effect.loss_off = lossOff.loss;
      effect.loss_on = lossOn.loss;
      Object.assign(effect, gradientChange(lossOff.dlogp, lossOn.dlogp, M));
    } catch (e) {
      if (!isSettingsError(e)) throw e;
      effect.error = e.message;
    }
    return effect;
  };

  const out: CorrectionEffect[] = [];
  for (const v of variants) out.push(await effectOf(v));
  return out;
}

/** dlogp on against off over the loss tokens M. */
function gradientChange(off: ArrayLike<number>, on: ArrayLike<number>, M: ArrayLike<number>): { gradient: GradientChange; gradient_factor: Float64Array } {
  const factor = new Float64Array(M.length).fill(NaN);
  let [tokens, sumAbs, maxAbs, n, sum, min, max] = [0, 0, 0, 0, 0, Infinity, -Infinity];
  for (let i = 0; i < M.length; i++) {
    if (!M[i]) continue;
    const delta = Math.abs(on[i] - off[i]);
    [tokens, sumAbs, maxAbs] = [tokens + 1, sumAbs + delta, Math.max(maxAbs, delta)];
    if (off[i] === 0) continue;
    const f = on[i] / off[i];
    factor[i] = f;
    [n, sum, min, max] = [n + 1, sum + f, Math.min(min, f), Math.max(max, f)];
  }
  return {
    gradient: { tokens, mean_abs: tokens ? sumAbs / tokens : 0, max_abs: maxAbs, factor: { n, min: n ? min : NaN, mean: n ? sum / n : NaN, max: n ? max : NaN } },
    gradient_factor: factor,
  };
}
