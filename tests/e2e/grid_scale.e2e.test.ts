// End-to-end at scale, in headless chromium with the default model loaded (so imports also get its
// tokenizer checks): a generated 200,000-row batch imports and scrolls to its last row with the page
// answering animation frames (max frame gap measured), the last row's cells are painted (pixels read
// back) and the keyboard reaches it; a 1,024-row × 2,560-token TRL safetensors imports without a long
// main-thread task; a 200 MB completion text does not take the renderer down (a preview names its full
// length, the export writes it whole) and an import of it can be cancelled, keeping the batch on screen.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeSafeTensors } from '../../src/io/safetensors.ts';
import { openStudio, type Studio } from './harness.ts';

let studio: Studio;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'grid-scale-'));
const EOS = 304; // the default model's (public/models/tiny-adder) EOS; ids below stay inside its 328-token vocabulary

/** Starts recording the longest gap between animation frames (and the longest main-thread task). */
async function watchFrames(): Promise<void> {
  await studio.page.evaluate(() => {
    const w = window as unknown as { __frames: { max: number; last: number; on: boolean; longest: number } };
    w.__frames = { max: 0, last: performance.now(), on: true, longest: 0 };
    const tick = (t: number) => {
      const f = w.__frames;
      if (!f.on) return;
      f.max = Math.max(f.max, t - f.last);
      f.last = t;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) w.__frames.longest = Math.max(w.__frames.longest, e.duration);
    }).observe({ type: 'longtask' });
  });
}

/** Stops recording: { max frame gap, longest task } in ms. */
const stopFrames = () =>
  studio.page.evaluate(() => {
    const f = (window as unknown as { __frames: { max: number; on: boolean; longest: number } }).__frames;
    f.on = false;
    return { gap: f.max, longest: f.longest };
  });

const gridRows = () => studio.page.getByTestId('token-grid').getAttribute('data-rows');
const inspector = async (id: string) =>
  Object.fromEntries(await studio.page.getByTestId(id).locator('.kv > span:nth-child(odd)').evaluateAll((ks) => ks.map((k) => [k.textContent ?? '', k.nextElementSibling?.textContent ?? '']))) as Record<string, string>;

beforeAll(async () => {
  studio = await openStudio('grid-scale');
  await studio.page.locator('[data-testid="gpu-badge"].ready').waitFor({ timeout: 60_000 });
  await studio.page.getByTestId('model-info').waitFor({ timeout: 120_000 });
}, 300_000);

