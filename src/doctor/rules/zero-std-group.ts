// zero-std-group: every completion of a group got the same reward, so A = r − mean = 0 for the whole
// group and it teaches nothing (only the KL term remains). When every group is like that the loss is
// exactly 0 (β = 0) or pure KL — seed 001's "loss 0.0000". Groups come from group_ids when the batch has
// them (verl uids, OpenRLHF index); a group with fewer than G rows here (one rank's slice) is not judged.
import { computeAdvantages } from '../../grpo/advantages.ts';
import type { Rule } from '../types.ts';
import { batchRewards, groupName, perSample } from '../rewards.ts';
import { listSamples, msg } from '../util.ts';

export const zeroStdGroup: Rule = {
  id: 'zero-std-group',
  title: 'Groups with identical rewards (zero advantage)',
  severity: 'error',
  description: 'All rewards in a group are equal, so its advantages are 0 and it contributes no policy gradient; if every group is so, the policy loss is exactly 0.',
  seed: '001 (loss 0.0000 from iteration 1: the judge gave every completion the same score)',
  check(ctx) {
    const { rows, complete } = ctx.groups;
    const rewards = batchRewards(ctx.batch);
    const A = ctx.batch.advantages;
    let flat: boolean[];
    let source: 'rewards' | 'advantages';
    if (perSample(rewards, ctx.B)) {
      flat = computeAdvantages(rewards, { num_generations: ctx.G, groups: rows }).groups.map((g) => g.zero_std);
      source = 'rewards';
    } else if (perSample(A, ctx.B)) {
      // No rewards: a group whose advantages are all ~0 carries no signal either.
      flat = rows.map((r) => r.every((i) => Math.abs(A[i]) <= 1e-6));
      source = 'advantages';
    } else return 'needs rewards, rewards_per_func or advantages with one value per sample';
    const judged = rows.map((_, g) => g).filter((g) => complete[g]);
    if (judged.length === 0) return `no group holds all ${ctx.G} of its rows in this batch (a rank's slice): merge the slices to check groups`;
    const zero = judged.filter((g) => flat[g]).map((g) => groupName(ctx.batch, rows[g], g));
    if (zero.length === 0) return [];
    const partial = rows.length - judged.length;
    const all = zero.length === judged.length && partial === 0;
    const groups = judged.length;
    const unjudged = partial ? `; ${partial} partial group(s) not checked` : '';
    return [{
      rule: this.id,
      severity: all ? 'error' : 'warning',
      message: all
        ? msg`every group (${groups}) has identical ${source === 'rewards' ? 'rewards' : 'zero advantages'}: all advantages are 0 and the policy loss is exactly 0`
        : msg`${zero.length} of ${groups} groups have ${source === 'rewards' ? 'zero reward std' : 'all-zero advantages'} (groups ${listSamples(zero)}): they add no policy gradient${unjudged}`,
      hint: all
        ? 'Check the reward function on a few completions by hand (is it called on the right text? does it ever vary?), raise temperature or num_generations.'
        : 'Some flat groups are normal (too easy / too hard prompts); a large fraction wastes compute — filter such prompts or raise num_generations.',
    }];
  },
};
