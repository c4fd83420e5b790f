// Issue 24, second part, in headless chromium: μ = 2 passes over the page's own batch (TRL num_iterations
// set in the trainer panel) show a second pass whose ratio moved off 1, with clipped tokens under a small ε
// and a KL that moved off the first pass's 0 (the first update's reference is the policy itself, which the
// page explains beside the KL); the pass selector switches the grid's ratio heat to that pass. And the batch
// diff: the page's batch pinned, then a trainer-style dump of the same data (prompts left-padded with
// prompt_mask, completions right-padded, rewards / advantages through float32) reads "identical".
import fs from 'node:fs';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { dismissErrors, studioForFile, waitForUpdate, screenshot, type Studio } from './harness.ts';

let studio: Studio;
let page: Page;

studioForFile('passes', (s) => ({ studio, page } = { studio: s, page: s.page }));

/** Sets a setting by its field's test id, opening the folded sections and groups it sits in first. */
async function setField(testId: string, value: string): Promise<void> {
  const field = page.getByTestId(testId);
  await field.evaluate((el) => {
    for (let d = el.closest('details'); d; d = d.parentElement?.closest('details') ?? null) d.open = true;
  });
  await field.fill(value);
  await expect.poll(() => field.inputValue()).toBe(value);
}

describe('μ > 1 passes and the padding-free diff', () => {
  it('steps twice over the batch: pass 2 ratio ≠ 1, clipped tokens, KL off 0; the heat follows the pass', async () => {
    void studio;
    await setField('trainer-field-num_iterations', '2');
    await setField('loss-field-epsilon', '0.001');
    await setField('loss-field-beta', '0.04');
    await dismissErrors(page);
    await page.getByTestId('step-run').click();
    const statuses = await waitForUpdate(page, 420_000);
    expect(statuses).not.toContain('error');
    const rows = page.getByTestId('passes').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    const cell = (r: number, c: number) => rows.nth(r).locator('td').nth(c).textContent();
    // Pass 1: ratio exactly 1 (old = the policy before it), KL 0 (reference = the policy), nothing clipped; the note says why.
    expect(Number(await cell(0, 3))).toBe(0);
    expect(await rows.nth(0).getAttribute('data-clipped')).toBe('0');
    expect(await page.getByTestId('kl-zero-note').textContent()).toMatch(/first pass of the page's first update/);
    // Pass 2: the ratio moved, ε = 0.001 clips, the KL moved.
    expect(Number(await cell(1, 3))).toBeGreaterThan(0.001);
    expect(Number(await rows.nth(1).getAttribute('data-clipped'))).toBeGreaterThan(0);
    expect(Number(await cell(1, 2))).toBeGreaterThan(0);
    // The passes' sparklines (recharts): one point per pass in each of loss, mean KL and clipped tokens, with both axes.
    for (const k of ['loss', 'kl', 'clipped']) {
      const line = page.getByTestId(`pass-sparkline-${k}`);
      await expect.poll(() => line.locator('.recharts-line-dot').count()).toBe(2);
      expect(await line.locator('.recharts-xAxis-tick-labels text').count()).toBeGreaterThan(0);
      expect(await line.locator('.recharts-yAxis-tick-labels text').count()).toBeGreaterThan(0);
    }
    // The ratio heat follows the pass selector: all 1 on pass 1, not on pass 2.
    await page.getByTestId('heat').selectOption('ratio');
    const legend = () => page.getByTestId('heat-legend').textContent();
    const first = await legend();
    await page.getByTestId('pass').selectOption('2');
    await expect.poll(legend).not.toBe(first);
    await screenshot(page, 'passes-mu2.png', true);
    await page.getByTestId('heat').selectOption('none');
  }, 480_000);

  it("finds a padded float32 dump of the page's batch identical to it", async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export').click()]);
    const text = fs.readFileSync((await download.path())!, 'utf8');
    const b = JSON.parse(text) as { pad_token_id: number; prompt_ids: number[][]; completion_ids: number[][]; completion_mask: number[][]; prompt_mask?: number[][]; rewards?: (number | null)[]; advantages?: number[] } & Record<string, unknown>;
    await page.getByTestId('import-input').setInputFiles({ name: 'page.json', mimeType: 'application/json', buffer: Buffer.from(text) });
    await expect.poll(() => page.getByTestId('doctor-summary').textContent(), { timeout: 30_000 }).toContain('page.json');
    await page.getByTestId('diff-pin').click();
    // The trainer's dump: every row padded to the widest (prompts left, completions right), numbers through float32.
    const P = Math.max(...b.prompt_ids.map((r) => r.length));
    const C = Math.max(...b.completion_ids.map((r) => r.length));
    const pad = b.pad_token_id;
    const perToken = Object.keys(b).filter((k) => k !== 'completion_ids' && k !== 'completion_mask' && Array.isArray(b[k]) && Array.isArray((b[k] as unknown[])[0]) && (b[k] as unknown[][]).every((r, i) => r.length === b.completion_ids[i].length));
    const dump = {
      ...b,
      prompt_mask: b.prompt_ids.map((r) => [...Array(P - r.length).fill(0), ...r.map(() => 1)]),
      prompt_ids: b.prompt_ids.map((r) => [...Array(P - r.length).fill(pad), ...r]),
      completion_ids: b.completion_ids.map((r) => [...r, ...Array(C - r.length).fill(pad)]),
      completion_mask: b.completion_mask.map((r) => [...r, ...Array(C - r.length).fill(0)]),
      ...Object.fromEntries(perToken.map((k) => [k, (b[k] as number[][]).map((r) => [...r, ...Array(C - r.length).fill(0)])])),
      rewards: b.rewards?.map((x) => (x === null ? null : Math.fround(x))),
      advantages: b.advantages?.map(Math.fround),
    };
    await page.getByTestId('import-input').setInputFiles({ name: 'dump.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(dump)) });
    const summary = page.getByTestId('diff-summary');
    await expect.poll(() => summary.textContent(), { timeout: 30_000 }).toContain('dump.json');
    expect(await summary.textContent()).toContain('identical');
    expect(Number(await page.getByTestId('diff-rules').getAttribute('data-pad-ignored'))).toBeGreaterThan(0);
  }, 120_000);
});
