// diffBatches (src/io/batch_diff.ts): rows aligned by index, prompts compared from their right end (a
// longer left-padded prompt is one change at its start, not a shift of every token), completions from
// their start; mask entries, rewards (NaN equals NaN) and config keys; identical batches have no changes.
import { describe, expect, it } from 'vitest';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { diffBatches } from '../../src/io/batch_diff.ts';

const base: GrpoBatch = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
  prompt_ids: [[5, 6, 7], [5, 6, 7]], completion_ids: [[8, 9, 1], [8, 1]], completion_mask: [[1, 1, 1], [1, 1]],
  rewards: [1, NaN], config: { loss_type: 'dapo', beta: 0 },
};

describe('diffBatches', () => {
  it('finds nothing between a batch and its copy', () => {
    const d = diffBatches(base, structuredClone(base));
    expect(d.changed).toEqual([]);
    expect(d.summary).toEqual({ rows_changed: 0, prompt_tokens: 0, completion_tokens: 0, mask_entries: 0, rewards: 0, advantages: 0, config: [], only_in_one: 0 });
  });

  it('names each changed token, mask entry, reward and config key', () => {
    const b = structuredClone(base);
    b.prompt_ids[0] = [4, 5, 6, 7]; // one more token in front: aligned from the end, one change
    b.completion_ids[1] = [8, 2, 1]; // a changed token and one more
    b.completion_mask[1] = [1, 0, 1];
    b.rewards = [0, NaN];
    b.config = { loss_type: 'grpo', beta: 0 };
    const d = diffBatches(base, b);
    expect(d.changed.map((r) => r.sample)).toEqual([0, 1]);
    expect(d.changed[0].prompt_from_end).toEqual([4]);
    expect(d.changed[0].reward).toEqual([1, 0]);
    expect(d.changed[1].completion).toEqual([1, 2]);
    expect(d.changed[1].completion_mask).toEqual([1, 2]);
    expect(d.changed[1].reward).toBeNull();
    expect(d.summary).toMatchObject({ rows_changed: 2, prompt_tokens: 1, completion_tokens: 2, mask_entries: 2, rewards: 1, config: ['loss_type'] });
  });

  it('counts rows present on one side only', () => {
    const b = { ...structuredClone(base), completion_ids: [[8, 9, 1]], completion_mask: [[1, 1, 1]], prompt_ids: [[5, 6, 7]] };
    expect(diffBatches(base, b).summary.only_in_one).toBe(1);
  });
});
