// The train–inference mismatch explorer in the page (issue 22), in headless chromium: the page's own update
// (the studio's sampler against the policy before the step, both f32 on the same weights) opens with a small
// mismatch and no diagnosis; each planted fixture (tests/helpers/mismatch_fixtures.ts), imported as a file,
// lists its pattern's diagnosis with exactly the planted rows and the clean one lists none; clicking a top
// token selects its cell (the token inspector shows that sample and position); the grid shows the log-ratio
// heat in nats; every trainer's correction is weighed side by side and an edit of a control (a row of the
// trainer's table) recomputes it; the trainer side recomputed by the loaded model replaces the batch's and
// back; with a LoRA adapter (lora_B ≠ 0) loaded, a sampler that holds the base's log-probs is named
// adapter-missing-on-sampler on every row. Everything is read from the DOM; the expectations come from how the
// fixtures were built.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { padBatch, raggedFromPadded } from '../../src/grpo/batch.ts';
import { serializeBatch } from '../../src/io/batch.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { adderBatch, nonzeroAdapter, TINY_ADDER } from '../helpers/adapter_mismatch.ts';
import { DIAGNOSIS_OF, plantedBatch, type Planted } from '../helpers/mismatch_fixtures.ts';
import { screenshot, studioForFile, waitForUpdate, type Studio } from './harness.ts';

let studio: Studio;
let page: Page;
studioForFile('mismatch', (s) => ({ studio, page } = { studio: s, page: s.page }));

const panel = () => page.getByTestId('mismatch-panel');

/** Waits for the explorer's answer on the batch now on screen. */
async function explorerReady(): Promise<void> {
  await expect.poll(() => panel().getAttribute('data-status'), { timeout: 60_000, interval: 200 }).toBe('ready');
}

/** The diagnoses listed: [id, data-rows] in order. */
const diagnoses = () => page.locator('[data-testid="mismatch-diagnoses"] [data-diagnosis]').evaluateAll((els) => els.map((e) => [(e as HTMLElement).dataset.diagnosis, (e as HTMLElement).dataset.rows]));

/** Writes the planted batch to a temp JSON file and imports it as a user would; waits until it is on screen. */
async function importPlanted(pattern: Planted): Promise<number[]> {
  const { batch, planted } = plantedBatch(pattern);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mismatch-')), `planted-${pattern}.json`);
  fs.writeFileSync(file, serializeBatch(batch));
  await page.getByTestId('import-input').setInputFiles(file);
  await expect.poll(() => page.getByTestId('batch-name').textContent(), { timeout: 60_000 }).toBe(path.basename(file));
  return planted;
}

