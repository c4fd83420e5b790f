// Issue 25, item 1, in headless chromium with the default model loaded (its tokenizer fits the fixture, so the
// Doctor proves each row's conversation against the chat template after the import): a 2-row TRL tool batch
// (tests/e2e/fixtures/multi-turn-tools.json: ids from the tiny-adder tokenizer, pieces tokenized apart as TRL's
// tool loop concatenates them; row 1's tool call sampled without the spaces the parsed call renders with)
// shows its turns — the turn legend, a role band in the tool-response colour painted over a tool token, the
// inspector naming the token's turn (message, role, from the render) with 0 loss tokens, the re-tokenized
// tool call of row 1 — and the collapsed view has one cell per turn, reached by pointer and by ← / →. After an
// update on the batch, a turn's sums read the loss stage's per-token loss and KL (none on the tool response).
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { ROLE_COLORS } from '../../src/view/colors.ts';
import { studioForFile, root, waitForUpdate, type Studio } from './harness.ts';

let studio: Studio;
let page: Page;
studioForFile('turns', (s) => ({ studio, page } = { studio: s, page: s.page }));

const FIXTURE = path.join(root, 'tests/e2e/fixtures/multi-turn-tools.json');
const batch = JSON.parse(fs.readFileSync(FIXTURE, 'utf8')) as { prompt_ids: number[][]; tool_mask: number[][] };
/** Row 0's first tool-response token (TRL's tool_mask 0), as a completion position. */
const TOOL_J = batch.tool_mask[0].indexOf(0);
const TURN_W = 200;
const CELL_W = 34;

const inspector = async () =>
  Object.fromEntries(await page.getByTestId('token-inspector').locator('.kv > span:nth-child(odd)').evaluateAll((ks) => ks.map((k) => [k.textContent ?? '', k.nextElementSibling?.textContent ?? '']))) as Record<string, string>;

/** Selects (sample, completion position j) with the keyboard: a row label's click selects its first completion token. */
async function selectToken(sample: number, j: number): Promise<void> {
  await page.mouse.move(0, 0); // no hover: the inspector shows the selection
  await page.locator(`[data-testid="grid-row"][data-sample="${sample}"]`).click();
  await page.getByTestId('grid-scroll').focus();
  for (let i = 0; i < Math.floor(j / 10); i++) await page.keyboard.press('Shift+ArrowRight');
  for (let i = 0; i < j % 10; i++) await page.keyboard.press('ArrowRight');
  await page.mouse.move(0, 0);
}

/** The canvas pixel at CSS (x, y) of the canvas, as #rrggbb. */
const pixel = (x: number, y: number) =>
  page.getByTestId('grid-canvas').evaluate((c, [px, py]) => {
    const dpr = globalThis.devicePixelRatio || 1;
    const d = (c as HTMLCanvasElement).getContext('2d')!.getImageData(Math.round(px * dpr), Math.round(py * dpr), 1, 1).data;
    return '#' + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, '0')).join('');
  }, [x, y] as const);

