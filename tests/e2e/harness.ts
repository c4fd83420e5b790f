// Shared setup of the studio's e2e tests: build the page with Vite, serve it on 127.0.0.1 from a static
// host with a single-page-app fallback, open headless Debian chromium with WebGPU (SwiftShader), and the
// small page helpers the tests share (wait for an update, read canvas pixels).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, expect } from 'vitest';

export const root = path.resolve(import.meta.dirname, '../..');

const MIME: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png' };

/** A static host with a single-page-app fallback (as Vite's dev server and many CDNs): a missing path gets index.html and 200. */
function serve(dir: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    let file = path.join(dir, url === '/' ? 'index.html' : url);
    if (!file.startsWith(dir)) {
      res.writeHead(403).end();
      return;
    }
    if (!fs.existsSync(file) || fs.statSync(file).isDirectory()) file = path.join(dir, 'index.html');
    res.writeHead(200, { 'content-type': MIME[path.extname(file)] ?? 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

export interface Studio {
  ctx: BrowserContext;
  page: Page;
  base: string;
  pageErrors: string[];
  close(): Promise<void>;
}

/** Builds into .out/<name>-dist, serves it and opens one page at `viewport`. */
export async function openStudio(name: string, viewport = { width: 1600, height: 1000 }): Promise<Studio> {
  const outDir = path.join(root, `.out/${name}-dist`);
  // The bundle users get: under vitest NODE_ENV is "test", and Vite's build would then ship React's
  // development build (double renders, dev checks), several times slower on the main thread.
  const env = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    await build({ root, logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  } finally {
    process.env.NODE_ENV = env;
  }
  const server = await serve(outDir);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const ctx = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`)), {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport,
    acceptDownloads: true,
    args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--headless=new'],
  });
  const page = await ctx.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(base);
  return {
    ctx,
    page,
    base,
    pageErrors,
    close: async () => {
      await ctx.close();
      server.close();
    },
  };
}

/** The stage statuses, in order. */
export const stageStatuses = (page: Page) => page.locator('.stage').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.status ?? ''));

/** Waits until every stage is done or skipped, or one failed; returns the statuses. */
export async function waitForUpdate(page: Page, timeout = 240_000): Promise<string[]> {
  await expect.poll(async () => {
    const s = await stageStatuses(page);
    return s.every((x) => x === 'done' || x === 'skipped') || s.includes('error');
  }, { timeout, interval: 250 }).toBe(true);
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
