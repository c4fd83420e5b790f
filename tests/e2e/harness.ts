// Shared setup of the studio's e2e tests: the studio opened in headless chromium (browser.ts), one per
// test file, and the small page helpers the tests share (wait for an update, screenshots, error banners).
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { openStudio, pageLogs, root, type Studio } from './browser.ts';

export { openStudio, root, type Studio };

/** The stage statuses, in order. */
export const stageStatuses = (page: Page) => page.locator('.stage').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.status ?? ''));

/** Waits until every stage is done or skipped, or one failed; returns the statuses. */
export async function waitForUpdate(page: Page, timeout = 240_000): Promise<string[]> {
  try {
    await expect.poll(async () => {
      const s = await stageStatuses(page);
      return s.every((x) => x === 'done' || x === 'skipped') || s.includes('error');
    }, { timeout, interval: 250 }).toBe(true);
  } catch (e) {
    // An update that never ends: say where it stopped, what the page shows and what it logged.
    const stages = await page.locator('.stage').evaluateAll((els) => els.map((el) => `${(el as HTMLElement).dataset.stage ?? el.textContent?.slice(0, 20)}=${(el as HTMLElement).dataset.status}`));
    const banners = await page.locator('[data-testid="errors"]').allTextContents();
    throw new Error(`the update did not finish in ${timeout} ms: stages ${stages.join(' ')}; banners ${JSON.stringify(banners)}; last console lines:\n${(pageLogs.get(page) ?? []).slice(-40).join('\n')}\n(${(e as Error).message})`);
  }
  return stageStatuses(page);
}

/** Text of the error banners of one kind. */
export const errorTexts = (page: Page, kind: string) => page.locator(`[data-testid="errors"] [data-kind="${kind}"]`).allTextContents();

/** Dismisses every error banner. */
export async function dismissErrors(page: Page): Promise<void> {
  for (const x of await page.locator('[data-testid="errors"] [title="dismiss"]').all()) await x.click();
}

/**
 * Saves .out/<name>; a README screenshot (`docs`) is also copied to docs/<name> under UPDATE_SCREENSHOTS=1,
 * so `npm test` leaves tracked files alone.
 */
export async function screenshot(page: Page, name: string, docs = false): Promise<void> {
  const file = path.join(root, '.out', name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  await page.screenshot({ path: file });
  if (docs && process.env.UPDATE_SCREENSHOTS === '1') fs.copyFileSync(file, path.join(root, 'docs', name));
}

/**
 * One studio for a whole test file: opened before its tests with the embedded default model loaded,
 * handed to `use`, and closed after them.
 */
export function studioForFile(name: string, use: (studio: Studio) => void): void {
  let studio: Studio | undefined;
  beforeAll(async () => {
    studio = await openStudio(name);
    await studio.page.getByTestId('model-info').waitFor({ timeout: 120_000 });
    use(studio);
  }, 240_000);
  afterAll(async () => {
    await studio?.close();
  });
}