describe('a conversation as turns in the grid', () => {
  it('bands, the legend and the inspector name a tool response (0 loss tokens) and row 1 re-tokenized tool call; collapsed: one cell per turn', async () => {
    expect(TOOL_J).toBeGreaterThan(0);
    await page.getByTestId('import-input').setInputFiles(FIXTURE);
    await expect.poll(() => page.getByTestId('token-grid').getAttribute('data-rows'), { timeout: 60_000 }).toBe('2');
    await expect.poll(() => page.getByTestId('token-grid').getAttribute('data-turns')).toBe('bands');
    await expect(page.getByTestId('turn-legend').isVisible()).resolves.toBe(true);
    expect(await page.getByTestId('turn-legend').locator('[data-role]').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.role))).toEqual(Object.keys(ROLE_COLORS));

    // The tool-response token: its turn from the render once the Doctor's tokenizer checks are in.
    await selectToken(0, TOOL_J);
    await expect.poll(async () => (await inspector())['turn from'], { timeout: 60_000 }).toBe('chat-template render');
    const tool = await inspector();
    expect(tool['turn']).toBe('5 of 6: message 2, tool response');
    expect(tool['turn loss tokens']).toBe('0');
    // The render's tool turn ends where the next generation prompt starts (TRL's tool_mask 0 runs through it).
    expect(Number(tool['turn tokens'])).toBeGreaterThan(0);
    expect(Number(tool['turn tokens'])).toBeLessThan(batch.tool_mask[0].filter((m) => m === 0).length);
    expect(tool['tool_mask']).toBe('0');
    // The next token's role band is painted in the tool-response colour, at the top of the cell (row 0's top is
    // the ruler's height, 18 px; the selected cell's outline would cover its own band).
    const P = Number(await page.getByTestId('token-grid').getAttribute('data-boundary'));
    const left = await page.getByTestId('grid-scroll').evaluate((e) => e.scrollLeft);
    await expect.poll(() => pixel((P + TOOL_J + 1) * CELL_W - left + CELL_W / 2, 18 + 2)).toBe(ROLE_COLORS.tool);
    // An assistant token counts its turn's loss tokens.
    await selectToken(0, 0);
    const asst = await inspector();
    expect(asst['turn']).toMatch(/^2 of 6: message 1, assistant$/);
    expect(Number(asst['turn loss tokens'])).toBeGreaterThan(0);

    // Row 1's tool call was sampled without spaces: the render inserts them, and the inspector names the cause.
    await selectToken(1, 0);
    const first = await (async () => {
      for (let j = 0; j < TOOL_J; j++) {
        const r = await inspector();
        if (r['re-tokenized']) return { j, r };
        await page.keyboard.press('ArrowRight');
      }
      return null;
    })();
    expect(first?.r['re-tokenized']).toBe('tool-call-retokenized (message 1)');
    expect(first?.r['turn']).toMatch(/message 1, tool call$/);

    // Collapsed: one cell per turn, each row's count on its label; the pointer and ← / → walk the turns.
    await page.getByTestId('turns-view').selectOption('collapsed');
    await expect.poll(() => page.getByTestId('token-grid').getAttribute('data-turns')).toBe('collapsed');
    expect(await page.getByTestId('grid-row').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.turns))).toEqual(['6', '6']);
    const box = (await page.getByTestId('grid-scroll').boundingBox())!;
    const roles: string[] = [];
    for (let k = 0; k < 6; k++) {
      // Scrolled so that turn k is in view (the grid may be narrower than six turns).
      const scrolled = await page.getByTestId('grid-scroll').evaluate((e, x) => ((e.scrollLeft = x), e.scrollLeft), k * TURN_W);
      await page.mouse.move(box.x + k * TURN_W - scrolled + TURN_W / 2, box.y + 18 + 10);
      await expect.poll(async () => (await inspector())['turn']).toMatch(new RegExp(`^${k + 1} of 6: `));
      roles.push((await inspector())['turn'].replace(/^.*, /, ''));
    }
    expect(roles).toEqual(['user', 'assistant', 'tool call', 'assistant', 'tool response', 'assistant']);
    await selectToken(0, 0);
    await page.getByTestId('grid-scroll').focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    expect((await inspector())['turn']).toBe('5 of 6: message 2, tool response');
    expect((await inspector())['turn loss tokens']).toBe('0');
    await page.keyboard.press('Shift+ArrowRight');
    expect((await inspector())['turn']).toMatch(/^6 of 6: /);
    expect(studio.pageErrors).toEqual([]);
  }, 240_000);

  it("after an update on the batch, a turn's sums read the loss stage: Σ loss over an assistant turn, none on the tool response", async () => {
    await page.getByTestId('turns-view').selectOption('bands');
    await expect.poll(() => page.getByTestId('step-from').inputValue()).toBe('import');
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    await selectToken(0, 0);
    await expect.poll(async () => (await inspector())['turn Σ loss']).toMatch(/^-?\d/);
    await selectToken(0, TOOL_J);
    const tool = await inspector();
    expect(tool['turn']).toMatch(/tool response$/);
    // The assembled batch keeps the conversation: the Doctor's report on it carries the turns from the render too.
    expect(tool['turn from']).toBe('chat-template render');
    expect(tool['turn loss tokens']).toBe('0');
    expect(Number(tool['turn Σ loss'])).toBe(0);
    expect(studio.pageErrors).toEqual([]);
  }, 300_000);
});
