// diffBatches on a padded trainer dump against the page's unpadded batch of the same data (issue 24): pad
// columns (prompt_mask 0 on the left, pad_token_id with completion_mask 0 on the right) are not
// differences, rewards / advantages that went through float32 ("1.2 → 1.2") are equal within the stated
// tolerance, and real differences are still found at their real positions. Expected counts are by hand.
import { describe, expect, it } from 'vitest';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { NUMBER_TOLERANCE, diffBatches } from '../../src/io/batch_diff.ts';

const PAD = 0;
// The page's batch: unpadded rows, float64 numbers.
const page: GrpoBatch = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: PAD, eos_token_ids: [1],
  prompt_ids: [[5, 6, 7], [5, 7]], completion_ids: [[8, 9, 1], [8, 1]], completion_mask: [[1, 1, 1], [1, 1]],
  rewards: [1.2, 0.3], advantages: [0.7071067811865476, -0.7071067811865476],
};
// The same data as a trainer dumps it: padded to (2, 3) prompts and (2, 5) completions, float32 numbers.
const dump = (): GrpoBatch => ({
  ...structuredClone(page),
  prompt_ids: [[5, 6, 7], [PAD, 5, 7]], prompt_mask: [[1, 1, 1], [0, 1, 1]],
  completion_ids: [[8, 9, 1, PAD, PAD], [8, 1, PAD, PAD, PAD]], completion_mask: [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]],
  rewards: page.rewards!.map(Math.fround), advantages: page.advantages!.map(Math.fround),
});

describe('diffBatches ignores padding', () => {
  it('finds a padded float32 dump of the same data identical, and says how much padding it left out', () => {
    const d = diffBatches(page, dump());
    expect(d.changed).toEqual([]);
    expect(d.summary).toMatchObject({ rows_changed: 0, prompt_tokens: 0, completion_tokens: 0, mask_entries: 0, rewards: 0, advantages: 0 });
    expect(d.pad_ignored).toBe(1 + 2 + 3); // one prompt pad, 2 + 3 completion pads
    expect(d.tolerance).toBe(NUMBER_TOLERANCE);
    expect(Math.fround(1.2)).not.toBe(1.2); // the case the tolerance is for
  });

  it('is symmetric: the dump against the page batch is identical too', () => {
    expect(diffBatches(dump(), page).summary.rows_changed).toBe(0);
  });

  it('still finds real differences, at their real positions, beside padding', () => {
    const b = dump();
    b.completion_ids[1][1] = 2; // the EOS replaced: real position 1
    b.prompt_ids[1][1] = 4; // the first real prompt token (2nd from the end)
    b.rewards![0] = 1.25; // beyond any f32 rounding
    const d = diffBatches(page, b);
    expect(d.changed.map((r) => r.sample)).toEqual([0, 1]);
    expect(d.changed[0].reward).toEqual([1.2, 1.25]);
    expect(d.changed[1].completion).toEqual([1]);
    expect(d.changed[1].prompt_from_end).toEqual([2]);
    expect(d.summary).toMatchObject({ rows_changed: 2, prompt_tokens: 1, completion_tokens: 1, mask_entries: 0, rewards: 1 });
  });

  it('reports a number off by more than one f32 ulp', () => {
    const b = dump();
    b.advantages![1] = -0.7071067811865476 * (1 + 4 * NUMBER_TOLERANCE);
    expect(diffBatches(page, b).changed.map((r) => [r.sample, r.advantage !== null])).toEqual([[1, true]]);
  });

  it('treats a masked real token (a truncated completion) as a token, not padding', () => {
    const b = dump();
    b.completion_ids[0] = [8, 9, 3, PAD, PAD]; // truncated: no EOS, all masked
    b.completion_mask[0] = [0, 0, 0, 0, 0];
    const d = diffBatches(page, b);
    expect(d.changed[0].completion).toEqual([2]);
    expect(d.changed[0].completion_mask).toEqual([0, 1, 2]);
    expect(d.pad_ignored).toBe(1 + 2 + 3);
  });

  it('counts a longer real completion on one side as extra tokens, not its padding', () => {
    const b = dump();
    b.completion_ids[1] = [8, 9, 9, 1, PAD];
    b.completion_mask[1] = [1, 1, 1, 1, 0];
    const d = diffBatches(page, b);
    expect(d.changed[0].completion).toEqual([1, 2, 3]); // 1 → 9 at 1, then two tokens on one side only
    expect(d.changed[0].completion_mask).toEqual([2, 3]);
  });
});
