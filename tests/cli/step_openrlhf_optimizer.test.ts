// `grpo-studio step` on an OpenRLHF batch takes OpenRLHF's actor optimizer step (openrlhf_optimizer.ts): at its
// defaults the run's first update has lr 0 (a 3% warmup of at least one step), so the weights do not move and the
// log-probs after the step are the log-probs before it; given the schedule's position it steps at lr · λ(k).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { GOLDEN } from '../helpers/golden.ts';

const SRC = join(GOLDEN, 'tiny-gpt2');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

/** tiny-gpt2's golden batch as an OpenRLHF batch with this config and run. */
async function step(config: Record<string, unknown>, run: Record<string, unknown> = {}): Promise<StepCliResult> {
  const b = read<Record<string, unknown>>(join(SRC, 'batch.json'));
  const dir = mkdtempSync(join(tmpdir(), 'step-openrlhf-'));
  writeFileSync(join(dir, 'batch.json'), JSON.stringify({ ...b, trainer: 'openrlhf', config, run }));
  vi.spyOn(console, 'error').mockImplementation(() => {});
  expect(await main(['step', '--model', SRC, '--batch', join(dir, 'batch.json'), '--out', join(dir, 'r.json')])).toBe(0);
  return read<StepCliResult>(join(dir, 'r.json'));
}

describe("grpo-studio step takes OpenRLHF's actor optimizer step", () => {
  it('at the defaults the first update runs at lr 0: nothing moves, the log-probs after are the log-probs before', async () => {
    const r = await step({});
    expect(r.optimizer).toEqual({ name: 'adamw', lr: 0, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0, momentum: 0, no_decay: 'openrlhf' });
    expect(r.grad_norm).toBeGreaterThan(0);
    expect(r.update_norm).toBe(0);
    expect(r.post_step_per_token_logps).toEqual(r.per_token_logps);
  }, 120_000);

  it('at update k of max_steps it steps at actor.adam.lr · λ(k), and the weights move', async () => {
    // max_steps 100, warmup ⌈3⌉ = 3: update 1 runs at base_lr · λ = 0.03 · (1/3), LambdaLR's product (0.009999999999999998).
    const r = await step({ 'actor.adam.lr': 0.03 }, { actor_optimizer_steps: 1, max_steps: 100 });
    expect(r.optimizer.lr).toBe(0.03 * (1 / 3));
    expect(r.update_norm).toBeGreaterThan(0);
    expect(r.post_step_per_token_logps).not.toEqual(r.per_token_logps);
    expect(r.settings.provenance['run.actor_optimizer_steps']).toEqual({ origin: 'file', label: expect.stringContaining('batch.json') });
  }, 120_000);
});
