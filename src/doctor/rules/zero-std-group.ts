// zero-std-group: every completion of a group got the same reward, so A = r − mean = 0 for the whole
// group and it teaches nothing (only the KL term remains). When every group is like that the loss is
// exactly 0 (β = 0) or pure KL — seed 001's "loss 0.0000".
import { computeAdvantages } from '../../grpo/advantages.ts';
import type { Rule } from '../types.ts';
import { batchRewards, groupable } from '../rewards.ts';
import { listSamples } from '../util.ts';

export const zeroStdGroup: Rule = {
  id: 'zero-std-group',
  title: 'Groups with identical rewards (zero advantage)',
  severity: 'error',
  description: 'All rewards in a group are equal, so its advantages are 0 and it contributes no policy gradient; if every group is so, the policy loss is exactly 0.',
  seed: '001 (loss 0.0000 from iteration 1: the judge gave every completion the same score)',
  check(ctx) {
    const rewards = batchRewards(ctx.batch);
    let zero: number[];
    let source: string;
    if (groupable(rewards, ctx.B, ctx.G)) {
      zero = computeAdvantages(rewards!, { num_generations: ctx.G }).groups.filter((g) => g.zero_std).map((g) => g.group);
      source = 'rewards';
    } else if (groupable(ctx.batch.advantages, ctx.B, ctx.G)) {
      // No rewards: a group whose advantages are all ~0 carries no signal either.
      const A = ctx.batch.advantages!;
      zero = [];
      for (let g = 0; g < ctx.B / ctx.G; g++) if (A.slice(g * ctx.G, (g + 1) * ctx.G).every((a) => Math.abs(a) <= 1e-6)) zero.push(g);
      source = 'advantages';
    } else return 'needs rewards, rewards_per_func or advantages with one value per sample';
    const groups = ctx.B / ctx.G;
    if (zero.length === 0) return [];
    const all = zero.length === groups;
    return [{
      rule: this.id,
      severity: all ? 'error' : 'warning',
      message: all
        ? `every group (${groups}) has identical ${source === 'rewards' ? 'rewards' : 'zero advantages'}: all advantages are 0 and the policy loss is exactly 0`
        : `${zero.length} of ${groups} groups have ${source === 'rewards' ? 'zero reward std' : 'all-zero advantages'} (groups ${listSamples(zero)}): they add no policy gradient`,
      hint: all
        ? 'Check the reward function on a few completions by hand (is it called on the right text? does it ever vary?), raise temperature or num_generations.'
        : 'Some flat groups are normal (too easy / too hard prompts); a large fraction wastes compute — filter such prompts or raise num_generations.',
    }];
  },
};
