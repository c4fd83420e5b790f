// End-to-end check of the reference model in the page (issue 15, "the reference forward silently reuses
// the policy"), in headless chromium with WebGPU on SwiftShader, on the embedded default model with
// β > 0. The frozen copy is a snapshot of the weights as loaded: the first update has KL = 0 before its
// step; "Next update" continues from the stepped weights (AdamW step 2), so the second shows KL > 0 before
// its step and a non-zero β·KL term, and names its reference; Reset undoes exactly that step (running again gives
// the same numbers); "loaded weights (restart)" gives KL = 0 again. A second checkpoint (a folder) is
// loaded as reference, shown by name with its memory, and the reference stage names it.
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { studioForFile, root, waitForUpdate, type Studio } from './harness.ts';

let studio: Studio;
let page: Page;

studioForFile('reference', (s) => ({ studio, page } = { studio: s, page: s.page }));

/** Mean KL before the step (exact, from the data attribute) and the β·KL term of the loss headline. */
async function kl(): Promise<{ mean: number; term: number }> {
  const mean = Number(await page.getByTestId('mean-kl').getAttribute('data-value'));
  const head = (await page.getByTestId('loss-headline').textContent()) ?? '';
  const term = Number(/β·KL (\S+)/.exec(head)![1]);
  return { mean, term };
}

const policyWeights = () => page.getByTestId('policy-weights').textContent();

/** Clicks `button` and waits for the update it starts to finish, recognised by the policy's step count it ends on. */
async function runUpdate(button: string, endsOn: string): Promise<void> {
  await page.getByTestId(button).click();
  await expect.poll(policyWeights, { timeout: 240_000 }).toBe(endsOn);
  expect(await waitForUpdate(page)).not.toContain('error');
}

describe('reference model in chromium', () => {
  it('continues from the stepped weights against the frozen copy: KL > 0 before the second step; Reset undoes exactly one step; restart gives KL 0', async () => {
    expect(Number(await page.getByTestId('loss-field-beta').inputValue())).toBeGreaterThan(0);
    expect(await page.getByTestId('step-weights').inputValue()).toBe('continue');
    expect(await page.getByTestId('reference-name').textContent()).toContain('frozen copy of the loaded weights');
    expect(await page.getByTestId('model-info').textContent()).toContain('reference_weights');
    // The plan before a step follows the prompt set: doubling G doubles the rows planned and raises the peak.
    const plan = page.getByTestId('memory-plan');
    const G = Number(await page.getByTestId('num-generations').inputValue());
    await expect.poll(async () => (await plan.locator('summary').textContent()) ?? '', { timeout: 10_000 }).toContain(`(${4 * G} rows`);
    const before = Number(await plan.getAttribute('data-total'));
    await page.getByTestId('num-generations').fill(String(2 * G));
    await expect.poll(async () => (await plan.locator('summary').textContent()) ?? '', { timeout: 10_000 }).toContain(`(${8 * G} rows`);
    expect(Number(await plan.getAttribute('data-total'))).toBeGreaterThan(before);
    await page.getByTestId('num-generations').fill(String(G));
    expect(await policyWeights()).toBe('policy: as loaded');

    await runUpdate('step-run', 'policy: loaded + 1 step');
    expect(await page.getByTestId('reference-kind').textContent()).toContain('frozen-copy of the loaded weights');
    expect(await kl()).toEqual({ mean: 0, term: 0 });

    await runUpdate('step-next-update', 'policy: loaded + 2 steps');
    expect(await page.getByTestId('reference-kind').textContent()).toContain('frozen-copy of the loaded weights');
    const second = await kl();
    expect(second.mean).toBeGreaterThan(0);
    expect(second.term).toBeGreaterThan(0);
    expect(await page.getByTestId('optimizer-step').textContent()).toMatch(/^adamw step 2 · lr /); // the moments carry over

    // Reset undoes the second update's step only: the same update again (same seed, same weights) gives the same KL.
    await page.getByTestId('step-reset').click();
    await expect.poll(policyWeights).toBe('policy: loaded + 1 step');
    await runUpdate('step-run', 'policy: loaded + 2 steps');
    expect((await kl()).mean).toBe(second.mean);
    expect(await page.getByTestId('optimizer-step').textContent()).toMatch(/^adamw step 2 · lr /);

    // Restart from the loaded weights: the copy equals the policy again.
    await page.getByTestId('step-weights').selectOption('loaded');
    await runUpdate('step-next-update', 'policy: loaded + 1 step');
    expect(await kl()).toEqual({ mean: 0, term: 0 });
    expect(await page.getByTestId('optimizer-step').textContent()).toMatch(/^adamw step 1 · lr /);
    expect(studio.pageErrors).toEqual([]);
  });

  it('loads a second checkpoint (a folder) as reference: shown by name with its memory, named by the reference stage', async () => {
    await page.getByTestId('reference-folder-input').setInputFiles(path.join(root, 'public/models/tiny-adder'));
    await expect.poll(async () => page.getByTestId('reference-name').textContent(), { timeout: 60_000 }).toMatch(/model tiny-adder \(qwen2, F32, [\d,]+ params\) · [\d.]+ [KM]i?B/);
    expect(await page.getByTestId('stage-meta').first().textContent()).toBe(''); // the update computed against the old reference was dropped
    await runUpdate('step-run', 'policy: loaded + 1 step');
    expect(await page.getByTestId('reference-kind').textContent()).toContain('model tiny-adder');
    // The same checkpoint the policy was loaded from, and the update restarted from it: KL 0 before the step.
    expect((await kl()).mean).toBe(0);
    await page.getByTestId('reference-frozen').click();
    await expect.poll(async () => page.getByTestId('reference-name').textContent()).toContain('frozen copy of the loaded weights');
    expect(studio.pageErrors).toEqual([]);
  });
});
