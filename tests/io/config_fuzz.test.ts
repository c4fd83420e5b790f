// Issue 13, config values (fast-check): random `config` objects built from valid and invalid values of the
// fields the step and score read. Whatever the validator accepts, the step's own resolution accepts too (no
// config passes validation and then fails mid-computation), every accepted value lies in its field's
// domain, and every rejection names its field in one line.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { effectiveSettings } from '../../src/grpo/settings/effective.ts';
import { validateConfig } from '../../src/io/validate.ts';

const junk = [null, '1.0', '', true, -1, 0, NaN, Infinity, [], {}, 'median', 1.5, 2];
const FIELDS: Record<string, unknown[]> = {
  loss_type: ['grpo', 'dr_grpo', 'dapo', 'bnpo', 'ppo', 'GRPO'],
  beta: [0, 0.04, 1],
  epsilon: [0.2, 0, 0.99],
  epsilon_high: [0.28, null, 0],
  delta: [null, 1.5, 4],
  temperature: [1, 0.7, 1e-3],
  kl_estimator: ['k1', 'k2', 'k3', 'k4'],
  importance_sampling_level: ['token', 'sequence', 'seq'],
  scale_rewards: ['group', 'batch', 'none', true, false],
  advantage_estimator: ['trl', 'verl', 'grpo'],
  max_completion_length: [1, 16, 256],
  max_grad_norm: [1, 0.5],
  position_ids: ['from_attention_mask', 'arange', 'left'],
};

const config = fc.dictionary(fc.constantFrom(...Object.keys(FIELDS)), fc.constant(null), { maxKeys: 6 }).chain((keys) =>
  fc.record(Object.fromEntries(Object.keys(keys).map((k) => [k, fc.constantFrom(...FIELDS[k], ...junk)]))),
);

describe('config fuzzing', () => {
  it('accepted by the validator ⇒ accepted by the step; rejections name the field', () => {
    fc.assert(
      fc.property(config, (c) => {
        const problems = validateConfig(c as Record<string, unknown>);
        for (const [field, message] of problems) {
          expect(Object.keys(c).map((k) => `config.${k}`)).toContain(field);
          expect(message.startsWith(`${field} = `)).toBe(true);
          expect(message).not.toContain('\n');
        }
        if (problems.length) return;
        const s = stepConfigOf(effectiveSettings('trl', [{ origin: 'file', config: c }]), 8);
        if ('temperature' in c) expect(s.loss.temperature).toBeGreaterThan(0);
        if ('scale_rewards' in c) expect(['group', 'batch', 'none']).toContain(s.scale_rewards);
        if ('position_ids' in c) expect(['from_attention_mask', 'arange']).toContain(s.position_ids);
      }),
      { numRuns: 1000 },
    );
  });
});
