// Group-relative advantages, as TRL's GRPOTrainer computes them (and verl's variant):
//   r_i = nansum_f(rewards_per_func[i, f] · reward_weights[f])
//   A_i = r_i − mean_group(r), divided by (std + ε) unless scale_rewards = "none"
// std is Bessel-corrected, per group ("group") or over the whole batch ("batch"). TRL: ε = 1e-4; verl:
// ε = 1e-6 and a single-sample group gets mean 0, std 1 (TRL: std 0, so A = 0). A group whose std is ~0 (TRL: isclose(std, 0))
// gets A = 0 everywhere, so it contributes nothing but the KL term to the loss — reported per group.
// OpenRLHF (group_norm: ε = 1e-9; dr_grpo: r − mean) clamps the result to its reward.clip_range.
// A NaN reward is TRL's unscorable row (every reward function returned None): TRL leaves it out of the
// group statistics (nanmean / nanstd) and gives it advantage 0; verl has no such rows (NaN propagates).
// Everything is float64 so the result is a reference for the float32 values a trainer wrote.
import type { GrpoBatch, ScaleRewards } from '../io/batch.ts';
import { OPENRLHF_SETTINGS } from './settings/openrlhf.ts';
import { groupFormulaOf } from './settings/group_formula.ts';
import { checkSetting, specOf } from './settings/table.ts';
import { VERL_SETTINGS } from './settings/verl.ts';
import type { VERL_ADV_ESTIMATORS } from './settings/verl_advantages.ts';

export type AdvantageEstimator = 'trl' | 'verl' | 'openrlhf';

export interface AdvantageOptions {
  num_generations: number;
  scale_rewards?: ScaleRewards; // default "group"
  estimator?: AdvantageEstimator; // default "trl"
  /** Rows of each group (from group labels); default: groups of num_generations consecutive rows. */
  groups?: readonly (readonly number[])[];
  /** [low, high]: the advantages clamped to it after the formula (OpenRLHF's reward.clip_range: advantageClipOf). */
  clip?: readonly number[] | null;
}

export interface GroupStats {
  group: number;
  mean: number;
  /** Bessel std of the group's rewards (what TRL logs as reward_std). */
  std: number;
  zero_std: boolean;
}

export interface AdvantageResult {
  advantages: Float64Array; // (B)
  groups: GroupStats[]; // (B / G)
  /** The std the advantages were divided by under "batch" scaling. */
  batch_std?: number;
  epsilon: number;
}

/** ε added to the std: TRL 1e-4, verl 1e-6, OpenRLHF's group_norm 1e-9 (experience_maker.py). */
export const ADVANTAGE_EPSILON: Record<AdvantageEstimator, number> = { trl: 1e-4, verl: 1e-6, openrlhf: 1e-9 };

/**
 * Why a batch's advantages are not what computeAdvantages gives from its rewards, by its trainer's own
 * estimator setting (absent: the table's default), or null: TRL's normalize_then_sum aggregation, verl's
 * adv_estimator other than grpo, OpenRLHF's algo.advantage.estimator other than group_norm / dr_grpo (rloo's
 * leave-one-out baseline, reinforce_baseline's batch whitening, a critic's GAE). The Doctor then does not
 * judge the advantages, and a step refuses to recompute missing ones.
 */
