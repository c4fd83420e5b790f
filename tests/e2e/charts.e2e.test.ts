// The summary charts (issue 24: recharts where its axes, legends and tooltips serve the reader), in headless
// chromium: on an 8-row batch planted here (rewards with one zero-std group, advantages with zeros, sampler
// and trainer log-probs a fixed d = ±0.5 apart at one probability) the rewards chart, the mismatch histogram
// and the by-probability plot each draw an SVG with both axes and one bar per non-zero planted value / occupied
// bin; after the default model's update the stage-timing chart has a bar per stage the stepper shows done and
// the before / after chart a pair of bars per prompt group. Every expected count comes from the planted values
// or the default task's shape (4 prompts × 8 completions), never from the charts' own numbers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { screenshot, studioForFile, waitForUpdate } from './harness.ts';

let page: Page;
studioForFile('charts', (s) => (page = s.page));

const EOS = 304; // tiny-adder's EOS
const B = 8;
const G = 4;
const rewards = [1, 0.2, 1, 0.2, 0.5, 0.5, 0.5, 0.5]; // group 1 (samples 4–7) has zero std
const advantages = [0.8, -0.8, 0.8, -0.8, 0, 0, 0, 0];
const SAMPLER_P = 0.6;
/** d = trainer − sampler per row: +0.5 on rows 0–5, −0.5 on rows 6–7 (so the mean over the batch is not 0). */
const d = (b: number) => (b < 6 ? 0.5 : -0.5);

function plantedBatch(): string {
  const completion = (b: number) => [20 + b, 21, EOS];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'charts-')), 'charts-planted.json');
  fs.writeFileSync(
    file,
    JSON.stringify({
      format: 'grpo-batch/v1',
      num_generations: G,
      pad_token_id: 0,
      eos_token_ids: [EOS],
      prompt_ids: Array.from({ length: B }, (_, b) => [10 + Math.floor(b / G), 11, 12]),
      completion_ids: Array.from({ length: B }, (_, b) => completion(b)),
      completion_mask: Array.from({ length: B }, (_, b) => completion(b).map(() => 1)),
      sampling_per_token_logps: Array.from({ length: B }, (_, b) => completion(b).map(() => Math.log(SAMPLER_P))),
      old_per_token_logps: Array.from({ length: B }, (_, b) => completion(b).map(() => Math.log(SAMPLER_P) + d(b))),
      rewards,
      advantages,
    }),
  );
  return file;
}

/** A recharts chart as the reader gets it: its SVGs, its two axes' tick labels, its bars' fills and shaded areas. */
async function chartShape(chart: Locator) {
  // recharts lays the axes out after its first render (it measures the container): wait until both have ticks.
  await expect.poll(() => chart.locator('.recharts-cartesian-axis-tick-value').count(), { timeout: 30_000 }).toBeGreaterThan(0);
  return chart.evaluate((el) => {
    const ticks = (axis: string) => Array.from(el.querySelectorAll(`.recharts-${axis}-tick-labels .recharts-cartesian-axis-tick-value`)).map((t) => (t.textContent ?? '').trim());
    return {
      // The plot's own SVG (the legend's icons are small SVGs of their own).
      svgs: el.querySelectorAll('.recharts-wrapper > svg').length,
      xTicks: ticks('xAxis'),
      yTicks: ticks('yAxis'),
      fills: Array.from(el.querySelectorAll('.recharts-bar-rectangle path')).map((p) => p.getAttribute('fill')),
      areas: el.querySelectorAll('.recharts-reference-area').length,
    };
  });
}

/** The bars one series draws (a zero value draws none). */
const bars = (chart: Locator, series: string) => chart.locator(`.series-${series} .recharts-bar-rectangle`).count();

