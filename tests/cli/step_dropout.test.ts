// A trainer that trains with the model's dropout on computes a random draw the studio's dropout-free forward does not
// reproduce: `grpo-studio step` on a GPT-2 checkpoint whose config.json keeps dropout (GPT2Config's 0.1) is refused
// in one line naming the probability and the fix (exit 2) under TRL's default disable_dropout false and under verl /
// OpenRLHF (train-mode actors); with disable_dropout true it steps, and the step is the dropout-free model's: the
// golden expected.json (torch in eval mode) of the same weights.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN } from '../helpers/golden.ts';

const SRC = join(GOLDEN, 'tiny-gpt2');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

/** tiny-gpt2's weights under a config.json with `dropout` set over its zeros. */
function modelWith(dropout: Record<string, number>): string {
  const dir = mkdtempSync(join(tmpdir(), 'step-dropout-'));
  mkdirSync(join(dir, 'model'));
  copyFileSync(join(SRC, 'model.safetensors'), join(dir, 'model', 'model.safetensors'));
  writeFileSync(join(dir, 'model', 'config.json'), JSON.stringify({ ...read<object>(join(SRC, 'config.json')), ...dropout }));
  return join(dir, 'model');
}

function batchWith(edit: (b: Record<string, unknown> & { config: Record<string, unknown> }) => void): string {
  const b = read<Record<string, unknown> & { config: Record<string, unknown> }>(join(SRC, 'batch.json'));
  edit(b);
  const path = join(mkdtempSync(join(tmpdir(), 'step-dropout-')), 'batch.json');
  writeFileSync(path, JSON.stringify(b));
  return path;
}

describe('grpo-studio step on a model with dropout', () => {
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  afterEach(() => err.mockClear());

  it.each([
    ['TRL, disable_dropout left out', { resid_pdrop: 0.1 }, () => {}, /: TRL trains with the model's dropout on \(disable_dropout false.*config\.json has dropout resid_pdrop 0\.1: .*set disable_dropout true/],
    ['TRL, disable_dropout false, every GPT-2 key', { attn_pdrop: 0.1, embd_pdrop: 0.05, resid_pdrop: 0.1 }, (b: { config: Record<string, unknown> }) => void (b.config.disable_dropout = false), /config\.json has dropout attn_pdrop 0\.1, embd_pdrop 0\.05, resid_pdrop 0\.1: /],
    ['verl', { attn_pdrop: 0.1 }, (b: Record<string, unknown>) => Object.assign(b, { trainer: 'verl', config: { ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 8 } }), /: verl's actor computes its loss in train mode .*attn_pdrop 0\.1: .*set them to 0 in config\.json/],
    ['OpenRLHF', { embd_pdrop: 0.2 }, (b: Record<string, unknown>) => Object.assign(b, { trainer: 'openrlhf', config: {} }), /: OpenRLHF's actor computes its loss in train mode .*embd_pdrop 0\.2: /],
  ])('%s: one line naming the dropout and the fix, exit 2', async (_what, dropout, edit, message) => {
    expect(await main(['step', '--model', modelWith(dropout), '--batch', batchWith(edit)])).toBe(2);
    expect(err.mock.calls).toHaveLength(1);
    const line = String(err.mock.calls[0][0]);
    expect(line).toMatch(message);
    expect(line).not.toContain('\n');
  });

  it("verl's model.override_config is the model verl builds: its dropout keys decide, other keys are refused naming them", async () => {
    const verl = (override: Record<string, unknown> | undefined) => (b: Record<string, unknown>) => Object.assign(b, { trainer: 'verl', config: { ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 8, ...(override ? { 'model.override_config': override } : {}) } });
    const dir = mkdtempSync(join(tmpdir(), 'step-dropout-'));
    const run = async (model: string, override: Record<string, unknown> | undefined, out?: string) => main(['step', '--model', model, '--batch', batchWith(verl(override)), ...(out ? ['--out', join(dir, out)] : [])]);
    // GPT-2's 0.1 in config.json, all three set to 0 over it: the step of the dropout-free checkpoint, exactly.
    expect(await run(modelWith({ attn_pdrop: 0.1, embd_pdrop: 0.1, resid_pdrop: 0.1 }), { attn_pdrop: 0, embd_pdrop: 0, resid_pdrop: 0, attn_implementation: 'sdpa' }, 'over.json')).toBe(0);
    expect(await run(SRC, undefined, 'plain.json')).toBe(0);
    const [over, plain] = ['over.json', 'plain.json'].map((f) => read<StepCliResult>(join(dir, f)));
    expect([over.loss, over.grad_norm, over.loss_after]).toEqual([plain.loss, plain.grad_norm, plain.loss_after]);
    // One left on, or one set over a dropout-free config.json: refused as config.json's own would be.
    err.mockClear();
    expect(await run(modelWith({ attn_pdrop: 0.1, embd_pdrop: 0.1, resid_pdrop: 0.1 }), { attn_pdrop: 0, embd_pdrop: 0 })).toBe(2);
    expect(String(err.mock.calls[0][0])).toMatch(/config\.json with config\.model\.override_config has dropout resid_pdrop 0\.1: /);
    err.mockClear();
    expect(await run(SRC, { attn_pdrop: 0.2 })).toBe(2);
    expect(String(err.mock.calls[0][0])).toMatch(/has dropout attn_pdrop 0\.2: .*or to 0 in model\.override_config/);
    // A value that is no probability: refused with the settings, naming the key.
    err.mockClear();
    expect(await run(SRC, { attn_pdrop: 1.5 })).toBe(2);
    expect(String(err.mock.calls[0][0])).toMatch(/config\.model\.override_config\.attn_pdrop: expected a probability in \[0, 1\], got 1\.5/);
    // A key that changes the model's numbers is not applied by the studio: refused, one line naming it.
    err.mockClear();
    expect(await run(SRC, { layer_norm_epsilon: 1e-3, attn_pdrop: 0 })).toBe(2);
    expect(err.mock.calls).toHaveLength(1);
    expect(String(err.mock.calls[0][0])).toMatch(/config\.model\.override_config: verl sets layer_norm_epsilon over the model's config\.json/);
  });

  it('TRL with disable_dropout true steps the dropout-free model: the golden eval-mode step', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'step-dropout-')), 'result.json');
    const model = modelWith({ attn_pdrop: 0.1, embd_pdrop: 0.1, resid_pdrop: 0.1 });
    expect(await main(['step', '--model', model, '--batch', batchWith((b) => void (b.config.disable_dropout = true)), '--ref-model', join(SRC, 'ref'), '--out', out])).toBe(0);
    const got = read<StepCliResult>(out);
    const want = read<{ loss: number; grad_norm: number }>(join(SRC, 'expected.json'));
    // README: loss and grad_norm rtol 1e-4, atol 1e-6.
    expectClose([got.loss, got.grad_norm], [want.loss, want.grad_norm], { rtol: 1e-4, atol: 1e-6, label: 'loss, grad_norm' });
  });
});
