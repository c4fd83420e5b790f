// End-to-end checks of Studio v2 (issue 15) and the page side of issue 13, in headless chromium with
// WebGPU on SwiftShader. Each check reads the DOM or the canvas' pixels (not screenshots alone), and the
// layout checks run at 1600×1000 and at 1280×800: the grid draws its last rows, the token inspector is
// above the fold, the left panel's content fits it, chart labels do not overlap. Then: keyboard-only
// stepping, moving through tokens and opening a finding; results that keep the settings they were
// computed with; stage results before "assemble"; the sampler-vs-trainer log-prob rule on the page's own
// runs; the loaded tokenizer on imported batches; a batch-level finding that selects no row; strict-JSON
// export; invalid form values and empty prompts refused; a failed stage in red; a failed load that keeps
// the working model.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { NONFINITE_NOTE } from '../../src/io/batch.ts';
import { dismissErrors, errorTexts, studioForFile, root, screenshot, stageStatuses, waitForUpdate, type Studio } from './harness.ts';

const fixture = path.join(root, 'tests/e2e/fixtures/r1-mask-mismatch.json');
const SIZES = [
  { width: 1600, height: 1000 },
  { width: 1280, height: 800 },
] as const;

let studio: Studio;
let page: Page;

studioForFile('studio-v2', (s) => ({ studio, page } = { studio: s, page: s.page }));

/** Presses Tab until the focused element matches `pred` (at most `max` presses); returns the test ids seen on the way. */
async function tabUntil(pred: (el: { testid: string; cls: string }) => boolean, max = 250): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const el = await page.evaluate(() => ({ testid: (document.activeElement as HTMLElement | null)?.dataset.testid ?? '', cls: document.activeElement?.className ?? '' }));
    seen.push(el.testid);
    if (pred(el)) return seen;
  }
  throw new Error(`focus never reached the target in ${max} Tab presses; saw ${seen.filter(Boolean).join(', ')}`);
}

const activeTestId = () => page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.testid ?? document.activeElement?.tagName ?? '');
const inspectorRows = async (id: string) => Object.fromEntries(
  await page.getByTestId(id).locator('.kv > span:nth-child(odd)').evaluateAll((ks) => ks.map((k) => [k.textContent ?? '', k.nextElementSibling?.textContent ?? ''])),
) as Record<string, string>;

/** The layout checks that depend on the window size, on the 32-row batch of a default update. */
async function checkLayout(size: { width: number; height: number }): Promise<void> {
  const tag = `${size.width}×${size.height}`;
  // The last rows' cells are on screen and painted: scroll the rows to the bottom, then hit-test and read
  // back the boundary pixel on each of the last four rows (they were clipped: rows 28–31 / 24–31).
  await page.locator('.grid-body').evaluate((b) => (b.scrollTop = b.scrollHeight));
  // The boundary column in view at this width (the grid scrolled to it when the batch arrived, at the old width).
  await page.getByTestId('grid-scroll').evaluate((s) => {
    const P = Number(s.closest('[data-boundary]')!.getAttribute('data-boundary'));
    const cellW = (s.firstElementChild as HTMLElement).clientWidth / Number(s.closest('[data-width]')!.getAttribute('data-width'));
    s.scrollLeft = Math.max(0, P * cellW - s.clientWidth / 4);
  });
  await page.waitForTimeout(200);
  const last = await page.getByTestId('grid-canvas').evaluate((c: HTMLCanvasElement) => {
    const scroller = c.parentElement!.parentElement as HTMLElement;
    const W = Number(c.closest('[data-width]')!.getAttribute('data-width'));
    const P = Number(c.closest('[data-boundary]')!.getAttribute('data-boundary'));
    const cellW = c.parentElement!.clientWidth / W;
    const body = document.querySelector('.grid-body')!.getBoundingClientRect();
    const cr = c.getBoundingClientRect();
    const g = c.getContext('2d')!;
    return Array.from(document.querySelectorAll<HTMLElement>('[data-testid="grid-row"]')).slice(-4).map((r) => {
      const rr = r.getBoundingClientRect();
      const y = rr.top + rr.height / 2;
      const x = scroller.getBoundingClientRect().left + P * cellW - scroller.scrollLeft - 1;
      const d = g.getImageData(Math.round((x - cr.left) * devicePixelRatio), Math.round((y - cr.top) * devicePixelRatio), 1, 1).data;
      return { sample: r.dataset.sample, inBody: y < body.bottom && y < innerHeight, hit: document.elementFromPoint(x, y) === c, px: [d[0], d[1], d[2]] };
    });
  });
  expect(last.map((r) => r.sample), tag).toEqual(['28', '29', '30', '31']);
  for (const r of last) {
    expect(r.inBody && r.hit, `${tag} row ${r.sample} visible on the canvas`).toBe(true);
    expect(r.px[0], `${tag} row ${r.sample} boundary pixel`).toBeGreaterThan(200); // #f2cc60
    expect(r.px[2]).toBeLessThan(140);
  }
  // The token inspector starts above the fold with room to read it.
  const insp = await page.getByTestId('token-inspector').boundingBox();
  expect(insp!.y + 120, `${tag} token inspector top at ${insp!.y}`).toBeLessThanOrEqual(size.height);
  // The left panel's content fits its width (no control cut off at the right edge).
  const left = await page.locator('aside.left').evaluate((a) => {
    const box = a.getBoundingClientRect();
    const over = Array.from(a.querySelectorAll<HTMLElement>('input:not([hidden]), select, textarea, button'))
      .filter((e) => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > box.right + 1)
      .map((e) => e.getAttribute('aria-label') ?? e.dataset.testid ?? e.textContent ?? e.tagName);
    return { over, scroll: a.scrollWidth - a.clientWidth };
  });
  expect(left.over, tag).toEqual([]);
  expect(left.scroll, tag).toBeLessThanOrEqual(1);
  // No two tick labels of one chart axis overlap (the charts' ticks are DOM labels over their canvas).
  const overlaps = await page.locator('.chart-plot').evaluateAll((plots) =>
    plots.flatMap((plot, k) =>
      ['.tick.x', '.tick.y'].flatMap((axis) => {
        const boxes = Array.from(plot.querySelectorAll(axis)).map((t) => t.getBoundingClientRect());
        const out: string[] = [];
        for (let i = 0; i < boxes.length; i++)
          for (let j = i + 1; j < boxes.length; j++) {
            const [a, b] = [boxes[i], boxes[j]];
            if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) out.push(`chart ${k} ${axis}: ticks ${i} / ${j}`);
          }
        return out;
      }),
    ),
  );
  // The check looked at ticks: every chart on screen has some.
  expect(await page.locator('.chart-plot .tick').count(), tag).toBeGreaterThan(0);
  expect(overlaps, tag).toEqual([]);
}

