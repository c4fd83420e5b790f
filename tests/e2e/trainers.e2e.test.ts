// End-to-end checks of the trainer preset (issue 12) in headless chromium with WebGPU on SwiftShader: a TRL
// tool batch (tests/fixtures/formats/trl-rank0.safetensors: a tool call whose output tokens have tool_mask 0)
// and a vLLM-corrected batch (trl-rank1 with sampling_per_token_logps that disagree on two tokens, stepped
// with TRL's vllm_importance_sampling_mode = token_mask) are imported and stepped to their loss on the
// embedded model. The DOM's TRL loss must equal TRL's formula evaluated here in float64 on the log-probs
// `grpo-studio score` gives for the same batch and model; tool tokens show effective mask 0 with factor
// "tool", IS-masked tokens the IS factor; the step takes the preset's objective (its loss in the headline, its
// gradient in the backward), and refuses only a setting the trainer rejects;
// switching the preset to OpenRLHF changes the loss table; a what-if follows the preset (its TRL row is the
// loss table's cell of the what-if loss type).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { run as scoreCli, type ScoreResult } from '../../src/cli/score.ts';
import { readBatchFiles } from '../../src/cli/args.ts';
import { serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { dismissErrors, errorTexts, studioForFile, root, waitForUpdate, type Studio } from './harness.ts';

const MODEL = path.join(root, 'public/models/tiny-adder');
const TOOL = path.join(root, 'tests/fixtures/formats/trl-rank0.safetensors');
const VLLM_BASE = path.join(root, 'tests/fixtures/formats/trl-rank1.safetensors');
const NUM_ITEMS = 35; // the fixtures' num_items_in_batch: loss-mask tokens of both ranks
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trainers-e2e-'));

let studio: Studio;
let page: Page;

studioForFile('trainers', (s) => ({ studio, page } = { studio: s, page: s.page }));

/** The model's per-token log-probs of `file` from the CLI (`grpo-studio score`), ragged like completion_ids. */
async function scored(file: string): Promise<number[][]> {
  const out = path.join(tmp, `${path.basename(file)}.score.json`);
  expect(await scoreCli(['--model', MODEL, '--batch', file, '--out', out])).toBe(0);
  return (JSON.parse(fs.readFileSync(out, 'utf8')) as ScoreResult).per_token_logps;
}

/**
 * TRL's dapo loss (huggingface/trl grpo_trainer.py _compute_loss) in float64: L = −min(r·A, clip(r, 1 − ε,
 * 1 + ε)·A) × IS + β·k3, r = exp(logp − old), k3 = exp(ref − logp) − (ref − logp) − 1 against the batch's own
 * ref_per_token_logps (the trainer's reference, which the step reads), Σ L·M / (num_items_in_batch /
 * num_processes), M = completion_mask × tool_mask. `slope` = Σ_t |∂(β·k3_t)/∂logp_t| · (1e-4·|logp_t| + 1e-5), the
 * KL term's response to the README's per-token log-prob tolerance: the fixture's reference log-probs lie far above
 * the test model's (k3's exp(ref − logp) in the thousands), so the page's and the CLI's log-probs (SwiftShader and
 * lavapipe kernels) agreeing within it move the loss by up to `slope`; near the model (the vLLM test) it is ~0.
 */
function dapoLoss(b: GrpoBatch, logp: number[][], eps: number, numProcesses: number, is: (i: number, t: number) => number): { loss: number; slope: number } {
  const beta = b.config!.beta as number;
  const norm = NUM_ITEMS / numProcesses;
  let [sum, slope] = [0, 0];
  b.completion_ids.forEach((ids, i) => {
    for (let t = 0; t < ids.length; t++) {
      const M = b.completion_mask[i][t] * (b.tool_mask ? b.tool_mask[i][t] : 1);
      if (!M) continue;
      const A = b.advantages![i];
      const r = Math.exp(logp[i][t] - b.old_per_token_logps![i][t]);
      const d = b.ref_per_token_logps![i][t] - logp[i][t];
      sum += -Math.min(r * A, Math.min(Math.max(r, 1 - eps), 1 + eps) * A) * is(i, t) + beta * (Math.exp(d) - d - 1);
      slope += beta * Math.abs(Math.exp(d) - 1) * (1e-4 * Math.abs(logp[i][t]) + 1e-5);
    }
  });
  return { loss: sum / norm, slope: slope / norm };
}

/** The page's loss against dapoLoss: rtol 1e-4, plus what the log-probs' tolerance moves it by. */
const closeLoss = (a: number, e: { loss: number; slope: number }) => expect(Math.abs(a - e.loss), `${a} vs ${e.loss}`).toBeLessThanOrEqual(1e-4 * Math.abs(e.loss) + 1e-6 + e.slope);

async function importFile(file: string | { name: string; mimeType: string; buffer: Buffer }): Promise<void> {
  await page.getByTestId('import-input').setInputFiles(file);
  const name = typeof file === 'string' ? path.basename(file) : file.name;
  await expect.poll(async () => (await page.getByTestId('doctor-summary').textContent()) ?? '', { timeout: 30_000 }).toMatch(new RegExp(`^${name.replace('.', '\\.')}: `));
  await expect.poll(() => page.getByTestId('step-from').inputValue()).toBe('import');
}

/** Runs the update from the start; returns the stage statuses (it stops at the first failed stage). */
async function runUpdate(): Promise<string[]> {
  await dismissErrors(page);
  await page.getByTestId('step-reset').click();
  await page.getByTestId('step-run').click();
  return waitForUpdate(page, 180_000);
}

const trainerLoss = async () => Number(await page.getByTestId('trainer-loss').getAttribute('data-value'));
const inspectorRows = async () => Object.fromEntries(
  await page.getByTestId('token-inspector').locator('.kv > span:nth-child(odd)').evaluateAll((ks) => ks.map((k) => [k.textContent ?? '', k.nextElementSibling?.textContent ?? ''])),
) as Record<string, string>;

/** Selects completion position j of sample b with the keyboard (the grid starts at sample 0, the boundary). */
async function selectToken(b: number, j: number): Promise<Record<string, string>> {
  await page.getByTestId('grid-scroll').focus();
  await page.keyboard.press('Escape');
  await page.keyboard.press('ArrowUp'); // selects (0, P)
  for (let k = 0; k < b; k++) await page.keyboard.press('ArrowDown');
  for (let k = 0; k < j; k++) await page.keyboard.press('ArrowRight');
  return inspectorRows();
}

describe('trainer preset in chromium', () => {
  it('a TRL tool batch: the preset from its config, TRL’s loss, tool tokens out of the effective mask, TRL’s gradient', async () => {
    await importFile(TOOL);
    // The preset's section opens on click (closed, it keeps its fields out of the page's Tab order).
    await page.locator('summary', { hasText: 'Trainer preset: trl' }).click();
    expect(await page.getByTestId('trainer').inputValue()).toBe('trl');
    expect(await page.getByTestId('trainer-field-num_processes').inputValue()).toBe('2');
    expect(await page.getByTestId('trainer-field-gradient_accumulation_steps').inputValue()).toBe('2');
    // The file's 0-d num_items_in_batch (TRL's count gathered over both processes) fills the run context.
    expect(await page.getByTestId('trainer-field-num_items_in_batch').inputValue()).toBe(String(NUM_ITEMS));
    // Without it, dapo over 2 processes needs the generation batch's token count: named, not guessed from this rank.
    await page.getByTestId('trainer-field-num_items_in_batch').fill('');
    let statuses = await runUpdate();
    expect(statuses[STAGE.loss]).toBe('done');
    expect(await page.getByTestId('trainer-error').textContent()).toMatch(/^run\.num_items_in_batch: needed by loss_type dapo with num_processes = 2/);
    expect(statuses[STAGE.backward]).toBe('error');
    expect((await errorTexts(page, 'settings')).join('\n')).toContain('run.num_items_in_batch');
    // The loss table still shows the loss types that need no global count; dapo's cell says why it has none.
    expect(await page.locator('td[data-loss-type="dapo"]').textContent()).toBe('n/a');
    expect(await page.locator('td[data-loss-type="dapo"]').getAttribute('title')).toContain('run.num_items_in_batch');
    expect(await page.locator('td[data-loss-type="grpo"]').getAttribute('data-value')).toMatch(/^-?\d/);
    // An invalid value is refused with the field named; then the run's count.
    await page.getByTestId('trainer-field-num_items_in_batch').fill('-3');
    expect(await page.getByTestId('trainer-field-error').textContent()).toMatch(/^run\.num_items_in_batch: -3 is out of range/);
    await page.getByTestId('trainer-field-num_items_in_batch').fill(String(NUM_ITEMS));
    expect(await page.getByTestId('trainer-field-error').count()).toBe(0);
    statuses = await runUpdate();
    expect(statuses[STAGE.loss]).toBe('done');

    const batch = readBatchFiles([TOOL]).batch;
    closeLoss(await trainerLoss(), dapoLoss(batch, await scored(TOOL), 0.2, 2, () => 1));
    // The loss table: TRL's eight loss types, the preset's own (dapo) marked and equal to the loss.
    const cells = page.locator('[data-testid="loss-table"][data-trainer="trl"] td[data-loss-type]');
    expect(await cells.evaluateAll((els) => els.map((e) => e.getAttribute('data-loss-type')))).toEqual(['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'luspo', 'vespo']);
    expect(Number(await page.locator('td.chosen[data-loss-type="dapo"]').getAttribute('data-value'))).toBe(await trainerLoss());
    expect(await page.locator('td[data-loss-type="sapo"]').getAttribute('title')).toContain('σ(τ(r − 1))');
    // TRL divides by num_items_in_batch / num_processes: the step's loss and gradient are TRL's objective's.
    expect(statuses[STAGE.backward]).toBe('done');
    // The optimizer step is TRL's too: the file's learning_rate (1e-6; no global_step: the run's first step), not the page's.
    expect(Number(await page.getByTestId('optimizer-step').getAttribute('data-lr'))).toBe(1e-6);
    expect(await page.getByTestId('loss-headline').textContent()).toMatch(/^loss \(trl objective, [\w-]+\) /);
    // One rank of two, one micro-batch of two: the page says the update is the batch's own share of TRL's step (the CLI's words).
    expect(await page.getByTestId('update-scope').textContent()).toMatch(/^the trainer's optimizer step averages the gradients of 2 processes \(the batch holds rank 0's rows\) and accumulates 2 micro-batches per process/);

    // Row 4 is the tool call: positions 2 and 3 are tool output.
    expect(batch.tool_mask![4].slice(0, 6)).toEqual([1, 1, 0, 0, 1, 1]);
    const tool = await selectToken(4, 2);
    expect(tool['effective mask']).toBe('0 (tool)');
    expect(tool.tool_mask).toBe('0');
    expect((await selectToken(4, 4))['effective mask']).toBe('1');
    // The overlays: effective mask, the removing factor (legend names them), IS weights absent without vLLM.
    const heats = await page.getByTestId('heat').locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    expect(heats).toEqual(expect.arrayContaining(['effective_mask', 'mask_factor', 'trainer_loss', 'trainer_dlogp']));
    expect(heats).not.toContain('is_weight');
    await page.getByTestId('heat').selectOption('mask_factor');
    expect(await page.getByTestId('heat-legend').textContent()).toContain('tool');
    await page.getByTestId('heat').selectOption('none');

    // TRL's lr schedule (linear, no warmup): at run.global_step 10 of max_steps 20 the step takes 1e-6 · 10/20;
    // the next update continues the run one step further, 1e-6 · 9/20, its moments carried over (step 2).
    await page.getByTestId('trainer-field-global_step').fill('10');
    await page.getByTestId('trainer-field-max_steps').fill('20');
    statuses = await runUpdate();
    expect(statuses[STAGE.backward]).toBe('done');
    const lr = async () => Number(await page.getByTestId('optimizer-step').getAttribute('data-lr'));
    expect(await lr()).toBeCloseTo(1e-6 * 0.5, 20);
    await page.getByTestId('step-next-update').click();
    await waitForUpdate(page, 180_000);
    expect(await page.getByTestId('optimizer-step').textContent()).toMatch(/^adamw step 2 · lr /);
    expect(await lr()).toBeCloseTo(1e-6 * 0.45, 20);
  }, 600_000);

  it('switching the preset to OpenRLHF changes the loss table, and the step takes OpenRLHF’s gradient', async () => {
    await page.getByTestId('trainer').selectOption('openrlhf');
    // The weights continue from the earlier updates: OpenRLHF's update 1, whose cosine schedule needs its length.
    expect(await runUpdate()).toContain('error');
    expect((await page.locator('[data-testid="errors"] .error-msg').allTextContents()).join('\n')).toMatch(/run\.max_steps: actor\.lr_scheduler cosine_with_min_lr at run\.actor_optimizer_steps 1 needs the schedule's length/);
    await page.getByTestId('trainer-field-max_steps').fill('100');
    const statuses = await runUpdate();
    expect(statuses[STAGE.loss]).toBe('done');
    // OpenRLHF's own optimizer: actor.adam.lr 1e-6 at update 1 of 100, in the ⌈3⌉-step warmup: 1e-6 · (1/3).
    expect(Number(await page.getByTestId('optimizer-step').getAttribute('data-lr'))).toBe(1e-6 * (1 / 3));
    expect(await page.locator('[data-testid="loss-table"][data-trainer="openrlhf"] td[data-loss-type]').evaluateAll((els) => els.map((e) => e.getAttribute('data-loss-type')))).toEqual(['ppo', 'gspo']);
    expect(await page.getByTestId('trainer-loss').getAttribute('data-trainer')).toBe('openrlhf');
    expect(statuses[STAGE.backward]).toBe('done');
    expect(await page.getByTestId('loss-headline').textContent()).toMatch(/^loss \(openrlhf objective, [\w-]+\) /);
  }, 300_000);

  it('a vLLM-corrected batch: token_mask drops the tokens whose IS ratio leaves [clip_min, clip_max], named in the inspector', async () => {
    // trl-rank1 as grpo-batch/v1, with vLLM's log-probs 1 nat above the trainer's old ones on two tokens
    // (IS ratio e^−1 < clip_min 0.5) and TRL's vLLM settings in its config.
    const batch = readBatchFiles([VLLM_BASE]).batch;
    const off = new Set(['0:1', '3:0']);
    batch.sampling_per_token_logps = batch.old_per_token_logps!.map((row, i) => row.map((x, t) => (off.has(`${i}:${t}`) ? x + 1 : batch.sampling_per_token_logps![i][t])));
    batch.config = { ...batch.config, num_items_in_batch: NUM_ITEMS, use_vllm: true, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5, vllm_importance_sampling_clip_max: 3 };
    // A reference near the model (the fixture's sits ~10 nats above it, where k3 magnifies the backends' log-prob
    // differences thousands of times): the model's own log-probs, ±0.05 nats, keep the loss check below tight.
    batch.ref_per_token_logps = (await scored(VLLM_BASE)).map((row, i) => row.map((x, t) => x + 0.05 * Math.sin(i + 3 * t)));
    const file = path.join(tmp, 'vllm.json');
    fs.writeFileSync(file, serializeBatch(batch));
    await importFile({ name: 'vllm.json', mimeType: 'application/json', buffer: fs.readFileSync(file) });
    expect(await page.getByTestId('trainer').inputValue()).toBe('trl');
    expect(await page.getByTestId('trainer-field-vllm_importance_sampling_mode').inputValue()).toBe('token_mask');
    expect(await page.getByTestId('trainer-field-num_items_in_batch').inputValue()).toBe(String(NUM_ITEMS));
    // The earlier updates took their (trainer) steps: this one starts from the weights as loaded, as `score` reads them.
    await page.getByTestId('step-weights').selectOption('loaded');
    const statuses = await runUpdate();
    expect(statuses[STAGE.loss]).toBe('done');

    const isRatio = (i: number, t: number) => {
      const w = Math.exp(batch.old_per_token_logps![i][t] - batch.sampling_per_token_logps![i][t]);
      return w >= 0.5 && w <= 3 ? w : 0;
    };
    closeLoss(await trainerLoss(), dapoLoss(batch, await scored(file), 0.2, 2, isRatio));
    const masked = await selectToken(0, 1);
    expect(masked['effective mask']).toBe('0 (importance sampling)');
    expect(masked['IS weight']).toBe('0');
    expect((await selectToken(3, 0))['effective mask']).toBe('0 (importance sampling)');
    const kept = await selectToken(0, 0);
    expect(kept['effective mask']).toBe('1');
    expect(Number(kept['IS weight'])).toBeCloseTo(isRatio(0, 0), 3);
    const heats = await page.getByTestId('heat').locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    expect(heats).toContain('is_weight');
    // A what-if follows the preset too: TRL's bnpo with the same vLLM correction is the loss table's bnpo cell.
    await page.getByTestId('whatif-field-loss_type').selectOption('bnpo');
    await page.locator('[data-testid="whatif-table"][data-loss-type="bnpo"]').waitFor({ timeout: 30_000 });
    const trlRow = await page.locator('[data-testid="whatif-table"] tr', { hasText: 'trl loss (trainer objective)' }).locator('td').allTextContents();
    // The row shows 4 significant digits of the update's dapo (current) and the what-if's bnpo.
    const cell = async (t: string) => Number(await page.locator(`td[data-loss-type="${t}"]`).getAttribute('data-value'));
    for (const [shown, t] of [[trlRow[1], 'dapo'], [trlRow[2], 'bnpo']] as const) expect(Math.abs(Number(shown) - (await cell(t))), `${t}: ${shown}`).toBeLessThanOrEqual(5e-4 * Math.abs(await cell(t)));
    // The vLLM correction is part of TRL's objective: the step's gradient applies it.
    expect(statuses[STAGE.backward]).toBe('done');
    expect(await page.getByTestId('loss-headline').textContent()).toMatch(/^loss \(trl objective, [\w-]+\) /);
    // The export carries the effective mask, and it reads back.
    const [d] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export').click()]);
    const exported = JSON.parse(fs.readFileSync((await d.path())!, 'utf8')) as GrpoBatch;
    expect(exported.effective_loss_mask![0].slice(0, 3)).toEqual([1, 0, 1]);
    expect(exported.effective_loss_mask![3][0]).toBe(0);
    expect(studio.pageErrors).toEqual([]);
  }, 300_000);
});

/** Stage indices in the stepper (render … re_evaluate). */
const STAGE = { loss: 7, backward: 8 } as const;

