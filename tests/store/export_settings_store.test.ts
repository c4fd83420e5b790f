// What the page's Export records of the settings, read back by the CLI's own functions on the written file
// (stepSettingsOfFile), against what the page resolves: before any update the next update's settings (the user's
// edits on the imported batch included), once an update started the settings it runs with, with a notice naming
// the form's later changes; edits that cannot be formed are refused, not left out. And Defaults on an imported
// batch: its own trainer and settings again, as the CLI resolves the file.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBatchFiles, stepSettingsOfFile } from '../../src/cli/args.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { serializeBatch, widestCompletion, type GrpoBatch } from '../../src/io/batch.ts';
import { trainerOfBatch } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { StudioFailure } from '../../src/bridge/errors.ts';
import { createStudioStore } from '../../src/store/index.ts';
import { effectiveOf } from '../../src/store/derived.ts';
import { exportedBatch, exportNote } from '../../src/store/export_batch.ts';
import type { StepSettings } from '../../src/bridge/protocol.ts';
import { memoryStorage } from '../helpers/page_store.ts';

const trlFile = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
  prompt_ids: [[5, 6, 7], [5, 6, 7], [8, 9], [8, 9]], completion_ids: [[10, 11, 1], [12, 1], [13, 14, 15, 1], [16, 1]],
  completion_mask: [[1, 1, 1], [1, 1], [1, 1, 1, 1], [1, 1]], rewards: [1, 0, 0.5, 0.25],
  config: { scale_rewards: 'batch', beta: 0.2, loss_type: 'dr_grpo', epsilon: 0.3, temperature: 0.7, learning_rate: 3e-6 },
} as unknown as GrpoBatch;

const C = widestCompletion(trlFile);
const plain = (x: unknown) => JSON.parse(JSON.stringify(x));

function write(b: GrpoBatch, name: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'export-settings-')), name);
  writeFileSync(path, serializeBatch(b, { strictJson: true }));
  return path;
}

/** The page with `b` imported as the controller imports it (its trainer, no edits). */
function pageWith(b: GrpoBatch, name: string) {
  const st = createStudioStore(memoryStorage());
  st.getState().startFromBatch(trainerOfBatch(b));
  st.getState().setImported({ batch: b, name, report: diagnose(b, doctorOptions(b)) });
  return st;
}

/** The StepConfig of the settings the page resolves now for the next update. */
function pageNext(st: ReturnType<typeof createStudioStore>, C: number) {
  const e = effectiveOf(st.getState());
  if ('error' in e) throw new Error(e.error);
  return { settings: e.settings, step: stepConfigOf(e.settings, C, { refuse: false }) };
}

/** The page's Export, written and read back by the CLI: the settings `grpo-studio step` resolves from it. */
function cliOnExport(st: ReturnType<typeof createStudioStore>) {
  const path = write(exportedBatch(st.getState())!, 'a.grpo-batch.json');
  return stepSettingsOfFile(readBatchFiles([path]).batch, path);
}

describe("the Export's settings", () => {
  it('without an update: the edits made on the imported batch are in the file (the CLI resolves what the page would run)', () => {
    const st = pageWith(trlFile, 'x.json');
    st.getState().setSetting('batch', 'config', 'beta', 0.5);
    st.getState().setTrainer('batch', 'verl');
    st.getState().setSetting('batch', 'config', 'ppo_micro_batch_size_per_gpu', 2);
    const page = pageNext(st, C);
    const cli = cliOnExport(st);
    expect(cli.settings.trainer).toBe(page.settings.trainer);
    expect(plain(cli.config)).toEqual(plain(page.step));
    expect(exportNote(st.getState())).toBeNull();
  });

  it("once an update started: the settings it runs with, whatever the form says later, and a notice names what the file leaves out", () => {
    const st = pageWith(trlFile, 'x.json');
    st.getState().setSetting('batch', 'config', 'beta', 0.5);
    const ran = pageNext(st, C);
    const { prompts, sampling, rewards, tools } = st.getState();
    const settings: StepSettings = structuredClone({ prompts, sampling, rewards, tools, settings: ran.settings });
    // Its first stage is under way: the batch on screen is still the imported one, no result folded in yet.
    st.getState().stageStarted('render', settings);
    expect(plain(cliOnExport(st).config)).toEqual(plain(ran.step));
    expect(exportNote(st.getState())).toBeNull();
    // The form changes after the update started: the file still holds the update's settings, and says so.
    st.getState().setSetting('batch', 'config', 'beta', 0.9);
    expect(plain(cliOnExport(st).config)).toEqual(plain(ran.step));
    expect(exportNote(st.getState())).toContain('config.beta');
  });

  it('edits that cannot be formed are refused with the reason, not left out of the file', () => {
    const st = pageWith(trlFile, 'x.json');
    st.getState().setSetting('batch', 'config', 'beta', 'lots');
    const e = effectiveOf(st.getState());
    expect('error' in e).toBe(true);
    expect(() => exportedBatch(st.getState())).toThrow(StudioFailure);
    expect(() => exportedBatch(st.getState())).toThrow((e as { error: string }).error);
  });
});

describe('Defaults on an imported batch', () => {
  it("after a switch to another trainer: the batch's own trainer and settings, as the CLI resolves the file", () => {
    const path = write(trlFile, 'x.grpo-batch.json');
    const b = readBatchFiles([path]).batch;
    const st = pageWith(b, 'x.grpo-batch.json');
    st.getState().setTrainer('batch', 'verl');
    st.getState().setSetting('batch', 'config', 'ppo_micro_batch_size_per_gpu', 2);
    st.getState().resetSettings();
    const page = pageNext(st, C);
    const cli = stepSettingsOfFile(b, path);
    expect(page.settings.trainer).toBe(cli.settings.trainer);
    expect(plain(page.settings.config)).toEqual(plain(cli.settings.config));
    expect(plain(page.step)).toEqual(plain(cli.config));
  });
});
