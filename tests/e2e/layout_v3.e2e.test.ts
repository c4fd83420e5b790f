// End-to-end checks of Studio v3's layout, heat scale and row order (issue 24, first part), in headless
// chromium with the default model: at 1280×800 and 1920×1080 no side-panel table, select or label is clipped
// (scrollWidth ≤ clientWidth in the DOM, no single number wrapped, all 8 TRL loss types inside the panel);
// the side panels resize and collapse by keyboard and keep their width over a reload; the grid's height does
// not depend on which token the inspector shows, is at least 300 px at 1280×800, and End on the last row keeps
// it in view; on a planted batch
// (rewards, lengths, an outlier log-prob and a mask defect chosen here), rows sort and filter and the heat
// scale's controls work, both walked with Tab / arrow keys / Enter only. Expected orders and percentiles are
// computed here from the planted values, never read from the page's own derivations.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { screenshot, studioForFile, waitForUpdate } from './harness.ts';

const SIZES = [
  { width: 1280, height: 800 },
  { width: 1920, height: 1080 },
] as const;
const EOS = 304; // tiny-adder's EOS; every id below is inside its 328-token vocabulary

let page: Page;
studioForFile('layout-v3', (s) => (page = s.page));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'layout-v3-'));

/** Presses Tab until the focused element has test id `testid` (at most `max` presses). */
async function tabTo(testid: string, max = 300): Promise<void> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if ((await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.testid)) === testid) return;
  }
  throw new Error(`Tab never reached ${testid}`);
}

/** With a <select> focused: ArrowDown / ArrowUp until its value is `value`. */
async function arrowTo(value: string): Promise<void> {
  for (const key of ['ArrowDown', 'ArrowUp']) {
    for (let i = 0; i < 40; i++) {
      if ((await page.evaluate(() => (document.activeElement as HTMLSelectElement).value)) === value) return;
      await page.keyboard.press(key);
    }
  }
  throw new Error(`the focused select never took ${value}`);
}

const shownSamples = () => page.getByTestId('grid-row').evaluateAll((rs) => rs.map((r) => Number((r as HTMLElement).dataset.sample)));
const selectedSample = () => page.locator('.grid-label.sel').getAttribute('data-sample');
const legend = async () => {
  const l = page.getByTestId('heat-legend');
  return { lo: Number(await l.getAttribute('data-lo')), hi: Number(await l.getAttribute('data-hi')), mode: await l.getAttribute('data-mode'), unit: await page.getByTestId('heat-unit').textContent() };
};

/** Every clipped table / select / label in the side panels (all their sections opened), and every wrapped number. */
function clipped(): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const g = document.createElement('canvas').getContext('2d')!;
    for (const aside of Array.from(document.querySelectorAll<HTMLElement>('aside.left, aside.right'))) {
      const box = aside.getBoundingClientRect();
      const right = box.left + aside.clientWidth; // the panel's inner edge, left of its scrollbar
      for (const el of Array.from(aside.querySelectorAll<HTMLElement>('table, select, label'))) {
        const r = el.getBoundingClientRect();
        if (r.width === 0) continue;
        const name = `${aside.className}: ${el.tagName} ${el.dataset.testid ?? (el.textContent ?? '').trim().slice(0, 30)}`;
        if (el.scrollWidth > el.clientWidth + 1) out.push(`${name}: scrollWidth ${el.scrollWidth} > clientWidth ${el.clientWidth}`);
        if (r.right > right + 1) out.push(`${name}: right edge ${Math.round(r.right)} past the panel's ${Math.round(right)}`);
        if (el instanceof HTMLSelectElement && el.selectedOptions[0]) {
          // A select's text is cut inside its box, which scrollWidth does not see: its text plus the arrow must fit.
          g.font = getComputedStyle(el).font;
          const need = g.measureText(el.selectedOptions[0].text).width + 20;
          if (need > el.clientWidth + 1) out.push(`${name}: "${el.selectedOptions[0].text}" needs ${Math.round(need)} px, has ${el.clientWidth}`);
        }
      }
      // A table cell holding one word or number reads on one line.
      for (const cell of Array.from(aside.querySelectorAll<HTMLElement>('td, th'))) {
        const t = (cell.textContent ?? '').trim();
        if (!t || /\s/.test(t) || cell.getBoundingClientRect().width === 0) continue;
        const range = document.createRange();
        range.selectNodeContents(cell);
        const lines = new Set(Array.from(range.getClientRects()).filter((q) => q.width > 0).map((q) => Math.round(q.top)));
        if (lines.size > 1) out.push(`${aside.className}: cell "${t}" wraps onto ${lines.size} lines`);
      }
    }
    return out;
  });
}

