// rewardAdvantageGap: when a batch's or a preset's advantages are not the studio's group advantage of the
// rewards (the trainer's own estimator row decides), the Doctor does not judge them and a step does not
// recompute them — for the studio's own rollouts too (StepConfig.advantage_gap).
import { describe, expect, it } from 'vitest';
import { rewardAdvantageGap } from '../../src/grpo/advantages.ts';
import type { BatchConfig, GrpoBatch } from '../../src/io/batch.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { rewardAdvantages } from '../../src/grpo/step_prepare.ts';
import { diagnose } from '../../src/doctor/index.ts';

describe('rewardAdvantageGap', () => {
  it("TRL normalize_then_sum reaches the studio's rollouts through the step config (an advantages row: no objective follows it)", () => {
    const at = (config: Record<string, unknown>) => stepConfigOf(effectiveSettings('trl', [{ origin: 'file', trainer: 'trl', config, run: {} }]), 8);
    expect(at({ multi_objective_aggregation: 'normalize_then_sum' }).advantage_gap).toMatch(/normalize_then_sum/);
    expect(at({}).advantage_gap).toBeNull();
  });

  it('a group estimator is recomputed only with the formula the importer sets for it (a hand-written batch may say otherwise)', () => {
    // KL as a loss term (GRPO as OpenRLHF's examples run it): the advantages are the group formula's.
    const orl = (config: Record<string, unknown>) => rewardAdvantageGap({ trainer: 'openrlhf', config: { 'algo.kl.use_loss': true, ...config } });
    expect(orl({ 'algo.advantage.estimator': 'dr_grpo', advantage_estimator: 'openrlhf', scale_rewards: 'none' })).toBeNull();
    expect(orl({ 'algo.advantage.estimator': 'group_norm', advantage_estimator: 'openrlhf' })).toBeNull();
    expect(orl({ 'algo.advantage.estimator': 'dr_grpo' })).toMatch(/takes advantage_estimator "openrlhf" and scale_rewards "none", the batch config says null and "group"/);
    expect(rewardAdvantageGap({ trainer: 'verl', config: { adv_estimator: 'grpo', advantage_estimator: 'verl', norm_adv_by_std_in_grpo: false, scale_rewards: 'none' } })).toBeNull();
    expect(rewardAdvantageGap({ trainer: 'verl', config: { adv_estimator: 'grpo', advantage_estimator: 'verl', norm_adv_by_std_in_grpo: false } })).toMatch(/scale_rewards "none"/);
  });
});

