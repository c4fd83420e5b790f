// TRL's mask_truncated_completions as the step reads a batch (trainerInputs): a row is truncated when its LAST
// token is neither EOS nor pad (`ids[-1] not in eos_and_pad`, huggingface/trl grpo_trainer.py
// _generate_and_score_completions), not when it holds no EOS: a tool-calling row keeps its earlier turns' EOS.
import { describe, expect, it } from 'vitest';
import { padBatch } from '../../src/grpo/batch.ts';
import { trainerInputs } from '../../src/grpo/step_objective.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';

const EOS = 2;
const PAD = 0;

describe('mask_truncated_completions', () => {
  it('drops rows whose last token is neither EOS nor pad, whatever EOS they hold earlier', () => {
    const completion_ids = [
      [5, EOS, 9, 9, 6, 7], // a tool turn after an EOS, the last turn cut: truncated
      [5, 6, EOS], // ended: kept
      [5, 6, 7], // no EOS: truncated
      [5, 6, PAD], // ends in pad (TRL keeps it)
    ];
    const batch: GrpoBatch = {
      format: 'grpo-batch/v1',
      num_generations: 2,
      pad_token_id: PAD,
      eos_token_ids: [EOS],
      prompt_ids: completion_ids.map(() => [3, 4]),
      completion_ids,
      completion_mask: completion_ids.map((r) => r.map(() => 1)),
      tool_mask: [[1, 1, 0, 0, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]],
    };
    const padded = padBatch(batch);
    const N = padded.B * padded.C;
    const zeros = new Float32Array(N);
    const u = { padded, per_token_logps: zeros, per_token_entropy: zeros, advantages: [1, -1, 1, -1], ref_per_token_logps: null, old_per_token_logps: zeros, temperature: 1 };
    const on = trainerInputs(u, { trainer: 'trl', config: { mask_truncated_completions: true }, run: {} });
    expect(Array.from(on.truncated!)).toEqual([1, 0, 1, 0]);
    const rowMask = (b: number) => Array.from(on.x.completion_mask.subarray(b * padded.C, (b + 1) * padded.C));
    expect(rowMask(0).every((m) => m === 0)).toBe(true);
    expect(rowMask(1).slice(0, 3)).toEqual([1, 1, 1]);
    expect(trainerInputs(u, { trainer: 'trl', config: {}, run: {} }).truncated).toBeNull();
  });

  it("one EOS, the tokenizer's (run.eos_token_id): a row ending in another stop id of the batch is truncated for TRL; unnamed, such a row is refused", () => {
    const STOP = 7; // a second stop id (vLLM stops on generation_config's eos list), not the tokenizer's EOS
    const batchOf = (completion_ids: number[][]): GrpoBatch => ({
      format: 'grpo-batch/v1', num_generations: 2, pad_token_id: PAD, eos_token_ids: [EOS, STOP],
      prompt_ids: completion_ids.map(() => [3]), completion_ids, completion_mask: completion_ids.map((r) => r.map(() => 1)),
    });
    const update = (b: GrpoBatch) => {
      const padded = padBatch(b);
      const zeros = new Float32Array(padded.B * padded.C);
      return { padded, per_token_logps: zeros, per_token_entropy: zeros, advantages: b.completion_ids.map(() => 1), ref_per_token_logps: null, old_per_token_logps: zeros, temperature: 1 };
    };
    const u = update(batchOf([[5, EOS], [5, STOP], [5, 6], [5, PAD]]));
    const on = (run: Record<string, unknown>) => trainerInputs(u, { trainer: 'trl', config: { mask_truncated_completions: true }, run });
    expect(Array.from(on({ eos_token_id: EOS }).truncated!)).toEqual([0, 1, 1, 0]);
    expect(Array.from(on({ eos_token_id: STOP }).truncated!)).toEqual([1, 0, 1, 0]);
    expect(() => on({})).toThrow(/^run\.eos_token_id: sample 0 ends in 2, one of the batch's EOS ids \[2, 7\]/);
    // No row ends in an EOS id: nothing to tell apart.
    const none = update(batchOf([[5, 6], [5, PAD]]));
    expect(Array.from(trainerInputs(none, { trainer: 'trl', config: { mask_truncated_completions: true }, run: {} }).truncated!)).toEqual([1, 0]);
    // The studio's own rollout carries its loaded tokenizer's EOS: no refusal, that EOS alone ends a row.
    const own = { ...u, padded: { ...u.padded, tokenizer_eos_token_id: STOP } };
    expect(Array.from(trainerInputs(own, { trainer: 'trl', config: { mask_truncated_completions: true }, run: {} }).truncated!)).toEqual([1, 0, 1, 0]);
    // Without mask_truncated_completions the EOS ids are not read.
    expect(trainerInputs(u, { trainer: 'trl', config: {}, run: {} }).truncated).toBeNull();
  });

  it("sampling log-probs reach TRL's objective only with use_vllm (TRL holds none otherwise); verl's always", () => {
    const withSampling: GrpoBatch = {
      format: 'grpo-batch/v1', num_generations: 2, pad_token_id: PAD, eos_token_ids: [EOS],
      prompt_ids: [[3], [3]], completion_ids: [[5, EOS], [6, EOS]], completion_mask: [[1, 1], [1, 1]], sampling_per_token_logps: [[-0.5, -0.1], [-0.7, -0.2]],
    };
    const padded = padBatch(withSampling);
    const zeros = new Float32Array(padded.B * padded.C);
    const u = { padded, per_token_logps: zeros, per_token_entropy: zeros, advantages: [1, -1], ref_per_token_logps: null, old_per_token_logps: zeros, temperature: 1 };
    expect(trainerInputs(u, { trainer: 'trl', config: {}, run: {} }).x.sampling_per_token_logps).toBeNull();
    expect(Array.from(trainerInputs(u, { trainer: 'trl', config: { use_vllm: true }, run: {} }).x.sampling_per_token_logps!)).toEqual(Array.from(Float32Array.from([-0.5, -0.1, -0.7, -0.2])));
    expect(trainerInputs(u, { trainer: 'verl', config: {}, run: {} }).x.sampling_per_token_logps).not.toBeNull();
  });

  it("sequence_lengths: each row's attention_mask sum (verl's use_dynamic_bsz packs by them): masked prompt positions out, tool tokens in", () => {
    const batch: GrpoBatch = {
      format: 'grpo-batch/v1', num_generations: 2, pad_token_id: PAD, eos_token_ids: [EOS],
      prompt_ids: [[3, 4, 4], [3]], prompt_mask: [[0, 1, 1], [1]],
      completion_ids: [[5, 9, 9, 6, EOS], [6, EOS, PAD]], completion_mask: [[1, 1, 1, 1, 1], [1, 1, 0]],
      tool_mask: [[1, 0, 0, 1, 1], [1, 1, 1]],
    };
    const padded = padBatch(batch);
    const zeros = new Float32Array(padded.B * padded.C);
    const u = { padded, per_token_logps: zeros, per_token_entropy: zeros, advantages: [1, -1], ref_per_token_logps: null, old_per_token_logps: zeros, temperature: 1 };
    // Row 0: 2 prompt tokens + 5 response tokens (the tool output is attended, though not in the loss); row 1: 1 + 2.
    expect(Array.from(trainerInputs(u, { trainer: 'verl', config: {}, run: {} }).x.sequence_lengths!)).toEqual([7, 3]);
    // The padded width verl asserts its dynamic budget against: the widest prompt (3) + the widest completion (5).
    expect(trainerInputs(u, { trainer: 'verl', config: {}, run: {} }).x.sequence_width).toBe(8);
  });
});