export function rewardAdvantageGap(batch: Pick<GrpoBatch, 'trainer' | 'config'> & Partial<Pick<GrpoBatch, 'run'>>): string | null {
  if (batch.trainer !== 'verl' && batch.trainer !== 'openrlhf') {
    // TRL's GDPO aggregation normalises each reward function in its group, then the weighted sum over the batch.
    if (batch.config?.multi_objective_aggregation === 'normalize_then_sum') {
      return 'TRL multi_objective_aggregation = "normalize_then_sum" (each function normalised in its group, the sum over the batch) is not the group advantage the studio recomputes from rewards';
    }
    // TRL gathers every process's rewards before the advantages (grpo_trainer.py _generate_and_score_completions):
    // scale_rewards "batch" divides by the std over all of them, which one rank's rows do not give.
    const at = (k: string) => batch.run?.[k] ?? batch.config?.[k];
    const P = at('num_processes');
    const rank = at('rank');
    const held = Array.isArray(rank) ? rank.length : 1;
    if (batch.config?.scale_rewards === 'batch' && typeof P === 'number' && P > held) {
      return `TRL scale_rewards = "batch" over ${P} processes divides by the std of every process's rewards, and this batch holds ${held} of the ${P} ranks`;
    }
  }
  const [name, table, group] =
    batch.trainer === 'verl' ? ['adv_estimator', VERL_SETTINGS, ['grpo']]
    : batch.trainer === 'openrlhf' ? ['algo.advantage.estimator', OPENRLHF_SETTINGS, ['group_norm', 'dr_grpo']]
    : [null, null, null];
  if (!name) return null;
  const given = batch.config?.[name];
  const value = given ?? specOf(table, name).default;
  const who = `${batch.trainer === 'verl' ? 'verl' : 'OpenRLHF'} ${name} = ${JSON.stringify(value)}`;
  if (!group.includes(value as string)) return `${who}${given === undefined ? ' (its default: the batch does not say)' : ''} is not a group-normalised estimator the studio recomputes from rewards`;
  const inReward = batch.trainer === 'openrlhf' ? openrlhfKlInReward(batch.config ?? {}) : null;
  if (inReward) return `${who} with ${inReward}: each token's advantage is the group value minus the KL penalty summed from that token on (compute_reward, get_cumulative_returns), not the group advantage of the rewards`;
  // The formula the studio then applies is the batch config's advantage_estimator / scale_rewards, which the
  // importers write from groupFormulaOf: a batch written by hand may say otherwise.
  const want = groupFormulaOf(batch.trainer === 'verl' ? 'verl' : 'openrlhf', batch.config ?? {})!;
  const has = { advantage_estimator: batch.config?.advantage_estimator, scale_rewards: batch.config?.scale_rewards ?? 'group' };
  return has.advantage_estimator === want.advantage_estimator && has.scale_rewards === want.scale_rewards
    ? null
    : `${who} takes advantage_estimator ${JSON.stringify(want.advantage_estimator)} and scale_rewards ${JSON.stringify(want.scale_rewards)}, the batch config says ${JSON.stringify(has.advantage_estimator ?? null)} and ${JSON.stringify(has.scale_rewards)}`;
}

/**
 * OpenRLHF's KL penalty in the reward, as the settings that put it there, or null: without algo.kl.use_loss and
 * with algo.kl.init_coef > 0 (which is also when train_ppo_ray.py starts the reference model), make_experience
 * takes kl = compute_approx_kl(action, base) and compute_reward adds −kl_ctl·kl to every action token
 * (openrlhf/trainer/ppo_utils/experience_maker.py, openrlhf/models/utils.py).
 */
function openrlhfKlInReward(config: Record<string, unknown>): string | null {
  const get = (n: string) => config[n] ?? specOf(OPENRLHF_SETTINGS, n).default;
  const [useLoss, coef] = [get('algo.kl.use_loss'), get('algo.kl.init_coef')];
  return useLoss !== true && typeof coef === 'number' && coef > 0 ? `algo.kl.use_loss = ${JSON.stringify(useLoss)} and algo.kl.init_coef = ${coef} > 0 (the KL penalty is in the reward)` : null;
}

/**
 * The clamp an estimator applies to the advantages it computes: OpenRLHF's reward.clip_range (compute_reward
 * clamps the shaped reward, group_norm's or dr_grpo's, before the returns; the table default [-10, 10] when the
 * config does not say), none for TRL's and verl's.
 */
export function advantageClipOf(config: Record<string, unknown> | undefined, estimator: AdvantageEstimator): readonly number[] | null {
  if (estimator !== 'openrlhf') return null;
  const spec = specOf(OPENRLHF_SETTINGS, 'reward.clip_range');
  const v = config?.[spec.name];
  return (v === undefined ? spec.default : checkSetting(spec, v, 'config')) as number[]; // a malformed pair: SettingsError naming it
}

/** torch.isclose(std, 0) with its default atol, which is how TRL counts zero-std groups. */
const ZERO_STD_ATOL = 1e-8;

/** The reward functions' weights: the batch's own, else its TRL config's reward_weights (GRPOConfig), else none (all 1). */
export function rewardWeightsOf(batch: Pick<GrpoBatch, 'reward_weights' | 'config'>): number[] | undefined {
  if (batch.reward_weights) return batch.reward_weights;
  const w = batch.config?.reward_weights;
  return Array.isArray(w) && w.every((x) => typeof x === 'number') ? w : undefined;
}

