// grpo-batch/v1's effective_loss_mask (the trainer's effective loss mask, written on export): it reads back
// as written, a value other than 0 / 1 or a row of the wrong length is named by field, sample and position,
// and the factor attribution of src/grpo/trainers/effective_mask.ts names the first factor that removed a token.
import { describe, expect, it } from 'vitest';
import { parseBatch, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { validateBatch } from '../../src/io/validate.ts';
import { MASK_FACTORS, maskFactors } from '../../src/grpo/trainers/effective_mask.ts';

const batch: GrpoBatch = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
  prompt_ids: [[5, 6], [5, 6]], completion_ids: [[7, 8, 1], [9, 1]], completion_mask: [[1, 1, 1], [1, 1]],
  tool_mask: [[1, 0, 1], [1, 1]], effective_loss_mask: [[1, 0, 1], [0, 1]],
};

describe('effective_loss_mask in grpo-batch/v1', () => {
  it('reads back as written', () => {
    const back = parseBatch(serializeBatch(batch));
    expect(back.effective_loss_mask).toEqual([[1, 0, 1], [0, 1]]);
    expect(validateBatch(back).filter((f) => f.severity === 'error')).toEqual([]);
  });

  it('a non-0/1 value or a short row is named', () => {
    const bad = validateBatch({ ...batch, effective_loss_mask: [[1, 0.5, 1], [0, 1]] });
    expect(bad.map((f) => f.message).join('\n')).toMatch(/effective_loss_mask\[0\]\[1\] = 0\.5: masks hold 0 or 1/);
    expect(validateBatch({ ...batch, effective_loss_mask: [[1, 0, 1]] }).map((f) => f.message).join('\n')).toMatch(/effective_loss_mask has 1 entries/);
  });
});

describe('mask factors', () => {
  it('names the first factor in order: completion, truncation, tool, entropy, off-policy, IS, rejection', () => {
    // B = 2 rows of T = 4; row 1 truncated (only its completion-masked token says "completion").
    const x = { B: 2, T: 4, completion_mask: [1, 1, 1, 0, 1, 1, 0, 0], tool_mask: [1, 0, 1, 1, 0, 1, 1, 1], truncated: [0, 1] };
    const o = {
      loss_mask: [1, 1, 1, 1, 1, 1, 1, 1],
      entropy_mask: [1, 1, 0, 1, 1, 1, 1, 1],
      off_policy_mask: null,
      importance_sampling_ratio: [0.5, 0, 1, 0, 1, 1, 1, 1],
    };
    const names = (isDrops: boolean, lm = o.loss_mask) => Array.from(maskFactors(x, { ...o, loss_mask: lm }, isDrops), (k) => MASK_FACTORS[k]);
    expect(names(true)).toEqual(['kept', 'tool', 'entropy', 'completion', 'truncation', 'truncation', 'completion', 'completion']);
    // An IS weight of 0 removes a kept token only where the trainer multiplies by it (not TRL's vespo).
    expect(names(true, [1, 1, 1, 1, 1, 1, 1, 1]).slice(0, 1)).toEqual(['kept']);
    const isZero = { ...o, importance_sampling_ratio: [0, 1, 1, 1, 1, 1, 1, 1] };
    expect(MASK_FACTORS[maskFactors(x, isZero, true)[0]]).toBe('importance sampling');
    expect(MASK_FACTORS[maskFactors(x, isZero, false)[0]]).toBe('kept');
    // verl's rejection sampling: the loss mask itself lost the token.
    expect(MASK_FACTORS[maskFactors(x, { ...o, loss_mask: [0, 1, 1, 1, 1, 1, 1, 1] }, true)[0]]).toBe('rejection sampling');
    expect(MASK_FACTORS[maskFactors(x, { ...o, off_policy_mask: [0, 1, 1, 1, 1, 1, 1, 1] }, true)[0]]).toBe('off-policy');
  });
});
