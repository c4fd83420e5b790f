// Opens the studio as users get it, without the test runner (the e2e harness and the page benchmark
// share it): build the production bundle with Vite, serve it on 127.0.0.1 from a static host with a
// single-page-app fallback, and open headless Debian chromium with WebGPU (SwiftShader).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { build } from 'vite';

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
/** Console lines of each open studio page (the last 200). */
export const pageLogs = new WeakMap<Page, string[]>();

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
  // The last console lines of the page and its workers, for a timeout's report (harness.ts waitForUpdate).
  const log: string[] = [];
  pageLogs.set(page, log);
  page.on('console', (m) => {
    log.push(`${m.type()}: ${m.text()}`);
    if (log.length > 200) log.shift();
  });
  page.on('worker', (w) => w.on('close', () => log.push(`worker closed: ${w.url()}`)));
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
