// Issue 15, "a prompt rendered with two templates", in headless chromium: the diff panel renders the
// page's prompt set with the loaded model's template under two variants, in the worker, and shows the
// token diff. enable_thinking true vs false adds exactly the "<think>\n\n</think>\n\n" tokens to every
// prompt (counted here with the same tokenizer loaded in Node, not read from the page); a pasted template
// that writes a system turn first adds exactly that block, in front; a pasted template that never finishes is
// stopped at its deadline with one line, and the next diff works. DOM checks (token classes, texts,
// colours) at 1600×1000 and 1280×800.
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../src/store/settings.ts';
import { contrastRatio } from '../../src/view/colors.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { promptConversation } from '../../src/bridge/settings.ts';
import { errorTexts, studioForFile, root, type Studio } from './harness.ts';

let studio: Studio;
let page: Page;
let tok: Tokenizer;

studioForFile('template-diff', (s) => ({ studio, page } = { studio: s, page: s.page }));
beforeAll(async () => {
  tok = await loadTokenizerDir(path.join(root, 'public/models/tiny-adder'));
});

const CONVS = DEFAULT_SETTINGS.prompts.map(promptConversation);
const hex = (rgb: string) => '#' + rgb.match(/\d+/g)!.slice(0, 3).map((x) => Number(x).toString(16).padStart(2, '0')).join('');
const visible = (t: string) => t.replaceAll('\n', '↵').replaceAll(' ', '·');

/** Per strip: the ops and texts of its tokens, in order. */
const strips = () =>
  page.getByTestId('template-diff-row').evaluateAll((rows) => rows.map((r) => Array.from(r.querySelectorAll<HTMLElement>('.ttok')).map((t) => ({ op: t.dataset.op!, text: t.textContent! }))));

async function runDiff(): Promise<string> {
  await page.getByTestId('template-diff-run').click();
  await expect.poll(async () => (await page.getByTestId('template-diff-run').isEnabled()) && (await page.getByTestId('template-diff-summary').count()), { timeout: 30_000 }).toBeTruthy();
  return (await page.getByTestId('template-diff-summary').locator('div').first().textContent()) ?? '';
}