describe('mismatch explorer', () => {
  it("the page's own update: both sides, a small mismatch, no diagnosis", async () => {
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    await page.getByTestId('mismatch-open').click();
    await explorerReady();
    const sides = page.getByTestId('mismatch-sides');
    // The studio's generate writes the sampler side; the trainer side is the policy's log-probs before the step.
    expect(await sides.getAttribute('data-sampler')).toBe('sampling_per_token_logps');
    expect(await sides.getAttribute('data-trainer')).toBe('old_per_token_logps');
    expect(Number(await sides.getAttribute('data-tokens'))).toBeGreaterThan(0);
    // Same weights, both f32: far below the tolerance a row needs to count as mismatched.
    expect(Number(await sides.getAttribute('data-mean-abs'))).toBeLessThan(Number(await sides.getAttribute('data-tolerance')));
    expect(await diagnoses()).toEqual([]);
    expect(await page.getByTestId('mismatch-missing').count()).toBe(0);
  });

  it('a batch without the sampler side says which field it lacks', async () => {
    const { batch } = plantedBatch('clean');
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mismatch-')), 'no-sampler.json');
    fs.writeFileSync(file, serializeBatch({ ...batch, sampling_per_token_logps: undefined }));
    await page.getByTestId('import-input').setInputFiles(file);
    await expect.poll(() => page.getByTestId('batch-name').textContent(), { timeout: 60_000 }).toBe('no-sampler.json');
    await explorerReady();
    expect(await page.getByTestId('mismatch-missing').textContent()).toContain('sampling_per_token_logps');
    expect(await page.getByTestId('mismatch-sides').count()).toBe(0);
  });

  for (const pattern of ['clean', 'off_by_one', 'divergence', 'stale', 'temperature', 'top_p'] as const) {
    it(`${pattern}: ${pattern === 'clean' ? 'no diagnosis' : `${DIAGNOSIS_OF[pattern]} on exactly the planted rows`}`, async () => {
      const planted = await importPlanted(pattern);
      await explorerReady();
      expect(await diagnoses()).toEqual(pattern === 'clean' ? [] : [[DIAGNOSIS_OF[pattern], planted.join(',')]]);
    });
  }

  it('a top token selects its cell in the grid; the grid shows the log-ratio heat in nats', async () => {
    // The top_p batch of the last test is on screen.
    const row = page.locator('[data-testid="mismatch-top"] tbody tr').nth(1);
    const [sample, position] = [await row.getAttribute('data-sample'), await row.getAttribute('data-position')];
    await row.click();
    const kv = Object.fromEntries(
      await page.getByTestId('token-inspector').locator('.kv > span:nth-child(odd)').evaluateAll((ks) => ks.map((k) => [k.textContent ?? '', k.nextElementSibling?.textContent ?? ''])),
    ) as Record<string, string>;
    expect(kv['sample / group']?.split(' / ')[0]).toBe(sample);
    expect(Object.values(kv)).toContain(`${Number(await page.getByTestId('token-grid').getAttribute('data-boundary')) + Number(position)} (completion [${position}])`);
    expect(await page.getByTestId('heat').inputValue()).toBe('log_ratio');
    expect(await page.getByTestId('heat-legend').textContent()).toContain('nats');
    await screenshot(page, 'studio-mismatch.png', true);
  });

  it('Save report carries the explorer\'s mismatch section (its diagnosis and rows), the log ratio once', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('save-report').click()]);
    const html = fs.readFileSync((await download.path())!, 'utf8');
    const { planted } = plantedBatch('top_p');
    const data = JSON.parse(/<script type="application\/json" id="data">([\s\S]*?)<\/script>/.exec(html)![1]) as { heats: Array<{ label: string }> };
    expect([...html.matchAll(/data-diagnosis="([^"]+)"/g)].map((m) => m[1])).toEqual(['sampler-renormalised']);
    expect(html).toContain(`${planted.length} row(s)`);
    // The page shows the log-ratio heat: the report has it as its mismatch heat only, not a second copy.
    expect(data.heats.filter((h) => /log ratio/.test(h.label))).toHaveLength(1);
  });

  it("corrections side by side; editing TRL's token_mask clip_min masks exactly the tokens whose ratio leaves [clip_min, clip_max]", async () => {
    // The top_p batch is still on screen: every correction is weighed once, each with its effect or the trainer's refusal.
    const table = page.getByTestId('mismatch-corrections');
    await expect.poll(() => table.locator('[data-busy="1"]').count(), { timeout: 120_000, interval: 250 }).toBe(0);
    const ids = await table.locator('[data-correction]').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.correction));
    for (const id of ['trl:token_truncate', 'trl:token_mask', 'trl:sequence_truncate', 'trl:sequence_mask']) expect(ids).toContain(id);
    expect(new Set(ids.map((id) => id!.split(':')[0]))).toEqual(new Set(['trl', 'verl', 'openrlhf']));
    const effect = table.locator('[data-correction-effect="trl:token_mask"]');
    // TRL's defaults: no lower bound, clip_max 3 — the top_p ratios (S ≤ 0.8 on planted rows, ≈ 1 elsewhere) stay inside.
    expect(await effect.getAttribute('data-masked')).toBe('0');
    // The ratio exp(old − sampling) per loss token of the batch as built, against [0.9, 3].
    const { batch } = plantedBatch('top_p');
    let want = 0;
    batch.completion_ids.forEach((row, b) =>
      row.forEach((_, t) => {
        const r = Math.exp(batch.old_per_token_logps![b][t] - batch.sampling_per_token_logps![b][t]);
        if (batch.completion_mask[b][t] === 1 && (r < 0.9 || r > 3)) want++;
      }),
    );
    expect(want).toBeGreaterThan(0);
    await page.locator('.correction-controls', { hasText: 'vllm_importance_sampling_mode = token_mask' }).locator('summary').click();
    await page.getByTestId('correction-field-trl:token_mask-vllm_importance_sampling_clip_min').fill('0.9');
    await expect.poll(() => effect.getAttribute('data-masked'), { timeout: 60_000, interval: 250 }).toBe(String(want));
    // The other corrections keep their answers (an edit recomputes its own correction only).
    expect(await table.locator('[data-correction-effect="trl:token_truncate"]').getAttribute('data-masked')).toBe('0');
    await table.scrollIntoViewIfNeeded();
    await screenshot(page, 'studio-mismatch-corrections.png');
  });

  it("recomputes the trainer side with the loaded model in the worker, and goes back to the batch's", async () => {
    const sides = page.getByTestId('mismatch-sides');
    await page.getByTestId('mismatch-recompute').click();
    await expect.poll(() => sides.getAttribute('data-trainer'), { timeout: 120_000, interval: 250 }).toBe('recomputed');
    expect(await panel().getAttribute('data-status')).toBe('ready');
    // No adapter is loaded: there is no base side to compare.
    expect(await page.getByTestId('mismatch-adapter').count()).toBe(0);
    await page.getByTestId('mismatch-dumped').click();
    await expect.poll(() => sides.getAttribute('data-trainer'), { timeout: 60_000, interval: 250 }).toBe('old_per_token_logps');
    expect(await diagnoses()).toEqual([[DIAGNOSIS_OF.top_p, plantedBatch('top_p').planted.join(',')]]);
    expect(studio.pageErrors).toEqual([]);
  });

  it('a LoRA adapter that never reached the sampler: recomputed with the adapter and without, the sampler matches the base', async () => {
    // The sampler side is the base model's own log-probs (the float64 oracle's), the adapter's lora_B ≠ 0.
    const batch = await adderBatch();
    const p = padBatch(batch);
    const base = await RefModel.from_pretrained(new FolderSource(TINY_ADDER));
    const logits = base.forward({ B: p.B, T: p.L, input_ids: p.input_ids, attention_mask: p.attention_mask, position_ids: p.position_ids }, { logits_to_keep: p.C }).logits;
    const logp = logprob_gather_forward(logits, p.completion_ids, null, p.B * p.C, base.config.vocab_size, 1).logp;
    const sampling = raggedFromPadded(logp, p);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mismatch-')), 'adapter-missing.json');
    fs.writeFileSync(file, serializeBatch({ ...batch, sampling_per_token_logps: sampling, old_per_token_logps: sampling }));
    await page.getByTestId('import-input').setInputFiles(file);
    await expect.poll(() => page.getByTestId('batch-name').textContent(), { timeout: 60_000 }).toBe('adapter-missing.json');
    await explorerReady();
    // As dumped, the trainer side is the sampler's: nothing to diagnose.
    expect(await diagnoses()).toEqual([]);
    await page.getByTestId('lora-folder-input').setInputFiles(nonzeroAdapter().dir);
    await expect.poll(() => page.getByTestId('lora-name').count(), { timeout: 60_000 }).toBe(1);
    const sides = page.getByTestId('mismatch-sides');
    await page.getByTestId('mismatch-recompute').click();
    await expect.poll(() => sides.getAttribute('data-trainer'), { timeout: 120_000, interval: 250 }).toBe('recomputed');
    await explorerReady();
    expect(await page.getByTestId('mismatch-adapter').count()).toBe(1);
    expect(await diagnoses()).toEqual([['adapter-missing-on-sampler', '0,1,2,3']]);
    await page.getByTestId('lora-remove').click();
    expect(studio.pageErrors).toEqual([]);
  });
});
