// Advantages (src/grpo/advantages.ts trlAdvantages / verlAdvantages) against every
// tests/golden/trainers/advantages case — float64 runs of TRL's advantage block and verl's estimators —
// with the README tolerances; plus the TRL settings-table checks the advantage config goes through.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { expectClose } from '../helpers/close.ts';
import { parseSafeTensors, shapeOf, toF64, toI32 } from '../../src/io/safetensors.ts';
import { trlAdvantages, verlAdvantages, type VerlAdvantageConfig } from '../../src/grpo/advantages.ts';
import { parseTrlConfig, parseTrlRun, TRL_RUN_SETTINGS, TRL_SETTINGS } from '../../src/grpo/settings/trl.ts';
import { parseSettings } from '../../src/grpo/settings/table.ts';
import { VERL_ADVANTAGE_SETTINGS } from '../../src/grpo/settings/verl_advantages.ts';
import { SettingsError } from '../../src/grpo/settings/types.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';

const DIR = path.join(GOLDEN_ROOT, 'trainers', 'advantages');
const CASES = readdirSync(DIR).filter((f) => /^case_\d+\.safetensors$/.test(f)).sort();
const TOL = { rtol: 1e-4, atol: 1e-5 };

describe('advantage golden cases', () => {
  it('are all there', () => expect(CASES.length).toBe(8));
  for (const file of CASES) {
    it(`${file}: matches the trainer's own advantages`, () => {
      const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(DIR, file))), file);
      const config = JSON.parse(st.metadata.config);
      if (st.metadata.trainer === 'trl') {
        const [B, F] = shapeOf(st, 'rewards_per_func');
        const run = parseTrlRun(JSON.parse(st.metadata.run)).values;
        expect(typeof run.rank).toBe('number'); // one process's slice
        const A = trlAdvantages(toF64(st, 'rewards_per_func'), B, F, parseTrlConfig(config).values, { num_processes: run.num_processes, rank: run.rank as number });
        expectClose(A, toF64(st, 'advantages'), { ...TOL, label: `${file} advantages` });
      } else {
        const [B, T] = shapeOf(st, 'token_level_rewards');
        const c = parseSettings<VerlAdvantageConfig>(VERL_ADVANTAGE_SETTINGS, config, 'config', { required: ['adv_estimator'] }).values;
        const r = verlAdvantages(toF64(st, 'token_level_rewards'), toI32(st, 'response_mask'), toI32(st, 'index'), B, T, c);
        expectClose(r.advantages, toF64(st, 'advantages'), { ...TOL, label: `${file} advantages` });
        expectClose(r.returns, toF64(st, 'returns'), { ...TOL, label: `${file} returns` });
      }
    });
  }
});

describe('TRL advantage semantics', () => {
  const cfg = { num_generations: 3, scale_rewards: 'group' as const, multi_objective_aggregation: 'sum_then_normalize' as const, reward_weights: null };
  it('an unscorable row (every function None) is left out of its group and gets 0', () => {
    // Group 0: rewards 1, 3 and an unscorable row: mean 2 and std √2 over the two scorable rows only.
    const A = trlAdvantages([1, 3, NaN, 0, 0, 1], 6, 1, cfg);
    expect(A[2]).toBe(0);
    expect(A[0]).toBeCloseTo(-1 / (Math.SQRT2 + 1e-4), 12);
    expect(A[1]).toBeCloseTo(1 / (Math.SQRT2 + 1e-4), 12);
  });
  it('a group with one scorable row gets 0 everywhere (nanstd is NaN)', () => {
    expect(Array.from(trlAdvantages([NaN, 5, NaN, 1, 2, 3], 6, 1, cfg).slice(0, 3))).toEqual([0, 0, 0]);
  });
  it('a partly None row keeps the functions that scored it (nansum)', () => {
    const A = trlAdvantages([1, NaN, 0, 2, 0, 0], 3, 2, { ...cfg, reward_weights: [1, 1] });
    const r = [1, 2, 0];
    const m = 1;
    const s = 1;
    r.forEach((x, i) => expect(A[i]).toBeCloseTo((x - m) / (s + 1e-4), 12));
  });
  it('returns this rank’s slice of the gathered batch', () => {
    const all = trlAdvantages([1, 2, 3, 4, 5, 7], 6, 1, cfg);
    expect(Array.from(trlAdvantages([1, 2, 3, 4, 5, 7], 6, 1, cfg, { num_processes: 2, rank: 1 }))).toEqual(Array.from(all.slice(3)));
  });
});

describe('TRL settings table', () => {
  it('scale_rewards "median" is an error naming the field', () => {
    expect(() => parseTrlConfig({ scale_rewards: 'median' })).toThrow(SettingsError);
    expect(() => parseTrlConfig({ scale_rewards: 'median' })).toThrow(/config\.scale_rewards: expected one of group, batch, none, got "median"/);
  });
  it('a batch file stepped with scale_rewards "median" is an error naming the field', () => {
    expect(() => stepConfigFromBatch({ scale_rewards: 'median' as 'group' }, 8)).toThrow(/config\.scale_rewards: expected one of group, batch, none, got "median"/);
    expect(stepConfigFromBatch({ scale_rewards: false }, 8).scale_rewards).toBe('none');
  });
  it('legacy booleans map as GRPOConfig.__post_init__ does; defaults fill the rest', () => {
    expect(parseTrlConfig({ scale_rewards: true }).values.scale_rewards).toBe('group');
    expect(parseTrlConfig({ scale_rewards: false }).values.scale_rewards).toBe('none');
    const d = parseTrlConfig({}).values;
    expect([d.loss_type, d.epsilon, d.epsilon_high, d.vllm_importance_sampling_mode, d.vllm_importance_sampling_clip_max]).toEqual(['dapo', 0.2, null, 'sequence_mask', 3]);
  });
  it('docs/trainers/trl.md names every setting of the table', () => {
    const doc = readFileSync(path.resolve(__dirname, '..', '..', 'docs', 'trainers', 'trl.md'), 'utf8');
    const missing = [...TRL_SETTINGS, ...TRL_RUN_SETTINGS].map((s) => s.name).filter((n) => !doc.includes(n) && !doc.includes(n.replace(/_(min|max|delta|neg|pos)$/, '')));
    expect(missing).toEqual([]);
  });
  it('out-of-range and wrongly typed values name the field; unknown keys are listed', () => {
    expect(() => parseTrlConfig({ beta: -1 })).toThrow(/config\.beta: -1 is out of range \(a number >= 0\)/);
    expect(() => parseTrlConfig({ num_generations: 2.5 })).toThrow(/config\.num_generations: expected an integer/);
    expect(() => parseTrlConfig({ loss_type: 'ppo' })).toThrow(/config\.loss_type: expected one of grpo, bnpo/);
    expect(() => parseTrlRun({ num_processes: 0 })).toThrow(/run\.num_processes/);
    expect(parseTrlConfig({ beta: 0.1, lr: 3 }).unknown).toEqual(['lr']);
  });
});