/** TRL's combined reward: Σ_f rewards_per_func[i, f] · w_f, NaN terms skipped (nansum; all NaN → 0). */
export function combineRewards(rewardsPerFunc: readonly (readonly number[])[], weights?: readonly number[]): Float64Array {
  const out = new Float64Array(rewardsPerFunc.length); // (B)
  rewardsPerFunc.forEach((row, i) => {
    let s = 0;
    row.forEach((r, f) => {
      const term = r * (weights?.[f] ?? 1);
      if (!Number.isNaN(term)) s += term;
    });
    out[i] = s;
  });
  return out;
}

/** TRL's unscorable rows: every reward function returned None (NaN); a row with no functions is not one. */
export function unscorableRows(rewardsPerFunc: readonly (readonly number[])[] | undefined): number[] {
  const out: number[] = [];
  rewardsPerFunc?.forEach((row, b) => {
    if (Array.isArray(row) && row.length > 0 && row.every((x) => Number.isNaN(x))) out.push(b);
  });
  return out;
}

/**
 * The rewards with TRL's unscorable rows set to NaN (`rewards[unscorable_mask] = nan` in
 * `_generate_and_score_completions`), so the TRL estimator leaves them out of the group statistics and
 * gives them advantage 0; `rewards` itself (nansum: 0 there) is returned when there are none.
 */
export function withUnscorable(rewards: ArrayLike<number>, rewardsPerFunc: readonly (readonly number[])[] | undefined): ArrayLike<number> {
  const none = unscorableRows(rewardsPerFunc);
  if (none.length === 0) return rewards;
  const out = Float64Array.from(rewards);
  for (const b of none) if (b < out.length) out[b] = NaN;
  return out;
}

/** Mean and Bessel std of xs[rows]; `skipNaN` leaves NaN values out (TRL's nanmean / nanstd). */
function meanStd(xs: ArrayLike<number>, rows: readonly number[], skipNaN = false): { mean: number; std: number } {
  let n = 0;
  let sum = 0;
  for (const i of rows) if (!(skipNaN && Number.isNaN(xs[i]))) [sum, n] = [sum + xs[i], n + 1];
  const mean = sum / n;
  let ss = 0;
  for (const i of rows) if (!(skipNaN && Number.isNaN(xs[i]))) ss += (xs[i] - mean) ** 2;
  // Bessel; one sample: 0, as TRL (nanstd's NaN there ends as A = 0 as well); no sample: NaN.
  return { mean, std: n > 1 ? Math.sqrt(ss / (n - 1)) : n === 1 ? 0 : NaN };
}

const range = (lo: number, hi: number) => Array.from({ length: hi - lo }, (_, k) => lo + k);

/**
 * The rows of each group: from group labels (groups in order of first appearance, rows in batch order),
 * else ⌊i / G⌋. `complete` says whether the group holds all G of its rows (a rank's slice may not).
 */
export function groupRows(B: number, G: number, groupIds?: readonly number[]): { rows: number[][]; complete: boolean[] } {
  const rows: number[][] = [];
  if (groupIds) {
    const at = new Map<number, number>();
    groupIds.forEach((g, i) => {
      if (!at.has(g)) at.set(g, rows.push([]) - 1);
      rows[at.get(g)!].push(i);
    });
  } else {
    for (let g = 0; g * G < B; g++) rows.push(range(g * G, Math.min(B, (g + 1) * G)));
  }
  return { rows, complete: rows.map((r) => r.length === G) };
}

/**
 * Advantages for B = rewards.length samples, in groups of num_generations consecutive rows or the given
 * `groups`. Throws RangeError if B is not a multiple of G without explicit groups (the Doctor reports that
 * case before calling).
 */
