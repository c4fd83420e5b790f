// verl's dynamic micro-batches (src/grpo/trainers/verl_dynamic.ts) against verl's own partition functions, run
// unchanged on 200 seeded length lists (tests/golden/trainers/verl_dynamic.json), and the count rule of
// rearrange_micro_batches: min(rows, ⌈Σ lengths ÷ budget⌉), maxed over the ranks.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { karmarkarKarp, verlDynamicMicroBatches } from '../../src/grpo/trainers/verl_dynamic.ts';
import { SettingsError } from '../../src/grpo/settings/types.ts';

interface Case { lengths: number[]; k: number; workloads: number[]; partitions: number[][] }
const golden = JSON.parse(readFileSync(path.join(TRAINER_GOLDEN, 'verl_dynamic.json'), 'utf8')) as { cases: Case[] };

describe("verl's karmarkar_karp", () => {
  it('gives the partitions verl gives, in its order, on every golden case (ties in sums, counts and items included)', () => {
    expect(golden.cases.length).toBe(200);
    for (const c of golden.cases) {
      // calculate_workload as verl's: 24576·len + len².
      expect(c.workloads).toEqual(c.lengths.map((n) => 24576 * n + n * n));
      expect(karmarkarKarp(c.workloads, c.k), `${c.lengths} into ${c.k}`).toEqual(c.partitions);
    }
  });

  it('covers every row once, each part non-empty and ascending (fast-check)', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 50 }), fc.integer({ min: 1, max: 12 }), (lengths, k0) => {
      const k = Math.min(k0, lengths.length);
      const parts = karmarkarKarp(lengths.map((n) => 24576 * n + n * n), k);
      expect(parts.length).toBe(k);
      expect(parts.flat().sort((a, b) => a - b)).toEqual(lengths.map((_, i) => i));
      for (const p of parts) expect(p.length > 0 && p.every((r, i) => i === 0 || r > p[i - 1])).toBe(true);
    }));
  });

  it('more parts than rows is refused as verl asserts', () => {
    expect(() => karmarkarKarp([5, 6], 3)).toThrow(SettingsError);
    expect(() => karmarkarKarp([5, 6], 3)).toThrow(/2 rows for 3 micro-batches/);
  });
});

describe('rearrange_micro_batches: how many micro-batches', () => {
  const count = (lengths: number[][], budget: number) => verlDynamicMicroBatches(lengths, budget, 'budget').map((r) => r.length);
  it('⌈Σ ÷ budget⌉ per rank, at most its rows, the most of any rank on every rank', () => {
    expect(count([[10, 10, 10]], 30)).toEqual([1]); // exactly the budget: one
    expect(count([[10, 10, 11]], 30)).toEqual([2]); // one token past: two
    expect(count([[30, 30, 30]], 30)).toEqual([3]);
    expect(count([[1, 1], [30, 29]], 30)).toEqual([2, 2]); // rank 0 alone would be one
    expect(count([[30, 30]], 30)).toEqual([2]);
  });
  it('a row longer than the budget is refused naming the setting (verl asserts max_token_len >= the sequence length)', () => {
    expect(() => verlDynamicMicroBatches([[5, 31]], 30, 'config.ppo_max_token_len_per_gpu: 30')).toThrow(/^config\.ppo_max_token_len_per_gpu: 30: 30 tokens per dynamic micro-batch, but a row holds 31/);
    expect(() => verlDynamicMicroBatches([[5], [31]], 30, 'b')).toThrow(/rank 1's row holds 31/);
    // verl asserts the budget against the padded width (attention_mask.shape[-1]), not the longest row.
    expect(() => verlDynamicMicroBatches([[5, 20]], 30, 'b', 31)).toThrow(/^b: 30 tokens per dynamic micro-batch, but the batch is 31 tokens wide \(prompts \+ responses, padded\)/);
    expect(verlDynamicMicroBatches([[5, 20]], 30, 'b', 30)).toEqual([[[0, 1]]]);
  });
});