describe('template diff in chromium', () => {
  it('enable_thinking true vs false: exactly the empty think block, on every prompt, at both sizes', async () => {
    const think = tok.encode('<think>\n\n</think>\n\n');
    const plain = CONVS.map((c) => tok.encode(tok.applyChatTemplate(c, { template_kwargs: { enable_thinking: true } })));
    expect(think.length).toBeGreaterThan(2);
    await page.getByTestId('template-thinking-A').selectOption('true');
    await page.getByTestId('template-thinking-B').selectOption('false');
    const summary = await runDiff();
    const same = plain.reduce((n, p) => n + p.length, 0);
    expect(summary).toContain(`${CONVS.length} prompt(s): ${CONVS.length} differ · 0 tokens only in A · ${CONVS.length * think.length} tokens only in B · ${same} aligned`);
    const shown = await strips();
    expect(shown).toHaveLength(Math.min(CONVS.length, 8));
    shown.forEach((row, i) => {
      expect(row.filter((t) => t.op === 'removed')).toEqual([]);
      expect(row.slice(0, plain[i].length).every((t) => t.op === 'same')).toBe(true);
      expect(row.slice(plain[i].length).map((t) => [t.op, t.text])).toEqual(think.map((id) => ['added', visible(tok.decode([id]))]));
    });
    // Added tokens are marked in colour, not only by class; every kind of token reads at WCAG AA (4.5:1).
    const bg = await page.locator('[data-testid="template-diff-row"] .ttok.added').first().evaluate((e) => getComputedStyle(e).backgroundColor);
    expect(bg).toBe('rgb(18, 54, 31)');
    for (const op of ['added', 'same']) {
      const [fg, back] = await page.locator(`[data-testid="template-diff-row"] .ttok.${op}`).first().evaluate((e) => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]);
      expect(contrastRatio(hex(fg), hex(back)), op).toBeGreaterThanOrEqual(4.5);
    }
    for (const size of [{ width: 1280, height: 800 }, { width: 1600, height: 1000 }]) {
      await page.setViewportSize(size);
      const over = await page.getByTestId('template-diff-row').evaluateAll((rows) => rows.filter((r) => r.scrollWidth > r.clientWidth + 1).length);
      expect(over, `${size.width}×${size.height}: strips wrap inside the panel`).toBe(0);
    }
  }, 120_000);

  it('a pasted template that adds a system turn: exactly that block is added, in front', async () => {
    const block = '<|im_start|>system\nYou add numbers.<|im_end|>\n';
    const pasted = `{{- ${JSON.stringify(block)} }}{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}`;
    await page.getByTestId('template-thinking-A').selectOption('template default');
    await page.getByTestId('template-thinking-B').selectOption('template default');
    await page.getByTestId('template-source-B').selectOption('pasted');
    // "pasted" starts from the model's own template: unedited, it renders the same tokens.
    const own = JSON.parse(fs.readFileSync(path.join(root, 'public/models/tiny-adder/tokenizer_config.json'), 'utf8')).chat_template as string;
    expect(await page.getByTestId('template-text-B').inputValue()).toBe(own);
    expect(await runDiff()).toBe(`${CONVS.length} prompt(s): identical token ids`);
    await page.getByTestId('template-text-B').fill(pasted);
    await runDiff();
    const shown = await strips();
    const n = tok.encode(block).length;
    const [fg, back] = await page.locator('.legend-row .ttok.removed').evaluate((e) => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]);
    expect(contrastRatio(hex(fg), hex(back)), 'removed').toBeGreaterThanOrEqual(4.5);
    for (const row of shown) {
      expect(row.filter((t) => t.op === 'removed')).toEqual([]);
      expect(row.slice(0, n).map((t) => t.op)).toEqual(new Array(n).fill('added'));
      expect(row.slice(0, n).map((t) => t.text).join('')).toBe(visible(block));
      expect(row.slice(n).every((t) => t.op === 'same')).toBe(true);
    }
  }, 120_000);

  it('a pasted template that never finishes or does not parse is stopped with one line beside the templates, the last diff kept; the next diff works', async () => {
    const before = await page.getByTestId('template-diff-summary').textContent();
    expect(before).toBeTruthy();
    // 10¹⁰ iterations over small ranges (a single huge range() raises at once in the browser's jinja).
    await page.getByTestId('template-text-B').fill('{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}');
    await page.getByTestId('template-diff-run').click();
    await expect.poll(() => page.getByTestId('template-diff-error').count(), { timeout: 30_000 }).toBe(1);
    expect(await page.getByTestId('template-diff-error').textContent()).toMatch(/template "B", prompt 0: the chat template did not finish within 5000 ms/);
    // Issue 24: not a global banner, and the diff of the templates that rendered stays.
    expect(await errorTexts(page, 'settings')).toEqual([]);
    expect(await page.getByTestId('template-diff-summary').textContent()).toBe(before);
    await page.getByTestId('template-text-B').fill('{% if %}');
    await page.getByTestId('template-diff-run').click();
    await expect.poll(() => page.getByTestId('template-diff-run').isEnabled(), { timeout: 30_000 }).toBe(true);
    expect(await page.getByTestId('template-diff-error').textContent()).toMatch(/template "B"/);
    expect(await errorTexts(page, 'settings')).toEqual([]);
    expect(await page.getByTestId('template-diff-summary').textContent()).toBe(before);
    await page.getByTestId('template-source-B').selectOption('model');
    const summary = await runDiff();
    expect(await page.getByTestId('template-diff-error').count()).toBe(0);
    expect(summary).toBe(`${CONVS.length} prompt(s): identical token ids`); // A and B are the same variant now
    expect(studio.pageErrors).toEqual([]);
  }, 120_000);
});
