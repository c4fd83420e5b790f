// `grpo-studio mismatch --model` on a batch whose loss reads a reference (TRL β > 0) but that holds no
// ref_per_token_logps: each correction's loss runs against the reference `grpo-studio step` takes then — a frozen
// copy of the loaded weights — and says so (`assumed.reference`), so the explorer's "correction on" loss is the
// step's loss with that correction's settings, not a refusal beside a step that computes.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { MismatchCliResult } from '../../src/cli/mismatch.ts';
import { parsePythonJson } from '../../src/io/batch.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';

const MODEL = join(__dirname, '..', 'golden', 'models', 'tiny-qwen2');
const dir = mkdtempSync(join(tmpdir(), 'mismatch-ref-'));
const golden = JSON.parse(readFileSync(join(MODEL, 'batch.json'), 'utf8'));

/** The verb's result; `mismatch` exits 1 where it diagnoses the sides' difference. */
async function run(argv: string[], out: string): Promise<Record<string, unknown>> {
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  try {
    expect(await main([...argv, '--out', out])).toBeLessThanOrEqual(argv[0] === 'mismatch' ? 1 : 0);
  } finally {
    err.mockRestore();
  }
  return parsePythonJson(readFileSync(out, 'utf8'), out) as Record<string, unknown>; // NaN where verl rejects every token
}

describe('mismatch corrections without the batch’s reference log-probs', () => {
  it("TRL's vLLM correction with β 0.04: the loss is step's against a frozen copy of the weights, and says so", async () => {
    expect(golden.config.beta).toBeGreaterThan(0);
    // A sampler side a little off the trainer's (the dump's old log-probs, moved by a fixed pattern).
    const { old_per_token_logps: old, ...rest } = golden;
    const sampling = (old as number[][]).map((row, b) => row.map((x, t) => x + 0.2 * Math.sin(3 * b + t)));
    const batch = { ...rest, sampling_per_token_logps: sampling };
    const path = join(dir, 'batch.json');
    writeFileSync(path, JSON.stringify(batch));
    const m = (await run(['mismatch', path, '--model', MODEL, '--json'], join(dir, 'm.json'))) as unknown as MismatchCliResult;
    const e = m.corrections.find((c) => c.id === 'trl:token_truncate')!;
    expect(e.error).toBeNull();
    expect(String(e.assumed?.reference)).toMatch(/^a frozen copy of the trainer's weights \(the batch holds no ref_per_token_logps\)/);
    // The same correction set in the batch's config, stepped without --ref-model.
    const stepped = join(dir, 'stepped.json');
    writeFileSync(stepped, JSON.stringify({ ...batch, config: { ...batch.config, ...e.settings } }));
    const s = await run(['step', '--model', MODEL, '--batch', stepped], join(dir, 's.json'));
    expect(s.reference).toMatch(/^frozen-copy/);
    expect(e.loss_on).toBeCloseTo(s.loss as number, 6);
  }, 120_000);
});

describe("mismatch --model and score on a run that trained a LoRA adapter", () => {
  it('refuses to recompute the trainer side without the adapter, as the step does (src/grpo/run_adapter.ts)', async () => {
    const { old_per_token_logps: old, config: _trl, ...rest } = golden;
    const path = join(dir, 'lora_run.json');
    writeFileSync(path, JSON.stringify({ ...rest, trainer: 'openrlhf', sampling_per_token_logps: old, config: { 'algo.advantage.estimator': 'group_norm', 'ds.lora.rank': 3, 'ds.lora.alpha': 6 } }));
    await expectRefusal(['mismatch', path, '--model', MODEL], /lora_run\.json: config\.ds\.lora\.rank: 3: the run trained a LoRA adapter on a frozen base/);
    // `score` takes no adapter: the base's log-probs would be another policy's.
    await expectRefusal(['score', '--model', MODEL, '--batch', path], /lora_run\.json: config\.ds\.lora\.rank: 3: the run trained a LoRA adapter on a frozen base/);
  }, 120_000);
});