/** A 12-row batch (G = 4) with values planted to sort by, an outlier log-prob, and a completion_mask one entry too long on row 5. */
const planted = {
  rewards: [0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.0, 1.0, 0.35],
  lengths: [3, 5, 2, 7, 4, 6, 3, 8, 5, 2, 4, 6],
  // old log-probs: small negatives everywhere, one −40 on row 3 (the outlier a min–max range stretches to).
  logp: (b: number, j: number) => (b === 3 && j === 0 ? -40 : -0.05 * (j + 1) - 0.01 * b),
};
function plantedBatch(): string {
  const B = 12;
  const completion = (b: number) => Array.from({ length: planted.lengths[b] }, (_, j) => (j === planted.lengths[b] - 1 ? EOS : 20 + ((b + j) % 9)));
  const file = path.join(tmp, 'planted.json');
  fs.writeFileSync(
    file,
    JSON.stringify({
      format: 'grpo-batch/v1',
      num_generations: 4,
      pad_token_id: 0,
      eos_token_ids: [EOS],
      prompt_ids: Array.from({ length: B }, (_, b) => [10 + Math.floor(b / 4), 11, 12]),
      completion_ids: Array.from({ length: B }, (_, b) => completion(b)),
      completion_mask: Array.from({ length: B }, (_, b) => completion(b).map(() => 1).concat(b === 5 ? [1] : [])),
      old_per_token_logps: Array.from({ length: B }, (_, b) => completion(b).map((_, j) => planted.logp(b, j))),
      rewards: planted.rewards,
    }),
  );
  return file;
}

/** numpy's default (linear) quantile, written out here for the expectation. */
function quantile(values: number[], q: number): number {
  const v = [...values].sort((a, b) => a - b);
  const h = (v.length - 1) * q;
  const i = Math.floor(h);
  return v[i] + (h - i) * ((v[i + 1] ?? v[i]) - v[i]);
}