afterAll(async () => {
  await studio?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('the grid at scale', () => {
  it('imports 200,000 rows and scrolls to the last one with the page responsive; the last row is painted and reachable by keyboard', async () => {
    const B = 200_000;
    const G = 8;
    const file = path.join(tmp, 'rows200k.json');
    fs.writeFileSync(file, JSON.stringify({
      format: 'grpo-batch/v1',
      num_generations: G,
      pad_token_id: 0,
      eos_token_ids: [EOS],
      prompt_ids: Array.from({ length: B }, (_, b) => [10 + (b % 50), 11]),
      completion_ids: Array.from({ length: B }, (_, b) => [20 + (b % 7), 21, EOS]),
      completion_mask: Array.from({ length: B }, () => [1, 1, 1]),
      rewards: Array.from({ length: B }, (_, b) => b % 2),
    }));
    const page = studio.page;
    await watchFrames();
    const t0 = Date.now();
    await page.getByTestId('import-input').setInputFiles(file);
    await expect.poll(gridRows, { timeout: 240_000, interval: 500 }).toBe(String(B));
    const importMs = Date.now() - t0;
    const during = await stopFrames();

    // Scroll the rows to the bottom in 30 steps, one frame each, then jump to the end.
    await watchFrames();
    await page.locator('.grid-body').evaluate(async (body) => {
      for (let i = 1; i <= 30; i++) {
        body.scrollTop = (i / 30) * (body.scrollHeight - body.clientHeight);
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      }
      body.scrollTop = body.scrollHeight;
    });
    await page.locator(`[data-testid="grid-row"][data-sample="${B - 1}"]`).waitFor({ timeout: 10_000 });
    await page.waitForTimeout(300);
    const scrolling = await stopFrames();
    console.log(`200,000 rows: import → grid ${importMs} ms (max frame gap ${during.gap.toFixed(0)} ms, longest task ${during.longest.toFixed(0)} ms); scrolling to the end: max frame gap ${scrolling.gap.toFixed(0)} ms, longest task ${scrolling.longest.toFixed(0)} ms`);
    // Only the window's labels exist, not 200,000.
    expect(await page.getByTestId('grid-row').count()).toBeLessThan(500);

    // The last row's cells are on the canvas: its first completion token (completion green), its EOS
    // (amber) and the boundary line, read back at the row's label height.
    const last = await page.getByTestId('grid-canvas').evaluate((c: HTMLCanvasElement, sample: number) => {
      const scroller = c.parentElement!.parentElement as HTMLElement;
      const W = Number(c.closest('[data-width]')!.getAttribute('data-width'));
      const P = Number(c.closest('[data-boundary]')!.getAttribute('data-boundary'));
      const cellW = c.parentElement!.clientWidth / W;
      const label = document.querySelector<HTMLElement>(`[data-testid="grid-row"][data-sample="${sample}"]`)!.getBoundingClientRect();
      const cr = c.getBoundingClientRect();
      const sx = scroller.getBoundingClientRect().left - scroller.scrollLeft;
      const g = c.getContext('2d')!;
      const at = (x: number, y: number) => {
        const d = g.getImageData(Math.round((x - cr.left) * devicePixelRatio), Math.round((y - cr.top) * devicePixelRatio), 1, 1).data;
        return { px: [d[0], d[1], d[2]], hit: document.elementFromPoint(x, y) === c };
      };
      const y = label.top + 3;
      return { completion: at(sx + (P + 1) * cellW - 3, y), eos: at(sx + (P + 3) * cellW - 3, y), boundary: at(sx + P * cellW - 1, label.top + label.height / 2) };
    }, B - 1);
    expect(last.completion.hit).toBe(true);
    expect(last.completion.px).toEqual([31, 107, 69]); // #1f6b45 completion
    expect(last.eos.px).toEqual([160, 122, 24]); // #a07a18 EOS
    expect(last.boundary.px[0]).toBeGreaterThan(200); // #f2cc60
    expect(last.boundary.px[2]).toBeLessThan(140);

    // Keyboard: Ctrl+Home / Ctrl+End reach the first and last samples, PageDown moves by a screen.
    await page.getByTestId('grid-scroll').focus();
    await page.keyboard.press('Control+Home');
    expect((await inspector('token-inspector'))['sample / group']).toBe('0 / 0');
    await page.keyboard.press('PageDown');
    expect(Number((await inspector('token-inspector'))['sample / group'].split(' / ')[0])).toBeGreaterThan(5);
    await page.keyboard.press('Control+End');
    expect((await inspector('token-inspector'))['sample / group']).toBe(`${B - 1} / ${(B - 1 - ((B - 1) % G)) / G}`);
    await page.locator(`[data-testid="grid-row"][data-sample="${B - 1}"]`).waitFor({ timeout: 5_000 });
    expect(studio.pageErrors).toEqual([]);
  }, 600_000);

  it('imports a 1,024-row × 2,560-token TRL safetensors without holding the page', async () => {
    const [B, P, C] = [1024, 512, 2048];
    const ids = (n: number, f: (i: number) => number) => BigInt64Array.from({ length: n }, (_, i) => BigInt(f(i)));
    const bytes = writeSafeTensors({
      prompt_ids: { dtype: 'I64', shape: [B, P], data: ids(B * P, (i) => 10 + (i % 90)) },
      prompt_mask: { dtype: 'I64', shape: [B, P], data: ids(B * P, () => 1) },
      completion_ids: { dtype: 'I64', shape: [B, C], data: ids(B * C, (i) => (i % C === C - 1 ? EOS : 100 + (i % 150))) },
      completion_mask: { dtype: 'I64', shape: [B, C], data: ids(B * C, () => 1) },
      old_per_token_logps: { dtype: 'F32', shape: [B, C], data: Float32Array.from({ length: B * C }, (_, i) => -((i % 97) / 40)) },
      advantages: { dtype: 'F32', shape: [B], data: Float32Array.from({ length: B }, (_, b) => (b % 3) - 1) },
    }, { config: JSON.stringify({ num_generations: 8, loss_type: 'dapo', beta: 0 }), pad_token_id: '0', eos_token_id: String(EOS) });
    const file = path.join(tmp, 'trl-1024x2560.safetensors');
    fs.writeFileSync(file, bytes);
    await watchFrames();
    const t0 = Date.now();
    await studio.page.getByTestId('import-input').setInputFiles(file);
    await expect.poll(gridRows, { timeout: 240_000, interval: 250 }).toBe(String(B));
    await studio.page.waitForTimeout(500);
    const ms = Date.now() - t0;
    const { gap, longest } = await stopFrames();
    console.log(`TRL 1,024 × 2,560 safetensors (${(bytes.byteLength / 2 ** 20).toFixed(0)} MiB): import → grid ${ms} ms, max frame gap ${gap.toFixed(0)} ms, longest main-thread task ${longest.toFixed(0)} ms`);

    // The per-token chart draws all 2,048 positions of sample 0 on its canvas; its tooltip reads the exact
    // float32 value under the pointer (what the file holds at row 0, position t), not a mean of bins.
    const plot = studio.page.getByTestId('chart-tokens').locator('.chart-plot');
    const box = (await plot.boundingBox())!;
    for (const frac of [0.1, 0.5, 0.93]) {
      await studio.page.mouse.move(box.x + 46 + frac * (box.width - 54), box.y + box.height / 2);
      const tip = studio.page.getByTestId('chart-tokens-tip');
      const t = Number(await tip.getAttribute('data-index'));
      expect(t).toBeGreaterThanOrEqual(0);
      expect(t).toBeLessThan(C);
      expect(Number(await tip.locator('[data-key="old_logp"]').getAttribute('data-value'))).toBe(Math.fround(-((t % 97) / 40)));
    }
    // The targets (≤ 3 s, no task over 100 ms) are measured by `npm run bench -- --only import_page`, not asserted here.
  }, 600_000);

  it('survives a 200 MB completion text: the preview names its length, the export writes it whole, and its import can be cancelled', async () => {
    const N = 200 * 2 ** 20;
    const file = path.join(tmp, 'huge-text.json');
    const huge = {
      format: 'grpo-batch/v1',
      num_generations: 2,
      pad_token_id: 0,
      eos_token_ids: [EOS],
      prompt_ids: [[10, 11], [10, 11]],
      completion_ids: [[20, EOS], [21, EOS]],
      completion_mask: [[1, 1], [1, 1]],
      completion_texts: ['a'.repeat(N), 'short'],
    };
    fs.writeFileSync(file, JSON.stringify(huge));
    const page = studio.page;
    const before = await gridRows();

    // Cancel while it is being read or parsed: the progress goes away, the batch on screen stays, no error.
    await page.getByTestId('import-input').setInputFiles(file);
    await page.getByTestId('import-cancel').click({ timeout: 20_000 });
    await expect.poll(() => page.getByTestId('import-progress').count(), { timeout: 10_000 }).toBe(0);
    await page.waitForTimeout(1000);
    expect(await gridRows()).toBe(before);
    expect(await page.locator('[data-testid="errors"] [data-kind]').count()).toBe(0);

    await watchFrames();
    await page.getByTestId('import-input').setInputFiles(file);
    await expect.poll(gridRows, { timeout: 300_000, interval: 500 }).toBe('2');
    const { gap, longest } = await stopFrames();
    console.log(`200 MiB completion text: max frame gap ${gap.toFixed(0)} ms, longest task ${longest.toFixed(0)} ms during the import`);
    await page.locator('[data-testid="grid-row"][data-sample="0"]').click();
    const note = page.locator('[data-testid="sample-inspector"] [data-testid="text-truncated"]');
    expect(await note.getAttribute('data-length')).toBe(String(N));
    expect(await note.textContent()).toContain(N.toLocaleString('en-US'));
    expect(await page.evaluate(() => 1 + 1)).toBe(2); // the renderer is alive

    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 120_000 }), page.getByTestId('export').click()]);
    const out = JSON.parse(fs.readFileSync((await download.path())!, 'utf8')) as { completion_texts: string[] };
    expect(out.completion_texts[0].length).toBe(N);
    expect(out.completion_texts[0]).toBe(huge.completion_texts[0]);
    expect(out.completion_texts[1]).toBe('short');
    expect(studio.pageErrors).toEqual([]);
  }, 600_000);
});
