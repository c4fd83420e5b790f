// End-to-end check of a LoRA adapter in the page (issue 14), in headless chromium with WebGPU on
// SwiftShader, on the embedded default model: create an adapter in the Model panel (r = 4, all-linear),
// run an update to its end, and see that the reference stage names the base without the adapter, that the
// grad-norm chart lists only adapter groups, that the memory plan counts the adapter, and that "Save
// adapter" downloads a PEFT folder: adapter_config.json with the chosen r / lora_alpha / target_modules and
// adapter_model.safetensors with F32 tensors under PEFT key names. Then the other reference (a frozen copy
// of the adapter as created) and removing the adapter.
import fs from 'node:fs';
import type { Download, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { parseSafeTensors } from '../../src/io/safetensors.ts';
import { studioForFile, waitForUpdate, type Studio } from './harness.ts';

let studio: Studio;
let page: Page;

studioForFile('lora', (s) => ({ studio, page } = { studio: s, page: s.page }));

describe('LoRA adapter in chromium', () => {
  it('creates an adapter, trains only it against the base without adapter, and saves it as a PEFT folder', async () => {
    expect(Number(await page.getByTestId('loss-field-beta').inputValue())).toBeGreaterThan(0);
    await page.getByTestId('lora-create').locator('summary').click();
    await page.getByTestId('lora-r').fill('4');
    await page.getByTestId('lora-alpha').fill('8');
    await page.getByTestId('lora-create-button').click();
    await expect.poll(async () => (await page.getByTestId('lora-info').count()) > 0, { timeout: 60_000 }).toBe(true);
    expect(await page.getByTestId('lora-info').textContent()).toContain('r 4, lora_alpha 8');
    await expect.poll(async () => (await page.getByTestId('memory-plan').locator('summary').textContent()) ?? '', { timeout: 10_000 }).toContain('LoRA r 4');
    expect(await page.getByTestId('lora-reference').inputValue()).toBe('base-without-adapter');

    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    expect(await page.getByTestId('reference-kind').textContent()).toContain('base without adapter');
    // The chart's group names (its y-axis ticks): every one an adapter group, none of the base's.
    const groupNames = async () => ((await page.getByTestId('chart-grads').textContent()) ?? '').match(/(?:lora\.)?layers\.\d+\.(?:attention|mlp|norms)|embedding|lm_head/g) ?? [];
    await expect.poll(async () => (await groupNames()).length, { timeout: 60_000 }).toBeGreaterThan(0);
    for (const g of await groupNames()) expect(g).toMatch(/^lora\.layers\.\d+\.(attention|mlp)$/);

    const downloads: Download[] = [];
    page.on('download', (d) => downloads.push(d));
    await page.getByTestId('lora-save').click();
    await expect.poll(() => downloads.length, { timeout: 60_000 }).toBe(2);
    const saved = new Map<string, Buffer>();
    for (const d of downloads) saved.set(d.suggestedFilename(), fs.readFileSync((await d.path())!));
    expect([...saved.keys()].sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    const cfg = JSON.parse(saved.get('adapter_config.json')!.toString('utf8')) as Record<string, unknown>;
    expect(cfg).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear' });
    const st = parseSafeTensors(new Uint8Array(saved.get('adapter_model.safetensors')!));
    expect(st.tensors.size).toBeGreaterThan(0);
    for (const [k, t] of st.tensors) {
      expect(k).toMatch(/^base_model\.model\.model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj\.lora_[AB]\.weight$/);
      expect(t.dtype).toBe('F32');
      expect(t.shape[k.includes('lora_A') ? 0 : 1]).toBe(4);
    }

    // The other reference: the frozen copy of the adapter as created (KL to it, not to the base).
    await page.getByTestId('lora-reference').selectOption('frozen-adapter');
    await expect.poll(async () => page.getByTestId('reference-name').textContent(), { timeout: 60_000 }).toContain('frozen copy of the loaded adapter');
    await page.getByTestId('step-run').click();
    expect(await waitForUpdate(page)).not.toContain('error');
    expect(await page.getByTestId('reference-kind').textContent()).toContain('frozen copy of the loaded adapter');

    // Removed: every weight trains again, against the frozen copy of the loaded weights.
    await page.getByTestId('lora-remove').click();
    await expect.poll(async () => page.getByTestId('lora-info').count(), { timeout: 60_000 }).toBe(0);
    expect(await page.getByTestId('reference-name').textContent()).toContain('frozen copy of the loaded weights');
    await expect.poll(async () => (await page.getByTestId('memory-plan').locator('summary').textContent()) ?? '', { timeout: 10_000 }).not.toContain('LoRA');
    expect(studio.pageErrors).toEqual([]);
  });
});