describe('studio v3 layout, heat scale and row order in chromium', () => {
  it('clips no side-panel table, select or label at 1280×800 and 1920×1080 (a what-if on screen); all 8 TRL loss types and small numbers read whole', async () => {
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    // A what-if (its table has Δ columns), then every section open (the trainer form, the template diff's selects, the loss table).
    await page.getByTestId('whatif-field-loss_type').selectOption('bnpo');
    await page.getByTestId('whatif-table').waitFor({ timeout: 60_000 });
    await page.locator('aside details').evaluateAll((ds) => ds.forEach((d) => ((d as HTMLDetailsElement).open = true)));
    for (const size of SIZES) {
      await page.setViewportSize(size);
      await page.waitForTimeout(400);
      const tag = `${size.width}×${size.height}`;
      await screenshot(page, `layout-v3-${size.width}.png`);
      const cut = await clipped();
      expect(cut, `${tag}: ${cut.join(' | ')}`).toEqual([]);
      const types = await page.getByTestId('loss-table').locator('[data-loss-type]').evaluateAll((cs) => {
        const aside = cs[0].closest('aside')!;
        const right = aside.getBoundingClientRect().left + aside.clientWidth;
        return cs.map((c) => ({ type: (c as HTMLElement).dataset.lossType, inside: c.getBoundingClientRect().right <= right + 1 }));
      });
      // TRL's loss_type values (trl/trainer/grpo_config.py): grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo.
      expect(types.length, tag).toBe(8);
      expect(types.filter((t) => !t.inside), tag).toEqual([]);
    }
  });

  it('keeps the grid as tall with a prompt token as with a completion token selected, ≥ 300 px at 1280×800; End on the last row keeps it in view', async () => {
    await page.setViewportSize(SIZES[0]);
    await page.waitForTimeout(300);
    const P = Number(await page.getByTestId('token-grid').getAttribute('data-boundary'));
    await page.getByTestId('grid-scroll').focus();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('Home'); // column 0: the prompt side
    expect(await page.getByTestId('token-inspector').textContent()).toContain('prompt');
    const promptH = await page.locator('.grid-body').evaluate((b) => b.clientHeight);
    for (let i = 0; i < P; i++) await page.keyboard.press('ArrowRight'); // column P: the first completion token
    expect(await page.getByTestId('token-inspector').textContent()).toContain('completion [0]');
    const completionH = await page.locator('.grid-body').evaluate((b) => b.clientHeight);
    expect(completionH).toBe(promptH);
    // A compact stepper and toolbar leave the grid's canvas at least 300 px of a 1280×800 window after a full
    // update (every stage's time and memory shown); it had about 140 px before.
    expect(promptH).toBeGreaterThanOrEqual(300);
    await page.keyboard.press('Control+End');
    await page.keyboard.press('End');
    await page.waitForTimeout(200);
    const rows = Number(await page.getByTestId('token-grid').getAttribute('data-rows'));
    expect(await selectedSample()).toBe(String(rows - 1));
    const seen = await page.locator('.grid-label.sel').evaluate((r) => {
      const [a, b] = [r.getBoundingClientRect(), document.querySelector('.grid-body')!.getBoundingClientRect()];
      return a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
    });
    expect(seen).toBe(true);
  });

  it('resizes and collapses the side panels from the keyboard and keeps their widths over a reload', async () => {
    await page.setViewportSize(SIZES[1]);
    const width = () => page.locator('aside.right').evaluate((a) => Math.round(a.getBoundingClientRect().width));
    const before = await width();
    await page.getByTestId('resize-right').focus();
    for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowLeft'); // the right panel grows leftwards
    await expect.poll(width).toBeGreaterThan(before + 30);
    const grown = await width();
    await page.getByTestId('collapse-left').focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('aside.left').evaluate((a) => a.getBoundingClientRect().width)).toBeLessThan(40);
    await page.keyboard.press('Enter'); // the same button expands it again
    await expect.poll(() => page.locator('aside.left').evaluate((a) => a.getBoundingClientRect().width)).toBeGreaterThan(200);
    await page.reload();
    await page.getByTestId('model-info').waitFor({ timeout: 120_000 });
    expect(await width()).toBe(grown);
  });

  it('sorts and filters rows by keyboard alone; labels, keyboard walk and selection follow the order', async () => {
    await page.setViewportSize(SIZES[0]);
    await page.getByTestId('import-input').setInputFiles(plantedBatch());
    await expect.poll(() => page.getByTestId('batch-name').textContent(), { timeout: 60_000 }).toContain('planted');
    // Select sample 6 (its label), then walk to the sort menu with Tab only.
    await page.locator('[data-testid="grid-row"][data-sample="6"]').click();
    await page.locator('h1').click();
    await tabTo('row-sort');
    await arrowTo('reward');
    const byReward = planted.rewards.map((r, b) => [r, b]).sort((x, y) => y[0] - x[0] || x[1] - y[1]).map(([, b]) => b);
    await expect.poll(shownSamples).toEqual(byReward); // descending by default
    expect(await selectedSample()).toBe('6');
    await page.keyboard.press('Tab'); // the direction toggle
    expect(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.testid)).toBe('row-sort-dir');
    await page.keyboard.press('Enter');
    await expect.poll(shownSamples).toEqual([...byReward].reverse());
    // The grid's ArrowDown walks the sorted order: after 6 (reward 0.8) comes 1 (reward 0.9).
    await page.getByTestId('grid-scroll').focus();
    await page.keyboard.press('ArrowDown');
    expect(await selectedSample()).toBe(String([...byReward].reverse()[[...byReward].reverse().indexOf(6) + 1]));
    // Sorted by length, ascending (the direction stays): ties in batch order.
    await page.locator('h1').click();
    await tabTo('row-sort');
    await arrowTo('length');
    const byLength = planted.lengths.map((n, b) => [n, b]).sort((x, y) => x[0] - y[0] || x[1] - y[1]).map(([, b]) => b);
    await expect.poll(shownSamples).toEqual(byLength);
    // Rows with findings: those the Doctor's findings name (row 5's mask among them), in the same order.
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.testid)).toBe('row-filter-findings');
    await page.keyboard.press('Enter');
    const named = new Set((await page.locator('[data-testid="findings"] [data-sample]').evaluateAll((fs) => fs.map((f) => Number((f as HTMLElement).dataset.sample)))));
    expect(named.has(5)).toBe(true);
    await expect.poll(shownSamples).toEqual(byLength.filter((b) => named.has(b)));
    expect(await page.getByTestId('rows-shown').textContent()).toBe(`${named.size} of 12 rows`);
    await page.keyboard.press('Enter'); // off again
    await page.locator('h1').click();
    await tabTo('row-sort');
    await arrowTo('');
    await expect.poll(shownSamples).toEqual(Array.from({ length: 12 }, (_, b) => b));
  });

  it('sets the heat scale by keyboard alone: percentile clipping past an outlier, fixed and symmetric ranges, the unit', async () => {
    await page.locator('h1').click();
    await tabTo('heat');
    await arrowTo('old_logp');
    // Min–max is the default for log-probs (not signed): the outlier −40 sets the low end, 0 the top.
    expect(await legend()).toMatchObject({ lo: -40, hi: 0, mode: 'minmax', unit: 'nats' });
    await tabTo('heat-range', 5);
    await arrowTo('percentile');
    const masked = planted.lengths.flatMap((n, b) => Array.from({ length: n }, (_, j) => planted.logp(b, j)));
    const p = await legend();
    expect(p.mode).toBe('percentile');
    expect(p.lo).toBeCloseTo(quantile(masked, 0.01), 4);
    expect(p.hi).toBeCloseTo(quantile(masked, 0.99), 4);
    expect(p.lo).toBeGreaterThan(-40); // among 55 values, p1 still lies part-way to the outlier
    await tabTo('heat-clip', 3);
    await arrowTo('5');
    const p5 = await legend();
    expect(p5.lo).toBeCloseTo(quantile(masked, 0.05), 4);
    expect(p5.lo).toBeGreaterThan(-1); // p5–p95: the outlier no longer sets the range
    await page.keyboard.press('Shift+Tab');
    await arrowTo('fixed');
    await tabTo('heat-lo', 3);
    await page.keyboard.press('Control+A');
    await page.keyboard.type('-2');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('-0.5');
    await page.keyboard.press('Enter');
    expect(await legend()).toMatchObject({ lo: -2, hi: -0.5, mode: 'fixed' });
    await tabTo('heat-symmetric', 3);
    await page.keyboard.press('Enter');
    expect(await page.getByTestId('heat-symmetric').getAttribute('aria-pressed')).toBe('true');
    expect(await legend()).toMatchObject({ lo: -2, hi: 2 });
  });

  it('says the unit: nats for Δ log-prob and KL-like heats, none for the ratio; the mask-factor "completion" swatch is visible', async () => {
    await page.getByTestId('step-from').selectOption('prompts');
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    await page.getByTestId('heat').selectOption('dlogp');
    expect((await legend()).unit).toBe('nats');
    expect((await legend()).mode).toBe('percentile'); // signed: p1–p99 by default
    await page.getByTestId('heat').selectOption('ratio');
    expect((await legend()).unit).toBe('');
    await page.getByTestId('heat').selectOption('mask_factor');
    const swatch = await page.getByTestId('heat-legend').locator('span', { hasText: 'completion' }).locator('i').evaluate((i) => getComputedStyle(i).backgroundColor);
    const [r, g, b] = swatch.match(/\d+/g)!.map(Number);
    // Against the panel (#161b22 = 22, 27, 34): a swatch at least 60 levels brighter on average reads as a colour.
    expect((r + g + b) / 3 - (22 + 27 + 34) / 3).toBeGreaterThan(60);
    await page.getByTestId('heat').selectOption('none');
  });
});
