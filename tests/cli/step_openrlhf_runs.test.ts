// `grpo-studio step` / `convert` on OpenRLHF runs the step must not silently take as another update
// (tests/fixtures/openrlhf_runs, dumps made with OpenRLHF's own argparse): a LoRA run (its nested ds.lora.* args now
// carried) is refused without its adapter and with LoRA dropout; verl's lora_rank alike; the flat use_dynamic_batch
// before ed62d0e2 is read as train.dynamic_batch_enable and refused as that code's dynamic loss scale; a dump of the
// code before ed62d0e2 keeps that fact through convert (openrlhf_code) and is refused where its unclamped ppo ratio
// differs from 3c3be62's; an Infinity threshold is echoed as Infinity; an unread arg holding Infinity does not turn a
// successful step into exit 1.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { GOLDEN } from '../helpers/golden.ts';

const RUNS = join(import.meta.dirname, '..', 'fixtures', 'openrlhf_runs');
const QWEN = join(GOLDEN, 'tiny-qwen2');
const tmp = () => mkdtempSync(join(tmpdir(), 'step-openrlhf-runs-'));
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

/** tiny-qwen2's golden batch as `trainer`'s, with `config`; the string "Infinity" is written as the bare number (Python's json.dumps of float('inf')). */
function batchOf(trainer: 'openrlhf' | 'verl', config: Record<string, unknown>): string {
  const b = read<Record<string, unknown>>(join(QWEN, 'batch.json'));
  const path = join(tmp(), 'batch.json');
  writeFileSync(path, JSON.stringify({ ...b, trainer, config }).replaceAll('"Infinity"', 'Infinity'));
  return path;
}

describe('grpo-studio step on OpenRLHF / verl runs the studio cannot take as full-parameter or 3c3be62 steps', () => {
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  afterEach(() => err.mockClear());
  /** The last stderr line (the refusal; notes come before it). */
  const last = () => String(err.mock.calls.at(-1)?.[0] ?? '');

  it('a LoRA dump (ds.lora.dropout 0.1) is refused naming ds.lora.dropout, exit 2', async () => {
    expect(await main(['step', '--model', QWEN, '--batch', join(RUNS, 'lora.safetensors')])).toBe(2);
    expect(last()).toMatch(/lora\.safetensors: config\.ds\.lora\.dropout: 0\.1: OpenRLHF's actor computes its loss in train mode/);
    expect(last()).not.toContain('\n');
  });

  it("its converted batch keeps ds.lora.*; without dropout it needs the run's r and lora_alpha", async () => {
    const dir = tmp();
    expect(await main(['convert', join(RUNS, 'lora.safetensors'), '--out', join(dir, 'b.json')])).toBe(0);
    const b = read<{ config: Record<string, unknown> }>(join(dir, 'b.json'));
    expect(b.config).toMatchObject({ 'ds.lora.rank': 8, 'ds.lora.alpha': 16, 'ds.lora.dropout': 0.1, 'ds.lora.target_modules': 'all-linear' });
    const d0 = batchOf('openrlhf', { 'ds.lora.rank': 8, 'ds.lora.alpha': 16 });
    expect(await main(['step', '--model', QWEN, '--batch', d0])).toBe(2);
    expect(last()).toMatch(/config\.ds\.lora\.rank: 8: the run trained a LoRA adapter on a frozen base .*--adapter DIR/);
    expect(await main(['step', '--model', QWEN, '--batch', d0, '--create-adapter', 'r=4,lora_alpha=16'])).toBe(2);
    expect(last()).toMatch(/config\.ds\.lora\.rank: the run's adapter has ds\.lora\.rank = 8, ds\.lora\.alpha = 16 .*the step's adapter r = 4, lora_alpha = 16/);
    expect(await main(['step', '--model', QWEN, '--batch', d0, '--create-adapter', 'r=8,lora_alpha=16', '--out', join(dir, 'r.json')])).toBe(0);
    expect(err.mock.calls.map((c) => String(c[0]))).toContainEqual(expect.stringMatching(/^note: the adapter is created here/));
  }, 120_000);

  it("verl's actor_rollout_ref.model.lora_rank is read from the nested config and refused without an adapter", async () => {
    const path = batchOf('verl', { actor_rollout_ref: { model: { lora_rank: 8, lora_alpha: 16, target_modules: 'all-linear' } }, ppo_mini_batch_size: 6, ppo_micro_batch_size_per_gpu: 6 });
    expect(await main(['step', '--model', QWEN, '--batch', path])).toBe(2);
    expect(last()).toMatch(/config\.lora_rank: 8: the run trained a LoRA adapter .*\[volcengine\/verl/);
  }, 120_000);

  it('the flat use_dynamic_batch before ed62d0e2 is read and refused as that code computes it', async () => {
    expect(await main(['step', '--model', QWEN, '--batch', join(RUNS, 'old_dyn.safetensors')])).toBe(2);
    expect(last()).toMatch(/config\.train\.dynamic_batch_enable: true \(use_dynamic_batch\) in a batch OpenRLHF before ed62d0e2 wrote .*dynamic_loss_scale\[step\]/);
  }, 120_000);

  it('a dump of the code before ed62d0e2 keeps it through convert, and its ppo log-ratio past ±20 is refused', async () => {
    const dir = tmp();
    expect(await main(['convert', join(RUNS, 'old_big.safetensors'), '--out', join(dir, 'b.json')])).toBe(0);
    expect(read<{ config: Record<string, unknown> }>(join(dir, 'b.json')).config.openrlhf_code).toBe('before-ed62d0e2');
    for (const batch of [join(RUNS, 'old_big.safetensors'), join(dir, 'b.json')]) {
      expect(await main(['step', '--model', QWEN, '--batch', batch])).toBe(2);
      expect(last()).toMatch(/config\.openrlhf_code: before-ed62d0e2, and at sample 0, token 0 logp − old = 36\.4\d*: OpenRLHF before ed62d0e2 .*without 3c3be62's clamp to ±20/);
    }
  }, 120_000);

  it('an Infinity threshold is echoed as Infinity', async () => {
    expect(await main(['step', '--model', QWEN, '--batch', join(RUNS, 'icepop_inf.safetensors')])).toBe(2);
    expect(last()).toMatch(/config\.algo\.advantage\.is_correction_threshold = \[0\.5,Infinity\]: expected a list of 2 numbers \(finite/);
  }, 120_000);

  it('an unread arg holding Infinity leaves a successful step at exit 0, echoed as text', async () => {
    const out = join(tmp(), 'r.json');
    expect(await main(['step', '--model', QWEN, '--batch', batchOf('openrlhf', { max_ckpt_mem: 'Infinity' }), '--out', out])).toBe(0);
    expect(read<{ settings: { config: Record<string, unknown> } }>(out).settings.config.max_ckpt_mem).toBe('Infinity');
  }, 120_000);
});