export function computeAdvantages(rewards: ArrayLike<number>, opts: AdvantageOptions): AdvantageResult {
  const G = opts.num_generations;
  const B = rewards.length;
  if (!opts.groups && (G < 1 || B % G !== 0)) throw new RangeError(`computeAdvantages: ${B} rewards is not a multiple of num_generations = ${G}`);
  const rowsOf = opts.groups ?? groupRows(B, G).rows;
  const scale = opts.scale_rewards ?? 'group';
  const estimator = opts.estimator ?? 'trl';
  const eps = ADVANTAGE_EPSILON[estimator];
  const skipNaN = estimator === 'trl';
  const advantages = new Float64Array(B);
  const groups: GroupStats[] = [];
  const groupOf = new Int32Array(B);
  rowsOf.forEach((rows, g) => {
    let { mean, std } = meanStd(rewards, rows, skipNaN);
    if (estimator === 'verl' && rows.length === 1) [mean, std] = [0, 1];
    groups.push({ group: g, mean, std, zero_std: Math.abs(std) <= ZERO_STD_ATOL });
    for (const i of rows) {
      advantages[i] = rewards[i] - mean;
      groupOf[i] = g;
    }
  });
  let batch_std: number | undefined;
  if (scale !== 'none') {
    if (scale === 'batch') batch_std = meanStd(rewards, range(0, B), skipNaN).std;
    for (let i = 0; i < B; i++) advantages[i] /= (batch_std ?? groups[groupOf[i]].std) + eps;
  }
  if (skipNaN) for (let i = 0; i < B; i++) if (Number.isNaN(advantages[i])) advantages[i] = 0; // torch.nan_to_num
  if (opts.clip) for (let i = 0; i < B; i++) advantages[i] = Math.min(Math.max(advantages[i], opts.clip[0]), opts.clip[1]); // torch.clamp(min, max)
  return { advantages, groups, batch_std, epsilon: eps };
}

// ---------------------------------------------------------------------------------------------------------
// Trainer-exact advantage blocks, float64 (tests/golden/trainers/advantages).

/** nanmean / Bessel nanstd of xs[idx] (TRL trl/trainer/utils.py `nanstd`: NaN when fewer than 2 values). */
function nanStats(xs: ArrayLike<number>, idx: readonly number[]): { mean: number; std: number } {
  const v = idx.map((i) => xs[i]).filter((x) => !Number.isNaN(x));
  const mean = v.length ? v.reduce((a, x) => a + x, 0) / v.length : NaN;
  const varPop = v.length ? v.reduce((a, x) => a + (x - mean) ** 2, 0) / v.length : NaN;
  return { mean, std: v.length > 1 ? Math.sqrt((varPop * v.length) / (v.length - 1)) : NaN };
}


export interface TrlAdvantageConfig {
  num_generations: number;
  scale_rewards: 'group' | 'batch' | 'none';
  multi_objective_aggregation: 'sum_then_normalize' | 'normalize_then_sum';
  reward_weights: number[] | null;
}

/**
 * TRL's advantage block (huggingface/trl trl/trainer/grpo_trainer.py `_generate_and_score_completions` at
 * f2cd577) on the gathered rewards_per_func (B, F), NaN = the function returned None. Rows where every
 * function returned None are NaN in the group statistics (nanmean / nanstd leave them out) and get advantage 0;
 * so does every row of a group with fewer than two scorable rows when the std divides (nanstd is NaN).
 * Returns this rank's slice (rows rank·B/num_processes ...), as TRL keeps.
 */
export function trlAdvantages(rewardsPerFunc: ArrayLike<number>, B: number, F: number, c: TrlAdvantageConfig, run = { num_processes: 1, rank: 0 }): Float64Array {
  const G = c.num_generations;
  if (B % G !== 0) throw new RangeError(`trlAdvantages: ${B} rows is not a multiple of num_generations = ${G}`);
  if (c.reward_weights && c.reward_weights.length !== F) throw new RangeError(`reward_weights: ${c.reward_weights.length} weights for ${F} reward functions`);
  const w = (f: number) => c.reward_weights?.[f] ?? 1;
  const at = (i: number, f: number) => rewardsPerFunc[i * F + f];
  const unscorable = range(0, B).map((i) => range(0, F).every((f) => Number.isNaN(at(i, f))));
  const weightedSum = (term: (i: number, f: number) => number) =>
    Float64Array.from({ length: B }, (_, i) => (unscorable[i] ? NaN : range(0, F).reduce((s, f) => (Number.isNaN(term(i, f)) ? s : s + term(i, f) * w(f)), 0)));
  const groups = range(0, B / G).map((g) => range(g * G, (g + 1) * G));
  const A = new Float64Array(B);
  if (c.multi_objective_aggregation === 'sum_then_normalize') {
    const r = weightedSum(at);
    const all = range(0, B);
    const batchStd = B > 1 ? nanStats(r, all).std : 0;
    for (const g of groups) {
      const { mean, std } = nanStats(r, g);
      for (const i of g) {
        const s = c.scale_rewards === 'batch' ? batchStd : std;
        A[i] = c.scale_rewards === 'none' ? r[i] - mean : (r[i] - mean) / (s + 1e-4);
      }
    }
  } else {
    // normalize_then_sum (GDPO): each function normalised in its group, weighted sum, then batch-normalised.
    const z = new Float64Array(B * F);
    for (let f = 0; f < F; f++) {
      const col = Float64Array.from({ length: B }, (_, i) => at(i, f));
      for (const g of groups) {
        const { mean, std } = nanStats(col, g);
        for (const i of g) z[i * F + f] = (col[i] - mean) / ((G > 1 ? std : 0) + 1e-4);
      }
    }
    const r = weightedSum((i, f) => z[i * F + f]);
    const { mean, std } = nanStats(r, range(0, B));
    for (let i = 0; i < B; i++) A[i] = (r[i] - mean) / ((B > 1 ? std : 0) + 1e-4);
  }
  for (let i = 0; i < B; i++) if (Number.isNaN(A[i])) A[i] = 0; // torch.nan_to_num(advantages, nan=0.0)
  const local = B / run.num_processes;
  return A.slice(run.rank * local, (run.rank + 1) * local);
}

