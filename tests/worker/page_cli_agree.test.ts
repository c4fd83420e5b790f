// One batch, one answer between the page's update (src/worker/runner.ts) and the CLI: an imported batch whose
// reader inferred its pad id keeps the import's Doctor verdict through the assemble and loss stages (a finding
// resting on the guessed id stays a warning, as `grpo-studio doctor` says); a prompt-set update's StepConfig is
// the one the CLI reads back from its export (stepSettingsOfFile): the studio loss's L_max under verl, which no
// layer sets, is the batch's widest completion on both sides, not the sampling budget.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBatchFiles, stepSettingsOfFile } from '../../src/cli/args.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { serializeBatch, widestCompletion } from '../../src/io/batch.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { exportedBatch } from '../../src/store/export_batch.ts';
import { createStudioStore } from '../../src/store/index.ts';
import { memoryStorage } from '../helpers/page_store.ts';
import { STAGES, type StagePayloads, type StepSettings, type StepStart } from '../../src/bridge/protocol.ts';
import type { DoctorReport } from '../../src/doctor/types.ts';
import { smallSettings } from '../helpers/small_settings.ts';
import { droppedFolder } from '../helpers/dropped_folder.ts';
import { testGpu } from '../helpers/gpu.ts';

const verdicts = (r: DoctorReport) => r.findings.map((f) => `${f.rule}/${f.severity}`).sort();

/** Runs the update's stages up to and including `last`, returning each stage's payload. */
async function runTo(runner: ReturnType<typeof createStepRunner>, last: (typeof STAGES)[number], settings: StepSettings, start?: StepStart): Promise<Partial<StagePayloads>> {
  const out: Partial<StagePayloads> = {};
  for (const stage of STAGES.slice(0, STAGES.indexOf(last) + 1)) {
    const r = await runner.runStage(stage, settings, stage === 'render' ? start : undefined);
    (out as Record<string, unknown>)[stage] = r.data;
  }
  return out;
}

describe("the page's update and the CLI agree", () => {
  it("an imported batch's inferred pad id: the stages' Doctor keeps the import's warnings (no error the CLI does not give)", async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    const file = 'tests/fixtures/formats/nemo-rl-mask-on-pad.jsonl';
    const read = readBatchFiles([file]);
    const inferred = read.inferred;
    expect(inferred?.pad_token_id).toBeDefined();
    // Without the trainer's log-probs, so the loss stage checks the batch again with the policy's (StageExtras.loss).
    const batch = { ...read.batch, old_per_token_logps: undefined };
    // The CLI (`grpo-studio doctor`, no tokenizer): the mask over padding rests on the inferred pad id, a warning.
    const cli = diagnose(batch, doctorOptions(batch, undefined, inferred));
    expect(verdicts(cli)).toContain('mask-covers-padding/warning');
    expect(cli.counts.error).toBe(0);
    // The page's import of it with the model loaded: the same verdict.
    const imported = runner.inspect(batch, { inferred }).report;
    expect(verdicts(imported)).toEqual(verdicts(cli));
    // Stepping it: the assembled batch's report replaces the findings on screen, and the loss stage's after it.
    const run = await runTo(runner, 'loss', smallSettings(2, 4), { kind: 'batch', batch, inferred });
    expect(verdicts(run.assemble!.report)).toEqual(verdicts(cli));
    // The loss stage's re-check adds the sampler-vs-trainer rule (a random policy): the padding verdict stays the CLI's.
    expect(verdicts(run.loss!.report)).toContain('mask-covers-padding/warning');
    expect(verdicts(run.loss!.report)).not.toContain('mask-covers-padding/error');
    runner.dispose();
  });

  it("a prompt-set update under verl: the page's StepConfig is the one the CLI reads from the exported batch", async () => {
    const runner = createStepRunner(await testGpu());
    const info = await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    // Every id an EOS: each completion stops at its first token, so the batch (width 1) is narrower than the budget (6).
    const settings = smallSettings(2, 6, true, { config: { ppo_micro_batch_size_per_gpu: 2 } }, 'verl');
    settings.sampling = { ...settings.sampling, eos_token_ids: Array.from({ length: info.vocab_size }, (_, i) => i) };
    const run = await runTo(runner, 'loss', settings);
    const assembled = run.assemble!;
    const C = widestCompletion(assembled.batch);
    expect(C).toBeLessThan(settings.sampling.max_new_tokens);

    // The page's export, read back as the CLI reads a file.
    const exported = exportedBatch({ ...createStudioStore(memoryStorage()).getState(), batch: assembled.batch, run, runSettings: settings, imported: null, batchOrigin: 'step', stepFrom: 'prompts' })!;
    const path = join(mkdtempSync(join(tmpdir(), 'page-cli-')), 'update.grpo-batch.json');
    writeFileSync(path, serializeBatch(exported, { strictJson: true }));
    const cli = stepSettingsOfFile(readBatchFiles([path]).batch, path).config;
    // The batch on screen already holds the settings the update ran with: the export writes those, no others.
    expect(exported.trainer).toBe(assembled.batch.trainer);
    expect(exported.config).toEqual(assembled.batch.config);
    expect(cli.loss.max_completion_length).toBe(C);
    // dr_grpo's Σ L·M / (B · L_max) with the CLI's L_max, from the page's per-token loss: the page's number.
    const { B, C: T, completion_mask: M } = assembled.padded;
    let sum = 0;
    for (let i = 0; i < B * T; i++) sum += M[i] * run.loss!.per_token_loss[i];
    const want = sum / (B * cli.loss.max_completion_length);
    expect(Math.abs(run.loss!.studio_losses.dr_grpo - want)).toBeLessThanOrEqual(1e-6 * Math.max(1e-6, Math.abs(want)));
    runner.dispose();
  });
});
