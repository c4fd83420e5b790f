// Page benchmark of the first experience (issue 23, item 5): the production build in headless chromium
// (WebGPU on SwiftShader, tests/e2e/browser.ts) with the embedded default model and the default task runs
// its first update ("Run to end") and then a second one ("Next update", from the stepped weights). Per
// update: each stage's time as the Stepper shows it (src/ui/panels/Stepper.tsx, the `.stage[data-stage]`
// items' stage-meta text, 10 ms resolution above 1 s), their sum, and the wall time from the click until
// every stage is done, with the targets beside them: ≤ 6 s for the first update, ≤ 3 s later.
// Twice, each in a fresh browser: with the GPU sampler (the page's default) and with the float64 CPU sampler on
// read-back logits (generate's `sampler: 'cpu'`, set through the persisted sampling settings, which the
// worker spreads into the generation options), so the sample stage is compared within one run.
// Needs no Node GPU adapter.
import { openStudio } from '../tests/e2e/browser.ts';
import { STORAGE_KEY } from '../src/store/index.ts';
import type { BenchOptions, Row } from './types.ts';

/** The updates measured: the button that starts each, the policy label it ends on, and its target. */
const UPDATES = [
  { update: 'first', button: 'step-run', endsOn: 'policy: loaded + 1 step', target_ms: 6000 },
  { update: 'second', button: 'step-next-update', endsOn: 'policy: loaded + 2 steps', target_ms: 3000 },
];

/**
 * Page-side, as source text (tsx's keepNames helper does not exist in the page): every stage's time in ms
 * from its stage-meta text ("1.23 s · 2.0 MB", "456 ms"), null when skipped; and whether all are settled.
 */
const STAGE_TIMES = `(() => {
  const out = {};
  let settled = true;
  for (const li of document.querySelectorAll('.stage[data-stage]')) {
    const st = li.dataset.status;
    if (st !== 'done' && st !== 'skipped') settled = false;
    if (st === 'error') throw new Error('stage ' + li.dataset.stage + ' failed: ' + li.title);
    const m = /^([0-9.]+) (s|ms)/.exec(li.querySelector('[data-testid="stage-meta"]')?.textContent ?? '');
    out[li.dataset.stage] = m ? Number(m[1]) * (m[2] === 's' ? 1000 : 1) : null;
  }
  return { settled, out };
})()`;

export async function run(_gpu: unknown, _opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const sampler of ['gpu', 'cpu'] as const) {
    const studio = await openStudio(`bench-first-update-${sampler}`);
    try {
      const page = studio.page;
      await page.getByTestId('model-info').waitFor({ timeout: 180_000 });
      // Each sampler named, not left to the page's default.
      await page.evaluate(`localStorage.setItem(${JSON.stringify(STORAGE_KEY)}, JSON.stringify({ state: { sampling: { sampler: '${sampler}' } }, version: 2 }))`);
      await page.reload();
      await page.getByTestId('model-info').waitFor({ timeout: 180_000 });
      for (const u of UPDATES) {
        await page.getByTestId(u.button).waitFor({ timeout: 60_000 });
        const t0 = Date.now();
        await page.getByTestId(u.button).click();
        await page.waitForFunction(
          `document.querySelector('[data-testid="policy-weights"]')?.textContent === ${JSON.stringify(u.endsOn)} && ${STAGE_TIMES}.settled`,
          undefined,
          { polling: 'raf', timeout: 300_000 },
        );
        const wall_ms = Date.now() - t0;
        const { out } = (await page.evaluate(STAGE_TIMES)) as { out: Record<string, number | null> };
        const total_ms = Object.values(out).reduce<number>((t, ms) => t + (ms ?? 0), 0);
        rows.push({ update: u.update, sampler, ...out, total_ms, wall_ms, target_ms: u.target_ms });
      }
      if (studio.pageErrors.length) throw new Error(`page errors: ${studio.pageErrors.join('; ')}`);
    } finally {
      await studio.close();
    }
  }
  return rows;
}