export interface VerlAdvantageConfig {
  adv_estimator: (typeof VERL_ADV_ESTIMATORS)[number];
  norm_adv_by_std_in_grpo: boolean;
  gamma: number;
}

/**
 * verl's outcome estimators (volcengine/verl verl/trainer/ppo/core_algos.py at b178a3c:
 * compute_grpo_outcome_advantage, compute_rloo_outcome_advantage, compute_reinforce_plus_plus_outcome_advantage;
 * masked_whiten from verl/utils/torch_functional.py). Groups are rows sharing an `index` (uid), any order.
 */
export function verlAdvantages(
  rewards: ArrayLike<number>, // (B, T) token_level_rewards
  mask: ArrayLike<number>, // (B, T) response_mask
  index: ArrayLike<number>, // (B) uid
  B: number,
  T: number,
  c: VerlAdvantageConfig,
): { advantages: Float64Array; returns: Float64Array } {
  const advantages = new Float64Array(B * T);
  if (c.adv_estimator === 'reinforce_plus_plus') {
    const returns = new Float64Array(B * T);
    for (let b = 0; b < B; b++) {
      let run = 0;
      for (let t = T - 1; t >= 0; t--) {
        run = rewards[b * T + t] + c.gamma * run;
        returns[b * T + t] = run;
        run *= mask[b * T + t]; // reset after EOS
      }
    }
    let msum = 0;
    let s = 0;
    for (let i = 0; i < B * T; i++) (msum += mask[i]), (s += returns[i] * mask[i]);
    if (msum < 2) throw new RangeError('reinforce_plus_plus: masked_whiten needs at least two response tokens');
    const mean = s / (msum + 1e-8);
    let ss = 0;
    for (let i = 0; i < B * T; i++) ss += (returns[i] - mean) ** 2 * mask[i];
    const variance = (ss / (msum + 1e-8)) * (msum / (msum - 1));
    for (let i = 0; i < B * T; i++) advantages[i] = ((returns[i] - mean) / Math.sqrt(variance + 1e-8)) * mask[i];
    return { advantages, returns };
  }
  const score = Float64Array.from({ length: B }, (_, b) => range(0, T).reduce((a, t) => a + rewards[b * T + t], 0));
  const out = new Float64Array(B);
  for (const rows of groupRows(B, 0, Array.from(index)).rows) {
    const n = rows.length;
    const mean = n === 1 ? 0 : rows.reduce((a, b) => a + score[b], 0) / n;
    if (c.adv_estimator === 'rloo') {
      for (const b of rows) out[b] = n > 1 ? (score[b] * n) / (n - 1) - (mean * n) / (n - 1) : score[b];
    } else {
      const std = n === 1 ? 1 : Math.sqrt(rows.reduce((a, b) => a + (score[b] - mean) ** 2, 0) / (n - 1));
      for (const b of rows) out[b] = c.norm_adv_by_std_in_grpo ? (score[b] - mean) / (std + 1e-6) : score[b] - mean;
    }
  }
  for (let i = 0; i < B * T; i++) advantages[i] = out[Math.floor(i / T)] * mask[i];
  return { advantages, returns: advantages.slice() };
}
