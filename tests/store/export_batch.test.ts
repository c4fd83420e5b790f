// The page's Export after an update run under another trainer than the batch's: the settings are the update's
// (the other trainer's), and what the batch's config says of the batch itself (its model's name, the chat
// template's arguments, model_type, position_ids) stays, so the exported file gets the import's Doctor verdict.
import { describe, expect, it } from 'vitest';
import { exportedBatch } from '../../src/store/export_batch.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import type { StudioState } from '../../src/store/index.ts';

const batch: GrpoBatch = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [2],
  prompt_ids: [[5, 6], [5, 6]], completion_ids: [[7, 2], [8, 2]], completion_mask: [[1, 1], [1, 1]], advantages: [1, -1],
  config: { loss_type: 'grpo', beta: 0.04, temperature: 0.7, model_name_or_path: 'Qwen/Qwen3-0.6B', chat_template_kwargs: { enable_thinking: false }, model_type: 'qwen3', position_ids: 'arange' },
};

describe('export after an update under another trainer', () => {
  it("keeps the batch's own facts and writes the update's settings, not the file's TRL ones", () => {
    const settings = effectiveSettings('verl', [fileLayer(batch, 'b.json'), { origin: 'edited', config: { ppo_micro_batch_size_per_gpu: 2 } }]);
    const run = { loss: {} } as unknown as StudioState['run'];
    const out = exportedBatch({ batch, run, runSettings: { settings } as unknown as StudioState['runSettings'] })!;
    expect(out.trainer).toBe('verl');
    expect(out.config).toMatchObject({ model_name_or_path: 'Qwen/Qwen3-0.6B', chat_template_kwargs: { enable_thinking: false }, model_type: 'qwen3', position_ids: 'arange', ppo_micro_batch_size_per_gpu: 2 });
    // TRL's loss_type, beta and temperature are not verl's (verl's temperature is a row of its loss): the update did
    // not run with them, and the CLI must not read TRL's temperature as verl's.
    expect(out.config).not.toHaveProperty('loss_type');
    expect(out.config).not.toHaveProperty('beta');
    expect(out.config).not.toHaveProperty('temperature');
  });
});
