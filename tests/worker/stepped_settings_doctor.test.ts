// One batch, one answer after the user changed an imported batch's settings on the page and stepped it: the
// findings the page shows for the update (the assemble and loss stages' Doctor, through the real StepRunner and
// the page's store) are `grpo-studio doctor`'s on the page's Export of it, and the step's own checks read the
// settings it runs with, as the CLI reads them from that file (src/bridge/batch_settings.ts withSettings).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBatchFiles, stepSettingsOfFile } from '../../src/cli/args.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { serializeBatch, widestCompletion, type GrpoBatch } from '../../src/io/batch.ts';
import { rewardAdvantageGap } from '../../src/grpo/advantages.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { createStudioStore } from '../../src/store/index.ts';
import { effectiveOf } from '../../src/store/derived.ts';
import { exportedBatch } from '../../src/store/export_batch.ts';
import { STAGES, type StageId, type StepSettings } from '../../src/bridge/protocol.ts';
import { memoryStorage } from '../helpers/page_store.ts';
import { droppedFolder } from '../helpers/dropped_folder.ts';
import { testGpu } from '../helpers/gpu.ts';

const verdicts = (findings: { rule: string; severity: string }[]) => findings.map((f) => `${f.rule}/${f.severity}`).sort();

/** A TRL batch with rewards and no advantages (the step recomputes them), left-padded prompts of two lengths. */
const trlFile = (config: Record<string, unknown>): GrpoBatch => ({
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
  prompt_ids: [[5, 6, 7], [5, 6, 7], [8, 9], [8, 9]], completion_ids: [[10, 11, 1], [12, 1], [13, 14, 15, 1], [16, 1]],
  completion_mask: [[1, 1, 1], [1, 1], [1, 1, 1, 1], [1, 1]], rewards: [1, 0, 0.5, 0.25], config: { beta: 0, ...config },
});

/**
 * The page: `file` imported, the imported batch's settings edited, the update run through `last` with the page's
 * settings, each stage's result recorded as the controller records it. Returns the store and the runner.
 */
async function pageUpdate(file: GrpoBatch, edits: Record<string, unknown>, last: StageId) {
  const runner = createStepRunner(await testGpu());
  await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
  const st = createStudioStore(memoryStorage());
  st.getState().startFromBatch('trl');
  st.getState().setImported({ batch: file, name: 'a.json', report: runner.inspect(file).report });
  for (const [k, v] of Object.entries(edits)) st.getState().setSetting('batch', 'config', k, v);
  const e = effectiveOf(st.getState());
  if ('error' in e) throw new Error(e.error);
  const { prompts, sampling, rewards, tools } = st.getState();
  const settings: StepSettings = structuredClone({ prompts, sampling, rewards, tools, settings: e.settings });
  for (const stage of STAGES.slice(0, STAGES.indexOf(last) + 1)) {
    st.getState().stageStarted(stage, stage === 'render' ? settings : undefined);
    st.getState().stageDone(await runner.runStage(stage, settings, stage === 'render' ? { kind: 'batch', batch: file } : undefined));
  }
  return { st, runner, settings };
}

/** The page's Export written and read back as `grpo-studio` reads a file: its batch, Doctor report and step settings. */
function cliOnExport(exported: GrpoBatch) {
  const path = join(mkdtempSync(join(tmpdir(), 'stepped-export-')), 'a.grpo-batch.json');
  writeFileSync(path, serializeBatch(exported, { strictJson: true }));
  const read = readBatchFiles([path]);
  return { batch: read.batch, report: diagnose(read.batch, doctorOptions(read.batch, undefined, read.inferred)), step: stepSettingsOfFile(read.batch, path) };
}

describe("an imported batch stepped with the page's settings: the page's Doctor is the CLI's on its Export", () => {
  it('scale_rewards edited from the file\'s "group" to "none": the advantages the update computed are judged under "none"', async () => {
    const { st, runner } = await pageUpdate(trlFile({ scale_rewards: 'group' }), { scale_rewards: 'none' }, 'loss');
    const cli = cliOnExport(exportedBatch(st.getState())!);
    expect(cli.batch.config?.scale_rewards).toBe('none');
    expect(verdicts(st.getState().findings)).toEqual(verdicts(cli.report.findings));
    runner.dispose();
  });

  it("position_ids edited to arange on a GPT-2 file that says from_attention_mask: both warn of the shifted positions", async () => {
    const { st, runner } = await pageUpdate(trlFile({ position_ids: 'from_attention_mask', model_type: 'gpt2' }), { position_ids: 'arange' }, 'loss');
    const cli = cliOnExport(exportedBatch(st.getState())!);
    expect(verdicts(cli.report.findings)).toContain('position-ids-shift/warning');
    expect(verdicts(st.getState().findings)).toEqual(verdicts(cli.report.findings));
    runner.dispose();
  });

  it('an Export after the assemble stage (no loss yet) records the settings the advantages on it were computed with', async () => {
    const { st, runner, settings } = await pageUpdate(trlFile({ scale_rewards: 'group', beta: 0.2 }), { scale_rewards: 'none', beta: 0.5 }, 'assemble');
    const exported = exportedBatch(st.getState())!;
    const cli = cliOnExport(exported);
    const C = widestCompletion(exported);
    expect(JSON.parse(JSON.stringify(cli.step.config))).toEqual(JSON.parse(JSON.stringify(stepConfigOf(settings.settings, C, { refuse: false }))));
    expect(verdicts(st.getState().findings)).toEqual(verdicts(cli.report.findings));
    runner.dispose();
  });

  it("multi_objective_aggregation edited to normalize_then_sum: the step refuses the studio's group advantage, as the CLI does on the Export", async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    const file = trlFile({});
    const st = createStudioStore(memoryStorage());
    st.getState().startFromBatch('trl');
    st.getState().setImported({ batch: file, name: 'a.json', report: runner.inspect(file).report });
    st.getState().setSetting('batch', 'config', 'multi_objective_aggregation', 'normalize_then_sum');
    const e = effectiveOf(st.getState());
    if ('error' in e) throw new Error(e.error);
    const { prompts, sampling, rewards, tools } = st.getState();
    const settings: StepSettings = structuredClone({ prompts, sampling, rewards, tools, settings: e.settings });
    st.getState().stageStarted('render', settings);
    // The CLI's verdict on the file the page exports: its advantages are not the studio's to recompute.
    const cliGap = rewardAdvantageGap(cliOnExport(exportedBatch(st.getState())!).batch);
    expect(cliGap).not.toBeNull();
    for (const stage of ['render', 'sample', 'reward'] as const) await runner.runStage(stage, settings, stage === 'render' ? { kind: 'batch', batch: file } : undefined);
    await expect(runner.runStage('advantages', settings)).rejects.toThrow(cliGap!);
    runner.dispose();
  });
});
