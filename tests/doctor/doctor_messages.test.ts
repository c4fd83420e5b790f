// How findings read (issue 24): every rule builds its message with one template tag (src/doctor/util.ts
// msg), so a float32 value read back as float64 prints as the user wrote it (-0.8, not
// -0.7999999523162842) while ids and counts stay exact; advantage-mismatch reports one finding per wrong
// group, naming the group when all its rows are wrong and the sample when only some are.
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import { msg, showNumber } from '../../src/doctor/util.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';

describe('finding numbers', () => {
  it('prints float32 values at 4 significant digits and integers exactly', () => {
    expect(showNumber(Math.fround(-0.8))).toBe('-0.8');
    expect(showNumber(0.719952693525266)).toBe('0.72');
    expect(showNumber(151668)).toBe('151668');
    expect(showNumber(1e-9 / 3)).toBe('3.333e-10');
    expect(showNumber(NaN)).toBe('NaN');
    expect(msg`sample ${3}: ${Math.fround(-0.8)} vs ${'x'}`).toBe('sample 3: -0.8 vs x');
  });
});

describe('advantage-mismatch per group', () => {
  // G = 2, rewards [1, 0 | 2, 0]: TRL (scale_rewards="group", Bessel std, ε = 1e-4) gives
  // group 0: ±0.5 / (√0.5 + 1e-4) = ±0.7070068, group 1: ±1 / (√2 + 1e-4) = ±0.7070568.
  const a0 = 0.5 / (Math.SQRT1_2 + 1e-4);
  const a1 = 1 / (Math.SQRT2 + 1e-4);
  const batch = (advantages: number[]): GrpoBatch => ({
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
    prompt_ids: [[5, 6], [5, 6], [7, 8], [7, 8]],
    completion_ids: [[10, 1], [11, 1], [12, 1], [13, 1]],
    completion_mask: [[1, 1], [1, 1], [1, 1], [1, 1]],
    rewards: [1, 0, 2, 0],
    advantages,
  }) as GrpoBatch;
  const findings = (adv: number[]) => diagnose(batch(adv)).findings.filter((f) => f.rule === 'advantage-mismatch');

  it('is silent on the right advantages', () => {
    expect(findings([a0, -a0, a1, -a1])).toEqual([]);
  });

  it('names a group whose rows are all wrong, and a single wrong sample in another group, with readable numbers', () => {
    // Group 0 written as float32 ±0.8 (both rows wrong); group 1 has one corrupted row (sample 3).
    const fs = findings([Math.fround(0.8), Math.fround(-0.8), a1, 0.25]);
    expect(fs.map((f) => [f.sample, f.field])).toEqual([[0, 'advantages'], [3, 'advantages']]);
    expect(fs[0].message).toMatch(/^group 0: all 2 advantages \(samples 0, 1\)/);
    expect(fs[0].message).toContain('sample 0: advantage 0.8 but the rewards give 0.707 (Δ 0.09299)');
    expect(fs[0].message).not.toMatch(/0\.8000000|0\.7070067/);
    expect(fs[1].message).toMatch(/^sample 3 \(group 1\): advantage 0\.25 but the rewards give -0\.7071 \(Δ 0\.9571\)/);
  });
});