describe("OpenRLHF: reward.clip_range and the KL in the reward (openrlhf/models/utils.py compute_reward)", () => {
  // Two groups of 4. dr_grpo: r − mean → [−25, −25, −25, 75] and [−1.5, −0.5, 0.5, 1.5].
  const rewards = [0, 0, 0, 100, 1, 2, 3, 4];
  const batch = (config: BatchConfig): GrpoBatch => ({
    format: 'grpo-batch/v1', trainer: 'openrlhf', num_generations: 4, pad_token_id: 0, eos_token_ids: [2], rewards,
    prompt_ids: rewards.map(() => [5]), completion_ids: rewards.map(() => [7, 2]), completion_mask: rewards.map(() => [1, 1]),
    config: { 'algo.kl.use_loss': true, 'algo.advantage.estimator': 'dr_grpo', advantage_estimator: 'openrlhf', scale_rewards: 'none', ...config },
  });
  const stepAdvantages = (b: GrpoBatch) => Array.from(rewardAdvantages(b, 4, undefined, stepConfigOf(effectiveSettings('openrlhf', [fileLayer(b, 'b.json')]), 2)).advantages);

  it('a step recomputing dr_grpo advantages clamps them to ±10 (the default), or to the config range', () => {
    expect(stepAdvantages(batch({}))).toEqual([-10, -10, -10, 10, -1.5, -0.5, 0.5, 1.5]);
    expect(stepAdvantages(batch({ 'reward.clip_range': [-30, 50] }))).toEqual([-25, -25, -25, 50, -1.5, -0.5, 0.5, 1.5]);
    expect(stepAdvantages(batch({ 'reward.clip_range': [-1, 1] }))).toEqual([-1, -1, -1, 1, -1, -0.5, 0.5, 1]);
  });

  it('a clip range that is not [low, high] is refused naming the field', () => {
    expect(() => stepAdvantages(batch({ 'reward.clip_range': [-10] }))).toThrow(/^config\.reward\.clip_range: expected a list of 2 numbers, got \[-10\]$/);
  });

  it('TRL and verl advantages are not clamped (their trainers have no such range)', () => {
    const trl = { ...batch({}), trainer: undefined, config: { scale_rewards: 'none' } } as GrpoBatch;
    const at = (b: GrpoBatch, trainer: 'trl' | 'verl') => Array.from(rewardAdvantages(b, 4, undefined, stepConfigOf(effectiveSettings(trainer, [fileLayer(b, 'b.json')]), 2)).advantages);
    expect(at(trl, 'trl')[3]).toBeCloseTo(75, 12);
    const verl = { ...batch({}), trainer: 'verl', config: { adv_estimator: 'grpo', norm_adv_by_std_in_grpo: false, advantage_estimator: 'verl', scale_rewards: 'none', ppo_micro_batch_size_per_gpu: 8 } } as GrpoBatch;
    expect(at(verl, 'verl')[3]).toBeCloseTo(75, 12);
  });

  it('without algo.kl.use_loss and with init_coef > 0 (the defaults) the KL is in the reward: not recomputed, both settings named', () => {
    const gap = (config: BatchConfig) => rewardAdvantageGap({ trainer: 'openrlhf', config: { 'algo.advantage.estimator': 'group_norm', advantage_estimator: 'openrlhf', ...config } });
    expect(gap({})).toMatch(/^OpenRLHF algo\.advantage\.estimator = "group_norm" with algo\.kl\.use_loss = false and algo\.kl\.init_coef = 0\.01 > 0 \(the KL penalty is in the reward\)/);
    expect(gap({ 'algo.kl.init_coef': 0.05, 'algo.kl.use_loss': false })).toMatch(/init_coef = 0\.05 > 0/);
    expect(gap({ 'algo.kl.init_coef': 0 })).toBeNull(); // no reference model, no KL anywhere
    expect(gap({ 'algo.kl.use_loss': true })).toBeNull();
  });
});

describe('TRL scale_rewards "batch" over several processes (grpo_trainer.py gathers every rank\'s rewards first)', () => {
  // Two ranks of 4 rows, G = 2. TRL: advantages (r − group mean) / (std over all 8 rewards, Bessel + 1e-4), each rank keeping its 4.
  const all = [1, 0, 1, 1, 0, 0, 3, 1];
  const mean = all.reduce((a, b) => a + b) / all.length;
  const std = Math.sqrt(all.reduce((a, r) => a + (r - mean) ** 2, 0) / (all.length - 1));
  const advantages = all.map((r, i) => (r - (all[i - (i % 2)] + all[i - (i % 2) + 1]) / 2) / (std + 1e-4));
  const batch = (rows: number[], rank: number | number[]): GrpoBatch => ({
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [2],
    rewards: rows.map((i) => all[i]), advantages: rows.map((i) => advantages[i]),
    prompt_ids: rows.map((i) => [5 + (i >> 1)]), completion_ids: rows.map(() => [7, 2]), completion_mask: rows.map(() => [1, 1]),
    config: { scale_rewards: 'batch' }, run: { num_processes: 2, rank },
  });
  const verdict = (b: GrpoBatch) => {
    const r = diagnose(b);
    return { errors: r.findings.filter((f) => f.rule === 'advantage-mismatch'), skipped: r.skipped.find((s) => s.rule === 'advantage-mismatch')?.reason };
  };

  it("one rank's rows: TRL's own advantages are not judged (no false error), and a step does not recompute them", () => {
    const rank0 = batch([0, 1, 2, 3], 0);
    expect(verdict(rank0)).toEqual({ errors: [], skipped: expect.stringMatching(/^TRL scale_rewards = "batch" over 2 processes divides by the std of every process's rewards, and this batch holds 1 of the 2 ranks/) });
    expect(rewardAdvantageGap(rank0)).toMatch(/holds 1 of the 2 ranks/);
  });

  it('every rank held: judged, and TRL\'s advantages match the rewards; a wrong one is an error', () => {
    const both = batch([0, 1, 2, 3, 4, 5, 6, 7], [0, 1]);
    expect(rewardAdvantageGap(both)).toBeNull();
    expect(verdict(both)).toEqual({ errors: [], skipped: undefined });
    expect(verdict({ ...both, advantages: both.advantages!.map((a, i) => (i === 6 ? a + 0.1 : a)) }).errors).toHaveLength(1);
  });
});
