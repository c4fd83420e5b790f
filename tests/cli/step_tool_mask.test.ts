// An imported multi-turn batch (verl fixture: row 4 has a tool-output token, response_mask 0 there) steps
// with TRL's loss mask completion_mask · tool_mask: the tool token is attended to but not trained on. The
// token-mean loss with the tool mask must equal the loss without it minus that token's term, over one
// token fewer (28 masked tokens → 27), both taken from the same `grpo-studio step` run on the tiny model.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { serializeBatch } from '../../src/io/batch.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';

const ROOT = resolve(__dirname, '..', '..');

describe('step on an imported batch with tool tokens', () => {
  it('the loss leaves tool-output tokens out (completion_mask · tool_mask)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'step-tool-'));
    const name = 'verl-interleaved.safetensors';
    const { batch } = readAnyBatch(new Uint8Array(readFileSync(join(ROOT, 'tests/fixtures/formats', name))), name);
    expect(batch.tool_mask![4]).toEqual([1, 1, 0, 1, 1]);
    const tokens = batch.completion_mask.flat().reduce((a, b) => a + b, 0);
    expect(tokens).toBe(28);
    // Stepped as a TRL batch (trainer absent): TRL's loss_type and TRL's loss mask, not verl's.
    const trl = { ...batch, trainer: undefined, config: { ...batch.config, loss_type: 'dapo', beta: 0 } };
    writeFileSync(join(dir, 'with.json'), serializeBatch(trl));
    writeFileSync(join(dir, 'without.json'), serializeBatch({ ...trl, tool_mask: undefined }));
    vi.spyOn(console, 'log').mockImplementation(() => {});
    const step = async (f: string) => {
      expect(await main(['step', '--model', join(ROOT, 'tests/golden/models/tiny-llama'), '--batch', join(dir, `${f}.json`), '--out', join(dir, `${f}.out.json`)])).toBe(0);
      return JSON.parse(readFileSync(join(dir, `${f}.out.json`), 'utf8')) as StepCliResult;
    };
    const without = await step('without');
    const withTool = await step('with');
    const x = without.per_token_loss![4][2]; // the tool token's loss term
    expect(Math.abs(x)).toBeGreaterThan(1e-3);
    expect(withTool.loss).toBeCloseTo((without.loss * tokens - x) / (tokens - 1), 5);
  }, 120_000);
});