describe('studio v2 in chromium', () => {
  it('is operable by keyboard alone: Tab reaches Import and the folder picker, steps, keeps focus, arrows move through tokens', async () => {
    await page.locator('h1').click();
    const seen = await tabUntil((el) => el.testid === 'step-run');
    expect(seen).toContain('import-button');
    expect(seen).toContain('model-folder-button');
    await page.keyboard.press('Enter');
    expect(await waitForUpdate(page)).not.toContain('error');
    // Run to end disabled itself on completion: focus went to Reset, not to <body>.
    await expect.poll(activeTestId, { timeout: 5_000 }).toBe('step-reset');
    await tabUntil((el) => el.testid === 'grid-scroll', 40);
    const P = Number(await page.getByTestId('token-grid').getAttribute('data-boundary'));
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowRight');
    const rows = await inspectorRows('token-inspector');
    expect(rows['sample / group']).toBe('2 / 0');
    expect(rows.position).toBe(`${P + 1} (completion [1])`);
    await page.keyboard.press('Shift+ArrowDown');
    expect((await inspectorRows('token-inspector'))['sample / group']).toBe('12 / 1');
  });

  it('lays out at 1600×1000 and 1280×800: last grid rows drawn, inspector above the fold, left panel fits, chart labels apart', async () => {
    for (const size of SIZES) {
      await page.setViewportSize(size);
      await page.waitForTimeout(300);
      await checkLayout(size);
    }
    await page.setViewportSize(SIZES[0]);
  });

  it('explains its numbers: heat legend, Σm, B/G/P/C, position id, aggregation formulas, the reference used', async () => {
    await page.getByTestId('heat').selectOption('loss');
    const legend = page.getByTestId('heat-legend');
    expect(await legend.isVisible()).toBe(true);
    expect(await legend.locator('i').evaluate((i) => getComputedStyle(i).backgroundImage)).toContain('linear-gradient');
    await page.getByTestId('heat').selectOption('none');
    expect(await page.locator('[data-testid="grid-row"] [title^="Σm"]').count()).toBe(32);
    expect(await page.getByTestId('grid-dims').locator('abbr[title]').count()).toBe(4);
    expect(await page.locator('tr[data-agg="dr_grpo"]').getAttribute('title')).toContain('B · L_max');
    expect(await page.locator('tr[data-agg="seq-mean-token-sum-norm"]').getAttribute('title')).toContain('core_algos.py');
    expect(await page.getByTestId('token-inspector').locator('[title^="position id"]').count()).toBe(1);
    expect(await page.getByTestId('reference-kind').textContent()).toContain('frozen-copy of the loaded weights');
  });

  it('keeps the settings results were computed with: changing loss_type afterwards marks them stale, not relabelled', async () => {
    const before = await page.getByTestId('loss-headline').textContent();
    const ran = /loss \(([\w-]+)\)/.exec(before ?? '')![1];
    const other = ran === 'grpo' ? 'bnpo' : 'grpo';
    await page.getByTestId('loss-field-loss_type').selectOption(other);
    expect(await page.getByTestId('loss-headline').textContent()).toBe(before);
    expect(await page.locator('tr.chosen').getAttribute('data-agg')).toBe(ran);
    expect(await page.getByTestId('stale-note').textContent()).toContain(`config.loss_type: "${ran}" (preset) → "${other}" (edited)`);
    await page.getByTestId('loss-field-loss_type').selectOption(ran);
    expect(await page.getByTestId('stale-note').count()).toBe(0);
  });

  it('recomputes a what-if on the same batch in about 100 ms, without resampling: completions byte-identical', async () => {
    const exported = async () => {
      const [d] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export').click()]);
      const b = JSON.parse(fs.readFileSync((await d.path())!, 'utf8')) as { completion_ids: number[][]; completion_texts?: string[] };
      return JSON.stringify([b.completion_ids, b.completion_texts]);
    };
    const before = await exported();
    const stagesBefore = await page.locator('.stage [data-testid="stage-meta"]').allTextContents();
    const ran = /loss \(([\w-]+)\)/.exec((await page.getByTestId('loss-headline').textContent()) ?? '')![1];
    // A first what-if makes the Δ heat overlays available; then time each switch from the change event
    // to the table and the grid both showing the new what-if (the grid paints in the same commit).
    await page.getByTestId('whatif-field-loss_type').selectOption('bnpo');
    await page.locator('[data-testid="whatif-table"][data-loss-type="bnpo"]').waitFor({ timeout: 30_000 });
    await page.getByTestId('heat').selectOption('whatif_dgrad');
    // The worker compiles the other aggregations' pipelines after its first what-if answer: let it finish.
    await page.waitForTimeout(3_000);
    const times: number[] = [];
    const workerMs: string[] = [];
    for (const t of ['grpo', 'bnpo', 'seq-mean-token-mean', 'dr_grpo']) {
      times.push(
        await page.evaluate(async (t) => {
          const sel = document.querySelector<HTMLSelectElement>('[data-testid="whatif-field-loss_type"]')!;
          const t0 = performance.now();
          sel.value = t;
          sel.dispatchEvent(new Event('change', { bubbles: true }));
          const shown = () => document.querySelector<HTMLElement>('[data-testid="whatif-table"]')?.dataset.lossType === t && document.querySelector<HTMLElement>('[data-testid="token-grid"]')?.dataset.whatif === t;
          await new Promise<void>((res) => {
            const tick = () => (shown() ? res() : void requestAnimationFrame(tick));
            tick();
          });
          await new Promise((r) => requestAnimationFrame(r));
          return performance.now() - t0;
        }, t),
      );
      workerMs.push((await page.getByTestId('whatif-table').getAttribute('data-ms')) ?? '?');
    }
    console.log(`what-if switch → table + heat: ${times.map((t) => t.toFixed(0)).join(', ')} ms (worker: ${workerMs.join(', ')} ms)`);
    // The ≤ 100 ms target is reported from these numbers, not asserted (speed targets live in benchmarks);
    // that nothing was resampled is asserted below (the completions are byte-identical).
    // The table: both sides, and the Δ heat legend; the current side is the update's own loss.
    const cells = await page.locator('[data-testid="whatif-table"] tbody tr.chosen td').allTextContents();
    expect(cells[1]).toBe((/loss \([\w-]+\) (\S+)/.exec((await page.getByTestId('loss-headline').textContent()) ?? '') ?? [])[1]);
    expect(await page.getByTestId('heat-legend').isVisible()).toBe(true);
    await screenshot(page, 'studio-whatif.png', true);
    // Nothing was resampled or re-run: same completions, byte for byte, and the same stage results.
    expect(await exported()).toBe(before);
    expect(await page.locator('.stage [data-testid="stage-meta"]').allTextContents()).toEqual(stagesBefore);
    // Apply: the what-if becomes the next update's settings, and the results on screen read as stale.
    await page.getByTestId('whatif-apply').click();
    expect(await page.getByTestId('loss-field-loss_type').inputValue()).toBe('dr_grpo');
    expect(await page.getByTestId('stale-note').textContent()).toContain(`config.loss_type: "${ran}" (preset) → "dr_grpo" (edited)`);
    await page.getByTestId('loss-field-loss_type').selectOption(ran);
    await page.getByTestId('heat').selectOption('none');
  });

  it('re-samples the same prompts with the same seed after the step and compares rewards, lengths and pass rates', async () => {
    await page.getByTestId('before-after-run').click();
    const table = page.getByTestId('before-after');
    await table.waitFor({ timeout: 120_000 });
    expect(await table.locator('tbody tr').count()).toBe(5); // 4 groups + all
    const all = await table.locator('tbody tr.chosen td').allTextContents();
    expect(all.length).toBeGreaterThan(1); // the 'all' row: its label, then the before → after cells
    for (const cell of all.slice(1)) expect(cell).toMatch(/^-?[\d.e-]+ → -?[\d.e-]+$/);
    expect(await page.getByTestId('before-after-changed').textContent()).toMatch(/^\d+ of 32 completions changed \(same prompts, same seed\); pass = correctness > 0/);
  });

  it("runs the sampler-vs-trainer log-prob rule on the page's own update", async () => {
    // Both arrays exist (the sampler's and the policy's before the step): the rule runs, it is not skipped.
    const skipped = await page.locator('aside.right details li').allTextContents();
    expect(skipped.join('\n')).not.toContain('logprob-mismatch');
    // Nucleus sampling: the sampler's log-probs are of the renormalised top-p distribution, the trainer's of the
    // whole one (as vLLM's beside TRL's), so the two disagree and the Doctor says so. (The temperature is one value:
    // the sampling form's is the trainer's too, so it cannot make them disagree.)
    await page.getByTestId('step-reset').click();
    await page.getByTestId('top-p').fill('0.3');
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    await page.locator('[data-rule="logprob-mismatch"]').waitFor({ timeout: 10_000 });
    await page.getByTestId('step-reset').click();
    await page.getByTestId('top-p').fill('1');
  });

  it('shows render, sample, rewards and advantages before the batch is assembled', async () => {
    for (let i = 0; i < 4; i++) {
      await page.getByTestId('step-next').click();
      await expect.poll(async () => (await stageStatuses(page))[i], { timeout: 120_000 }).toBe('done');
      if (i === 0) expect(await page.getByTestId('stage-output-render').locator('tbody tr').count()).toBe(4);
    }
    const table = page.getByTestId('stage-output-samples');
    expect(await table.locator('tbody tr').count()).toBe(32);
    const head = await table.locator('th').allTextContents();
    expect(head).toEqual(expect.arrayContaining(['completion', 'finish', 'reward', 'advantage']));
    expect(await page.getByTestId('stage-output-groups').textContent()).toMatch(/#0 .* \/ /);
    expect(await page.getByTestId('grid-empty').isVisible()).toBe(true);
    // While stages run the grid says the batch is coming, not "No batch yet" (issue 24).
    expect(await page.getByTestId('grid-empty').textContent()).toMatch(/^Stepping: 4 stages run so far/);
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    expect(await page.getByTestId('stage-output').count()).toBe(0);
  });

  it("uses the loaded tokenizer on an imported batch (the page's own export): decoded tokens, template rules run", async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export').click()]);
    // Named after the model and the update (issue 24: it was "current step.grpo-batch.json").
    expect(download.suggestedFilename()).toMatch(/^[\w.-]+\.update-\d+\.grpo-batch\.json$/);
    const text = fs.readFileSync((await download.path())!, 'utf8');
    await page.getByTestId('import-input').setInputFiles({ name: 'own-export.json', mimeType: 'application/json', buffer: Buffer.from(text) });
    await expect.poll(() => page.getByTestId('doctor-summary').textContent()).toContain('own-export.json');
    // The tokenizer's checks (decode → encode of every row) follow the import: skipped "running after the
    // import" at first, then run.
    const skipped = () => page.locator('aside.right details li').allTextContents().then((t) => t.join('\n'));
    await expect.poll(skipped, { timeout: 30_000 }).not.toContain('template-mismatch');
    expect(await skipped()).not.toContain('retokenization-mismatch');
    await page.getByTestId('grid-scroll').focus();
    await page.keyboard.press('ArrowRight');
    const rows = await inspectorRows('token-inspector');
    expect(rows.text).not.toBe('(no tokenizer)');
    expect(rows.text).toMatch(/^".*"$/);
  });

  it('saves a 96-row batch as one self-contained HTML report that opens offline and shows the findings', async () => {
    const src = JSON.parse(fs.readFileSync(fixture, 'utf8')) as Record<string, unknown[]> & { num_generations: number };
    // 96 rows: 8 copies of the fixture's mask-length mismatch, more than the page lists of one rule at first.
    const B = 96;
    const rows = (k: string) => Array.from({ length: B }, (_, i) => src[k][i % 12]);
    const big = { ...src, prompt_ids: rows('prompt_ids'), completion_ids: rows('completion_ids'), completion_mask: rows('completion_mask'), rewards: Array.from({ length: B }, (_, i) => (i * 7) % 3) };
    await page.getByTestId('import-input').setInputFiles({ name: 'batch96.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(big)) });
    await expect.poll(() => page.getByTestId('token-grid').getAttribute('data-rows'), { timeout: 20_000 }).toBe(String(B));
    // The memory plan follows the batch that will run (issue 24): its 96 rows and its own lengths, not the prompt set's.
    const T = Math.max(...(big.prompt_ids as unknown[][]).map((r) => r.length)) + Math.max(...(big.completion_ids as unknown[][]).map((r) => r.length));
    await expect.poll(async () => (await page.getByTestId('memory-plan').locator('summary').textContent()) ?? '', { timeout: 10_000 }).toContain(`memory plan (${B} rows × ${T} tokens`);
    // The page lists the first few findings of each rule (and a "show more" per rule); the report lists them all.
    const total = (await page.locator('.counts .sev').allTextContents()).reduce((a, t) => a + Number(t), 0);
    const perRule = await page.locator('li.finding').evaluateAll((els) => els.reduce<Record<string, number>>((m, e) => ({ ...m, [e.getAttribute('data-rule')!]: (m[e.getAttribute('data-rule')!] ?? 0) + 1 }), {}));
    console.log(`96-row batch: ${total} findings; listed per rule ${JSON.stringify(perRule)}`);
    expect(Math.max(...Object.values(perRule))).toBeLessThanOrEqual(5);
    const more = page.locator('[data-testid="findings-more"][data-rule-more="mask-length-mismatch"]');
    expect(await more.textContent()).toContain('(8 in all)');
    await more.click();
    expect(await page.locator('li.finding[data-rule="mask-length-mismatch"]').count()).toBe(8);
    expect(await more.count()).toBe(0);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('save-report').click()]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'report-')), download.suggestedFilename());
    await download.saveAs(file);
    const size = fs.statSync(file).size;
    console.log(`report of a ${B}-row batch: ${(size / 1024).toFixed(1)} KiB (${download.suggestedFilename()})`);
    // Offline, from a file: any request other than the file itself would show here.
    const requests: string[] = [];
    const report = await studio.ctx.newPage();
    report.on('request', (r) => requests.push(r.url()));
    await studio.ctx.setOffline(true);
    try {
      await report.goto(`file://${file}`);
      expect(await report.locator('li.finding').count()).toBe(total);
      expect(await report.getByTestId('report-counts').textContent()).toMatch(/^\d+ error\(s\)/);
      await report.locator('li.finding[data-rule="mask-length-mismatch"]').first().click();
      expect(await report.getByTestId('report-info').textContent()).toMatch(/^sample \d+ · columns/);
      // The grid is painted: the boundary line shows on the canvas.
      const painted = await report.locator('#grid').evaluate((c: HTMLCanvasElement) => {
        const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
        let yellow = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] > 230 && d[i + 1] > 190 && d[i + 2] < 110) yellow++;
        return yellow;
      });
      expect(painted).toBeGreaterThan(100);
      expect(requests.filter((u) => !u.startsWith('file://'))).toEqual([]);
    } finally {
      await studio.ctx.setOffline(false);
      await report.close();
    }
  });

  it('exports a batch with NaN rewards as strict JSON, with a note', async () => {
    const b = JSON.parse(fs.readFileSync(fixture, 'utf8')) as Record<string, unknown> & { completion_ids: number[][] };
    const rewards = b.completion_ids.map((_, i) => (i === 3 ? 'NaN' : i % 2));
    const text = JSON.stringify({ ...b, rewards: [] }).replace('"rewards":[]', `"rewards":[${rewards.join(',')}]`);
    await page.getByTestId('import-input').setInputFiles({ name: 'nan-reward.json', mimeType: 'application/json', buffer: Buffer.from(text) });
    await expect.poll(() => page.getByTestId('doctor-summary').textContent()).toContain('nan-reward.json');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export').click()]);
    const out = JSON.parse(fs.readFileSync((await download.path())!, 'utf8')) as Record<string, unknown>;
    expect((out.rewards as unknown[])[3]).toBeNull();
    expect(out[NONFINITE_NOTE]).toEqual(['rewards[3]: NaN']);
  });

  it('diffs two imported batches token by token', async () => {
    const b = JSON.parse(fs.readFileSync(fixture, 'utf8')) as { completion_ids: number[][]; completion_mask: number[][] };
    await page.getByTestId('import-input').setInputFiles(fixture);
    await expect.poll(() => page.getByTestId('doctor-summary').textContent()).toContain('r1-mask-mismatch.json');
    await page.getByTestId('diff-pin').click();
    b.completion_ids[2][1] += 1;
    b.completion_mask[3][0] = 0;
    await page.getByTestId('import-input').setInputFiles({ name: 'r1-edited.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(b)) });
    const summary = page.getByTestId('diff-summary');
    await expect.poll(() => summary.textContent(), { timeout: 10_000 }).toContain('2 rows differ · 0 prompt tokens · 1 completion tokens · 1 mask entries');
    expect(await page.getByTestId('diff-rows').locator('tbody tr').allTextContents()).toEqual(['#21 from [1]', '#31 from [0]']);
    await page.getByTestId('diff-heat').click();
    expect(await page.getByTestId('heat').inputValue()).toBe('diff');
    await page.getByTestId('heat').selectOption('none');
  });

  it('opens a batch-level finding by keyboard without selecting row 0', async () => {
    const b = JSON.parse(fs.readFileSync(fixture, 'utf8')) as { eos_token_ids: number[] };
    const text = JSON.stringify({ ...b, pad_token_id: b.eos_token_ids[0] });
    await page.getByTestId('import-input').setInputFiles({ name: 'pad-is-eos.json', mimeType: 'application/json', buffer: Buffer.from(text) });
    await page.locator('[data-rule="pad-equals-eos"]').waitFor({ timeout: 10_000 });
    await page.getByTestId('import-button').focus();
    await tabUntil((el) => el.cls.includes('finding') && el.cls.length > 0, 120);
    // Tab on to the batch-level finding and open it with Enter.
    for (let i = 0; i < 40 && !(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.rule === 'pad-equals-eos')); i++) await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    expect(await page.locator('[data-rule="pad-equals-eos"]').getAttribute('class')).toContain('active');
    expect(await page.getByTestId('sample-inspector').textContent()).toBe('select a sample');
    expect(await page.locator('.grid-label.sel').count()).toBe(0);
    // A finding with a sample still selects it.
    await page.locator('[data-rule="mask-length-mismatch"]').focus();
    await page.keyboard.press('Enter');
    expect((await inspectorRows('sample-inspector'))['sample / group']).toBe('5 / 1');
  });

  it('shows a failed stage in red even where Next would retry it', async () => {
    await page.getByTestId('import-input').setInputFiles(fixture);
    // The previous test's batch has the same finding: wait for this import to be the one on screen, or the click
    // below starts an update that the landing import then drops.
    await expect.poll(() => page.getByTestId('doctor-summary').textContent()).toContain('r1-mask-mismatch.json');
    await page.locator('[data-rule="mask-length-mismatch"]').waitFor({ timeout: 10_000 });
    await page.getByTestId('step-run').click();
    const statuses = await waitForUpdate(page);
    expect(statuses).toContain('error');
    const failed = page.locator('.stage[data-status="error"]');
    expect(await failed.getAttribute('class')).not.toContain('current');
    expect(await failed.evaluate((e) => getComputedStyle(e).borderTopColor)).toBe('rgb(248, 81, 73)');
    await dismissErrors(page);
    await page.getByTestId('step-from').selectOption('prompts');
  }, 300_000); // waitForUpdate waits up to 240 s: the test must not be cut at the default 120 s first

  it('an import landing while an update runs drops that update; nothing of it leaks into the next one', async () => {
    await page.getByTestId('step-run').click();
    await expect.poll(async () => (await stageStatuses(page)).includes('running')).toBe(true);
    await page.getByTestId('import-input').setInputFiles({ name: 'mid-update.json', mimeType: 'application/json', buffer: fs.readFileSync(fixture) });
    await expect.poll(() => page.getByTestId('doctor-summary').textContent()).toContain('mid-update.json');
    // The dropped update's stages are gone at once; nothing new starts until the worker answers the one it was on.
    expect(new Set(await stageStatuses(page))).toEqual(new Set(['pending']));
    await expect.poll(() => page.getByTestId('step-run').isEnabled(), { timeout: 120_000 }).toBe(true);
    expect(new Set(await stageStatuses(page))).toEqual(new Set(['pending']));
    expect(await page.locator('[data-testid="errors"] [data-kind]').count()).toBe(0);
    // The next update is the import's, from its first stage, refused where the previous test's was.
    await page.getByTestId('step-run').click();
    const statuses = await waitForUpdate(page);
    expect(statuses.slice(0, 3)).toEqual(['skipped', 'skipped', 'skipped']);
    expect(statuses.filter((x) => x === 'error')).toHaveLength(1);
    await dismissErrors(page);
    await page.getByTestId('step-from').selectOption('prompts');
  }, 300_000);

  it('refuses invalid form values and an empty prompt, naming the field; nothing runs', async () => {
    const cases: [string, string, RegExp][] = [
      ['num-generations', 'abc', /G \(num_generations\): "abc" is not a number/],
      ['top-p', '2', /top-p \(1 off\): 2 is above the maximum 1/],
      // A table row's field: the table's own check, named by the trainer's field name.
      ['loss-field-learning_rate', '-1', /config\.learning_rate: -1 is out of range \(a number >= 0\)/],
    ];
    for (const [id, bad, message] of cases) {
      const field = page.getByTestId(id);
      const good = await field.inputValue();
      await field.fill(bad);
      await page.getByTestId('step-run').click();
      await expect.poll(async () => (await errorTexts(page, 'settings')).join('\n')).toMatch(message);
      expect(new Set(await stageStatuses(page))).toEqual(new Set(['pending']));
      await field.fill(good);
      await dismissErrors(page);
    }
    const user = page.getByTestId('prompt-user-0');
    const text = await user.inputValue();
    await user.fill('  ');
    await page.getByTestId('step-run').click();
    await expect.poll(async () => (await errorTexts(page, 'settings')).join('\n')).toContain('prompt #0 has an empty user message');
    expect(new Set(await stageStatuses(page))).toEqual(new Set(['pending']));
    await user.fill(text);
    await dismissErrors(page);
  });

  it('keeps the working model when a load fails (folder with config.json only: no weights)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'no-weights-'));
    fs.copyFileSync(path.join(root, 'public/models/tiny-adder/config.json'), path.join(dir, 'config.json'));
    await page.getByTestId('model-folder-input').setInputFiles(dir);
    await expect.poll(async () => (await page.locator('[data-testid="errors"] .error-msg').allTextContents()).join('\n'), { timeout: 30_000 }).toContain('no model.safetensors');
    expect(await page.getByTestId('model-info').textContent()).toMatch(/tiny-adder/);
    expect(await page.getByTestId('step-run').isDisabled()).toBe(false);
    await dismissErrors(page);
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    expect(studio.pageErrors).toEqual([]);
  });
  it('loads a weights-only folder (config.json + weights, no tokenizer.json), steps an id batch, refuses the prompt set in one line (issue 24)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'weights-only-'));
    for (const f of ['config.json', 'model.safetensors']) fs.copyFileSync(path.join(root, 'public/models/tiny-adder', f), path.join(dir, f));
    await page.getByTestId('model-folder-input').setInputFiles(dir);
    await expect.poll(() => page.getByTestId('model-info').textContent(), { timeout: 60_000 }).toContain(path.basename(dir));
    expect(await page.getByTestId('no-tokenizer').textContent()).toBe('no tokenizer: ids shown, tokenizer rules skipped');
    expect(await page.locator('[data-testid="errors"] .error-msg').count()).toBe(0);
    // The prompt set needs the tokenizer: refused in one line naming it, nothing crashes.
    await page.getByTestId('step-run').click();
    await expect.poll(async () => (await page.locator('[data-testid="errors"] .error-msg').allTextContents()).join('\n'), { timeout: 30_000 }).toMatch(/has no tokenizer \(no tokenizer\.json in its folder\): the prompt set/);
    await dismissErrors(page);
    // An id batch over tiny-adder's 328 ids: the Doctor skips the tokenizer rules naming why, the update runs.
    const ids = { format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 304, eos_token_ids: [304], prompt_ids: [[302, 17, 40], [302, 17, 40]], completion_ids: [[12, 13, 304], [14, 304]], completion_mask: [[1, 1, 1], [1, 1]], rewards: [1, 0] };
    await page.getByTestId('import-input').setInputFiles({ name: 'ids-only.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(ids)) });
    await expect.poll(() => page.getByTestId('doctor-summary').textContent()).toContain('ids-only.json');
    const skipped = (await page.locator('aside.right details li').allTextContents()).join('\n');
    expect(skipped).toMatch(/template-mismatch.*no tokenizer: ids shown, tokenizer rules skipped/);
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    expect(studio.pageErrors).toEqual([]);
    // Back to the model with its tokenizer and the prompt set, as the following tests expect.
    await page.getByTestId('model-folder-input').setInputFiles(path.join(root, 'public/models/tiny-adder'));
    await expect.poll(() => page.getByTestId('no-tokenizer').count(), { timeout: 60_000 }).toBe(0);
    await page.getByTestId('step-from').selectOption('prompts');
  });
  it("refuses an update on a model with dropout under TRL's disable_dropout false, as the CLI does; steps with it true", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dropout-'));
    for (const f of fs.readdirSync(path.join(root, 'public/models/tiny-adder'))) fs.copyFileSync(path.join(root, 'public/models/tiny-adder', f), path.join(dir, f));
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, attention_dropout: 0.1 }));
    await page.getByTestId('model-folder-input').setInputFiles(dir);
    await expect.poll(() => page.getByTestId('model-info').textContent(), { timeout: 60_000 }).toContain(path.basename(dir));
    expect(await page.getByTestId('model-dropout').textContent()).toMatch(/^attention_dropout 0\.1: /);
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).toContain('error');
    const banner = (await page.locator('[data-testid="errors"] .error-msg').allTextContents()).join('\n');
    expect(banner).toMatch(/TRL trains with the model's dropout on \(disable_dropout false.*config\.json has dropout attention_dropout 0\.1: .*set disable_dropout true/);
    await dismissErrors(page);
    const field = page.getByTestId('trainer-field-disable_dropout');
    await field.evaluate((el) => {
      for (let d = el.closest('details'); d; d = d.parentElement?.closest('details') ?? null) d.open = true;
    });
    await field.check();
    // The failed update keeps its settings (the stale note names the change); Reset starts one with the new ones.
    expect(await page.getByTestId('stale-note').getAttribute('title')).toContain('disable_dropout');
    await page.getByTestId('step-reset').click();
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    expect(studio.pageErrors).toEqual([]);
    // Back to the embedded model and TRL's default, as the following tests expect.
    await field.uncheck();
    await page.getByTestId('model-folder-input').setInputFiles(path.join(root, 'public/models/tiny-adder'));
    await expect.poll(() => page.getByTestId('model-dropout').count(), { timeout: 60_000 }).toBe(0);
  });
  it('asks for Defaults in an in-page dialog, never a native confirm(); Esc cancels (issue 24)', async () => {
    const native: string[] = [];
    const onDialog = (d: { type(): string; dismiss(): Promise<void> }) => {
      native.push(d.type());
      void d.dismiss();
    };
    page.on('dialog', onDialog);
    try {
      await page.getByTestId('defaults').click();
      await expect.poll(() => page.getByTestId('defaults-dialog').isVisible()).toBe(true);
      await page.keyboard.press('Escape');
      await expect.poll(() => page.getByTestId('defaults-dialog').count()).toBe(0);
      await page.getByTestId('defaults').click();
      await page.getByTestId('defaults-confirm').click();
      await expect.poll(() => page.getByTestId('defaults-dialog').count()).toBe(0);
      expect(native).toEqual([]);
    } finally {
      page.off('dialog', onDialog);
    }
  });
  it('proposes a LoRA adapter when the full-step plan exceeds the memory budget the user sets (issue 24)', async () => {
    const budget = page.getByTestId('memory-budget');
    expect(await budget.inputValue()).toBe('8');
    expect(await page.getByTestId('plan-over-budget').count()).toBe(0); // the tiny default model fits 8 GiB
    await budget.fill('0.001');
    await expect.poll(() => page.getByTestId('plan-over-budget').count()).toBe(1);
    expect(await page.getByTestId('plan-over-budget').textContent()).toMatch(/exceeds your budget of .*A LoRA adapter \(r 8, all linear layers\)/);
    expect(await page.getByTestId('plan-lora-total').textContent()).toMatch(/B$/);
    // Still over: the hint offers gradient checkpointing, which the panel turns on (the plan's activations shrink) and off.
    expect(await page.getByTestId('plan-over-budget').textContent()).toMatch(/Gradient checkpointing \(below the budget\) keeps each layer's input and recomputes the rest .*still over the budget: shorten the batch/);
    // The plan on screen: which update it plans (rows × tokens × prompt), with checkpointing or not, and its total. Plans
    // of the same update are compared: the panel shows the model's default-task plan until its own asked one answers.
    const plan = page.getByTestId('memory-plan');
    const shown = async () => `${await plan.getAttribute('data-update')} ${await plan.getAttribute('data-checkpointing')} ${await plan.getAttribute('data-total')}`;
    const settled = async () => {
      const a = await shown();
      await page.waitForTimeout(400); // past the panel's 200 ms plan refresh
      return a === (await shown()) ? a : null;
    };
    await page.getByTestId('checkpointing').click(); // the box follows the worker's answer (the plan's options), not the click
    await expect.poll(async () => (await settled())?.split(' ')[1]).toBe('true');
    const [update, , onTotal] = (await shown()).split(' ');
    expect(await page.getByTestId('checkpointing').isChecked()).toBe(true);
    expect(await page.getByTestId('plan-over-budget').textContent()).not.toMatch(/Gradient checkpointing/);
    await page.getByTestId('checkpointing').click();
    await expect.poll(async () => (await settled())?.split(' ').slice(0, 2).join(' ')).toBe(`${update} false`);
    expect(Number((await shown()).split(' ')[2])).toBeGreaterThan(Number(onTotal)); // the same update keeps every layer's activations
    expect(await page.getByTestId('checkpointing').isChecked()).toBe(false);
    await budget.fill('8');
    await expect.poll(() => page.getByTestId('plan-over-budget').count()).toBe(0);
  });
});