describe('summary charts (recharts)', () => {
  it('rewards and advantages per sample, the mismatch histogram and the by-probability plot of a planted batch', async () => {
    await page.getByTestId('import-input').setInputFiles(plantedBatch());
    await expect.poll(() => page.getByTestId('batch-name').textContent(), { timeout: 60_000 }).toContain('charts-planted');

    const rewardsChart = page.getByTestId('chart-rewards');
    const r = await chartShape(rewardsChart);
    expect(r.svgs).toBe(1);
    expect(r.xTicks.length).toBeGreaterThan(1);
    expect(r.yTicks.length).toBeGreaterThan(1);
    // Every x tick names a sample 0 … B − 1.
    expect(r.xTicks.every((t) => Number(t) >= 0 && Number(t) < B)).toBe(true);
    // A bar per non-zero value (a zero draws no rectangle): 8 rewards, the 4 advantages outside the flat group.
    expect(await bars(rewardsChart, 'reward')).toBe(rewards.filter((v) => v !== 0).length);
    expect(await bars(rewardsChart, 'advantage')).toBe(advantages.filter((v) => v !== 0).length);
    // The one zero-std group (samples 4–7) is shaded.
    expect(r.areas).toBe(1);
    expect(await rewardsChart.locator('.recharts-legend-item').allTextContents()).toEqual(['reward', 'advantage']);
    // The tooltip names the sample and its group.
    const bar = rewardsChart.locator('.series-reward .recharts-bar-rectangle').nth(5);
    await bar.hover();
    await expect.poll(() => rewardsChart.locator('.recharts-tooltip-wrapper').textContent()).toContain('sample 5 · group 1');
    await rewardsChart.scrollIntoViewIfNeeded();
    await screenshot(page, 'charts-rewards.png');

    await page.getByTestId('mismatch-open').click();
    await expect.poll(() => page.getByTestId('mismatch-panel').getAttribute('data-status'), { timeout: 60_000 }).toBe('ready');
    // d takes two values, −0.5 and +0.5, at the two ends of the histogram: two occupied bins, one of each sign's colour.
    const histogram = page.getByTestId('mismatch-histogram');
    const h = await chartShape(histogram);
    expect(h.svgs).toBe(1);
    expect(h.xTicks.length).toBeGreaterThan(1);
    expect(h.yTicks.length).toBeGreaterThan(1);
    expect(await bars(histogram, 'value')).toBe(2);
    expect(new Set(h.fills).size).toBe(2);
    // Every token has the sampler probability 0.6: one probability bin, its mean d ≠ 0.
    const byP = page.getByTestId('mismatch-by-probability');
    const p = await chartShape(byP);
    expect(p.svgs).toBe(1);
    expect(p.yTicks.length).toBeGreaterThan(1);
    expect(await bars(byP, 'value')).toBe(1);
    await screenshot(page, 'charts-mismatch.png');
    await page.getByTestId('mismatch-open').click();
  });

  it('stage timings: a bar per stage done; before / after: a pair of bars per prompt group', async () => {
    await page.getByTestId('step-from').selectOption('prompts');
    await page.getByTestId('step-run').click();
    const statuses = await waitForUpdate(page);
    expect(statuses).not.toContain('error');
    const timings = page.getByTestId('chart-timings');
    const t = await chartShape(timings);
    expect(t.svgs).toBe(1);
    expect(t.xTicks.length).toBeGreaterThan(1);
    // The category axis lists the stages; one bar per stage that ran (a stage's time is > 0).
    expect(await bars(timings, 'ms')).toBe(statuses.filter((s) => s === 'done').length);
    expect(t.yTicks.length).toBe(statuses.filter((s) => s === 'done').length);

    await page.getByTestId('before-after-run').click();
    const chart = page.getByTestId('chart-before-after-groups');
    await chart.waitFor({ timeout: 240_000 });
    const b = await chartShape(chart);
    expect(b.svgs).toBe(1);
    // The default task: 4 prompts, 8 completions each → 4 groups on the x axis.
    expect(b.xTicks).toEqual(['0', '1', '2', '3']);
    expect(b.yTicks.length).toBeGreaterThan(1);
    // A bar per group whose mean reward is not 0, on each side: the table's "before → after" column says which.
    const cells = await page.getByTestId('before-after').locator('tbody tr:not(.chosen) td:nth-child(2)').allTextContents();
    expect(cells.length).toBe(4);
    const sides = cells.map((c) => c.split('→').map((x) => Number(x.trim())));
    expect(await bars(chart, 'before')).toBe(sides.filter(([x]) => x !== 0).length);
    expect(await bars(chart, 'after')).toBe(sides.filter(([, y]) => y !== 0).length);
    await chart.scrollIntoViewIfNeeded();
    await screenshot(page, 'charts-before-after.png');
  });
});
