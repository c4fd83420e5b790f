// rewardAdvantageGap: when a batch's or a preset's advantages are not the studio's group advantage of the
// rewards (the trainer's own estimator row decides), the Doctor does not judge them and a step does not
// recompute them — for the studio's own rollouts too (StepConfig.advantage_gap).
import { describe, expect, it } from 'vitest';
import { rewardAdvantageGap } from '../../src/grpo/advantages.ts';
import { effectiveSettings } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';

describe('rewardAdvantageGap', () => {
  it("TRL normalize_then_sum reaches the studio's rollouts through the step config (an advantages row: no objective follows it)", () => {
    const at = (config: Record<string, unknown>) => stepConfigOf(effectiveSettings('trl', [{ origin: 'file', trainer: 'trl', config, run: {} }]), 8);
    expect(at({ multi_objective_aggregation: 'normalize_then_sum' }).advantage_gap).toMatch(/normalize_then_sum/);
    expect(at({}).advantage_gap).toBeNull();
  });

  it('a group estimator is recomputed only with the formula the importer sets for it (a hand-written batch may say otherwise)', () => {
    const orl = (config: Record<string, unknown>) => rewardAdvantageGap({ trainer: 'openrlhf', config });
    expect(orl({ 'algo.advantage.estimator': 'dr_grpo', advantage_estimator: 'openrlhf', scale_rewards: 'none' })).toBeNull();
    expect(orl({ 'algo.advantage.estimator': 'group_norm', advantage_estimator: 'openrlhf' })).toBeNull();
    expect(orl({ 'algo.advantage.estimator': 'dr_grpo' })).toMatch(/takes advantage_estimator "openrlhf" and scale_rewards "none", the batch config says null and "group"/);
    expect(rewardAdvantageGap({ trainer: 'verl', config: { adv_estimator: 'grpo', advantage_estimator: 'verl', norm_adv_by_std_in_grpo: false, scale_rewards: 'none' } })).toBeNull();
    expect(rewardAdvantageGap({ trainer: 'verl', config: { adv_estimator: 'grpo', advantage_estimator: 'verl', norm_adv_by_std_in_grpo: false } })).toMatch(/scale_rewards "none"/);
  });
});
