// advantage-mismatch: the advantages in the batch are not what the rewards give under the configured
// scale_rewards. Catches a wrong group layout (interleaved instead of consecutive rows), the wrong std
// (population vs Bessel, batch vs group), missing normalisation, or rewards combined without weights.
// Rows where every reward function returned None are left out of the statistics with advantage 0, as TRL
// does (batchRewards marks them NaN; computeAdvantages skips NaN for the TRL estimator).
import { listSamples, msg } from '../util.ts';
import { ADVANTAGE_EPSILON, advantageClipOf, combineRewards, computeAdvantages, rewardAdvantageGap, rewardWeightsOf, type AdvantageEstimator } from '../../grpo/advantages.ts';
import type { ScaleRewards } from '../../io/batch.ts';
import type { Rule } from '../types.ts';
import { batchRewards, groupName, perSample, unscorableRows } from '../rewards.ts';

/** float32 advantages of float32 rewards: ~1e-7 relative, amplified by 1/(std + ε) for near-flat groups. */
const ATOL = 1e-4;
const RTOL = 1e-3;

export const advantageMismatch: Rule = {
  id: 'advantage-mismatch',
  title: 'Advantages do not follow from the rewards',
  severity: 'error',
  description: 'Supplied advantages differ from (r − group mean) / (std + ε) recomputed from the rewards under the configured scale_rewards (OpenRLHF: clamped to its reward.clip_range); or rewards differ from the weighted sum of rewards_per_func.',
  seed: '002 (TRL advantage formula re-implemented by hand); 001 (advantages checked when the loss is 0)',
  check(ctx) {
    const { batch } = ctx;
    const out = [];
    if (batch.rewards && batch.rewards_per_func && batch.rewards_per_func.length === batch.rewards.length) {
      const combined = combineRewards(batch.rewards_per_func, rewardWeightsOf(batch));
      // An unscorable row's reward is NaN in TRL (nansum would say 0): either is accepted there.
      const none = new Set(unscorableRows(batch));
      const i = batch.rewards.findIndex((r, k) => !none.has(k) && !(Math.abs(r - combined[k]) <= ATOL + RTOL * Math.abs(combined[k])));
      if (i >= 0) out.push({
        rule: this.id, severity: 'error' as const, sample: i, field: 'rewards',
        message: msg`sample ${i}: rewards = ${batch.rewards[i]} but Σ rewards_per_func · reward_weights = ${combined[i]}`,
        hint: 'TRL sums reward functions with reward_weights, skipping NaN (nansum). Check the weights and which functions returned None.',
      });
    }
    const rewards = batchRewards(batch);
    if (!batch.advantages) return out.length ? out : 'no advantages in the batch';
    if (!perSample(rewards, ctx.B) || batch.advantages.length !== ctx.B) return out.length ? out : 'needs rewards (or rewards_per_func) and advantages, one per sample';
    // A group with rows missing (one rank's slice) had its mean/std taken over rows we do not have.
    const { rows, complete } = ctx.groups;
    const judged = rows.filter((_, g) => complete[g]);
    if (judged.length === 0) return out.length ? out : `no group holds all ${ctx.G} of its rows in this batch (a rank's slice): merge the slices to check advantages`;
    const checked = judged.flat().sort((a, b) => a - b);
    const gap = rewardAdvantageGap(batch);
    if (gap) return out.length ? out : `${gap}: the advantages are not judged`;
    const estimator: AdvantageEstimator = batch.config?.advantage_estimator ?? 'trl';
    const A = batch.advantages;
    const scales: ScaleRewards[] = judged.length === rows.length ? ['group', 'batch', 'none'] : ['group', 'none']; // "batch" needs every row
    const tol = (ref: ArrayLike<number>, i: number) => Math.abs(A[i] - ref[i]) - (ATOL + RTOL * Math.abs(ref[i]));
    const reference = (scale: ScaleRewards, est: AdvantageEstimator) => computeAdvantages(rewards, { num_generations: ctx.G, scale_rewards: scale, estimator: est, groups: judged, clip: advantageClipOf(batch.config, est) }).advantages;
    const matches = (ref: ArrayLike<number>) => checked.every((i) => tol(ref, i) <= 0);
    if (!scales.includes(ctx.scaleRewards)) return out.length ? out : 'scale_rewards="batch" needs the whole batch; this one holds partial groups';
    const ref = reference(ctx.scaleRewards, estimator);
    if (matches(ref)) return out;
    const alternatives: string[] = [];
    for (const scale of scales) {
      for (const est of ['trl', 'verl'] as AdvantageEstimator[]) {
        if ((scale !== ctx.scaleRewards || est !== estimator) && matches(reference(scale, est))) alternatives.push(`scale_rewards="${scale}"${est === 'verl' ? ' with verl ε = 1e-6' : ''}`);
      }
    }
    const hint = alternatives.length
      ? `The advantages match ${alternatives.join(' / ')}: set config.scale_rewards accordingly or fix the trainer.`
      : 'Check the group layout (G consecutive rows per prompt), the std (Bessel, per group), and that advantages were computed from these rewards.';
    const clip = advantageClipOf(batch.config, estimator);
    const how = `scale_rewards="${ctx.scaleRewards}", ${estimator === 'trl' ? '' : estimator === 'verl' ? 'verl ' : 'OpenRLHF '}ε = ${ADVANTAGE_EPSILON[estimator].toExponential(0)}${clip ? `, clamped to [${clip.join(', ')}] (reward.clip_range)` : ''}, ${batch.group_ids ? 'groups by group_ids' : `groups of ${ctx.G} consecutive rows`}`;
    // One finding per group with a wrong row, at its worst row: a wrong formula or layout shows as whole
    // groups named as such, a single corrupted value as one sample.
    rows.forEach((group, g) => {
      if (!complete[g]) return;
      const wrong = group.filter((i) => !(tol(ref, i) <= 0));
      if (wrong.length === 0) return;
      const at = wrong.reduce((w, i) => (tol(ref, i) > tol(ref, w) || Number.isNaN(tol(ref, i)) ? i : w));
      const name = groupName(batch, group, g);
      const where = wrong.length === group.length
        ? msg`group ${name}: all ${group.length} advantages (samples ${listSamples(group)}) differ from what the rewards give; worst sample ${at}: advantage ${A[at]} but the rewards give ${ref[at]} (Δ ${A[at] - ref[at]})`
        : msg`sample ${at} (group ${name}${wrong.length > 1 ? `, ${wrong.length} of ${group.length} rows wrong` : ''}): advantage ${A[at]} but the rewards give ${ref[at]} (Δ ${A[at] - ref[at]})`;
      out.push({ rule: this.id, severity: 'error' as const, sample: at, field: 'advantages', message: `${where} (${how})`, hint });
    });
    return out;
  },
};
