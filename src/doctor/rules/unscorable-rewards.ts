// unscorable-rewards: samples where every reward function returned None (rewards_per_func all NaN). TRL
// marks their reward NaN, leaves them out of the group mean and std (nanmean / nanstd) and sets their
// advantage to 0 (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577, `_generate_and_score_completions`);
// a group left with fewer than two scorable rows has std NaN, so all its advantages become 0. Expected
// now and then (a reward function that applies to some tasks only); a whole group is a lost prompt.
import type { Rule } from '../types.ts';
import { groupName, unscorableRows } from '../rewards.ts';
import { listSamples, msg } from '../util.ts';

const ID = 'unscorable-rewards';

export const unscorableRewards: Rule = {
  id: ID,
  title: 'Samples no reward function scored (None rewards)',
  severity: 'warning',
  description: 'Every reward function returned None for a sample: TRL leaves it out of its group’s mean and std and gives it advantage 0; a group with fewer than two scored samples gets advantage 0 everywhere.',
  seed: 'TRL unscorable rows (rewards_per_func all NaN → nanmean / nanstd, advantage 0)',
  check(ctx) {
    const { batch } = ctx;
    if (!batch.rewards_per_func) return 'needs rewards_per_func';
    const none = unscorableRows(batch);
    if (none.length === 0) return [];
    const isNone = new Set(none);
    const { rows } = ctx.groups;
    const starved = rows.flatMap((r, g) => (r.filter((i) => !isNone.has(i)).length < 2 && r.some((i) => isNone.has(i)) ? [groupName(batch, r, g)] : []));
    return [{
      rule: ID,
      severity: starved.length ? 'warning' : 'info',
      field: 'rewards_per_func',
      sample: none[0],
      message: msg`every reward function returned None for ${none.length} sample(s) (${listSamples(none)}): left out of their group's mean and std, advantage 0${starved.length ? `; group(s) ${listSamples(starved)} keep fewer than 2 scored samples, so all their advantages are 0` : ''}`,
      hint: 'Make sure at least one reward function applies to every prompt (TRL warns "All reward functions returned None"); these samples teach nothing.',
    }];
  },
};
