// The page's Export after an update run under another trainer than the batch's: the settings are the update's
// (the other trainer's), and what the batch's config says of the batch itself (its model's name, the chat
// template's arguments, model_type, position_ids) stays, so the exported file gets the import's Doctor verdict.
// The ids the import's reader inferred go with a batch from that file (inferred_ids), never with a prompt-set update's.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBatchFiles } from '../../src/cli/args.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { serializeBatch } from '../../src/io/batch.ts';
import { exportedBatch } from '../../src/store/export_batch.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { createStudioStore, type StudioState } from '../../src/store/index.ts';
import { memoryStorage } from '../helpers/page_store.ts';

/** A page's state (a fresh store's) with the given fields. */
const page = (s: Partial<StudioState>): StudioState => ({ ...createStudioStore(memoryStorage()).getState(), ...s });

const batch: GrpoBatch = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [2],
  prompt_ids: [[5, 6], [5, 6]], completion_ids: [[7, 2], [8, 2]], completion_mask: [[1, 1], [1, 1]], advantages: [1, -1],
  config: { loss_type: 'grpo', beta: 0.04, temperature: 0.7, model_name_or_path: 'Qwen/Qwen3-0.6B', chat_template_kwargs: { enable_thinking: false }, model_type: 'qwen3', position_ids: 'arange' },
};

describe('export after an update under another trainer', () => {
  it("keeps the batch's own facts and writes the update's settings, not the file's TRL ones", () => {
    const settings = effectiveSettings('verl', [fileLayer(batch, 'b.json'), { origin: 'edited', config: { ppo_micro_batch_size_per_gpu: 2 } }]);
    const run = { loss: {} } as unknown as StudioState['run'];
    const out = exportedBatch(page({ batch, run, runSettings: { settings } as unknown as StudioState['runSettings'], imported: null, batchOrigin: 'step', stepFrom: 'prompts' }))!;
    expect(out.trainer).toBe('verl');
    expect(out.config).toMatchObject({ model_name_or_path: 'Qwen/Qwen3-0.6B', chat_template_kwargs: { enable_thinking: false }, model_type: 'qwen3', position_ids: 'arange', ppo_micro_batch_size_per_gpu: 2 });
    // TRL's loss_type, beta and temperature are not verl's (verl's temperature is a row of its loss): the update did
    // not run with them, and the CLI must not read TRL's temperature as verl's.
    expect(out.config).not.toHaveProperty('loss_type');
    expect(out.config).not.toHaveProperty('beta');
    expect(out.config).not.toHaveProperty('temperature');
  });
});

describe("export of a batch whose reader inferred its ids", () => {
  const file = 'tests/fixtures/formats/nemo-rl-mask-on-pad.jsonl';
  const read = readBatchFiles([file]);
  const verdicts = (b: GrpoBatch, inferred: typeof read.inferred) => diagnose(b, doctorOptions(b, undefined, inferred)).findings.map((f) => `${f.rule}/${f.severity}`).sort();
  const imported = { batch: read.batch, name: 'x.jsonl', report: { findings: [], skipped: [], counts: { error: 0, warning: 0, info: 0 } }, inferred: read.inferred };

  it("keeps them marked: read back, the file's Doctor says what the import's said (a warning, not an error)", () => {
    expect(read.inferred?.pad_token_id).toBeDefined();
    const out = exportedBatch(page({ batch: read.batch, run: {}, runSettings: null, imported, batchOrigin: 'import', stepFrom: 'import' }))!;
    expect(out.inferred_ids).toEqual(read.inferred);
    const path = join(mkdtempSync(join(tmpdir(), 'export-inferred-')), 'b.grpo-batch.json');
    writeFileSync(path, serializeBatch(out, { strictJson: true }));
    const back = readBatchFiles([path]);
    expect(back.inferred).toEqual(read.inferred);
    expect(verdicts(back.batch, back.inferred)).toEqual(verdicts(read.batch, read.inferred));
    expect(verdicts(back.batch, back.inferred)).toContain('mask-covers-padding/warning');
  });

  it('a prompt-set update on screen is not the file: nothing inferred goes with it', () => {
    expect(exportedBatch(page({ batch: read.batch, run: {}, runSettings: null, imported, batchOrigin: 'step', stepFrom: 'prompts' }))!.inferred_ids).toBeUndefined();
  });
});
