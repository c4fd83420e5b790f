// `grpo-studio step` end to end: the real binary (node bin/grpo-studio.mjs) on every golden model's
// batch.json against its expected.json, then (in process) the reference variants — a frozen copy of the
// policy, β = 0 with no reference — and bad input (one line, exit 2).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { parseSafeTensors, toF64 } from '../../src/io/safetensors.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';

const ROOT = resolve(__dirname, '..', '..');
const run = promisify(execFile);
const tmp = (name: string) => join(mkdtempSync(join(tmpdir(), 'step-cli-')), name);
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

interface Expected {
  per_token_logps: number[][];
  ref_per_token_logps: number[][];
  per_token_kl: number[][];
  post_step_per_token_logps: number[][];
  loss: number;
  grad_norm: number;
}

describe.each(GOLDEN_MODELS)('grpo-studio step %s', (m) => {
  it('matches expected.json', async () => {
    const dir = join(GOLDEN, m);
    const out = tmp('result.json');
    await run(process.execPath, [join(ROOT, 'bin/grpo-studio.mjs'), 'step', '--model', dir, '--batch', join(dir, 'batch.json'), '--ref-model', join(dir, 'ref'), '--out', out], { cwd: ROOT });
    const got = read<StepCliResult>(out);
    const want = read<Expected>(join(dir, 'expected.json'));
    const mask = read<{ completion_mask: number[][] }>(join(dir, 'batch.json')).completion_mask.flat();
    // README: per-token log-probs and KL rtol 1e-4, atol 1e-5 (completion_mask = 1).
    for (const k of ['per_token_logps', 'ref_per_token_logps', 'per_token_kl'] as const) {
      expect(got[k]!.map((r) => r.length), k).toEqual(want[k].map((r) => r.length));
      expectClose(got[k]!.flat(), want[k].flat(), { rtol: 1e-4, atol: 1e-5, mask, label: `${m} ${k}` });
    }
    // README: end-to-end post-step log-probs rtol 1e-3, atol 0.002; loss and grad_norm rtol 1e-4, atol 1e-6.
    expectClose(got.post_step_per_token_logps.flat(), want.post_step_per_token_logps.flat(), { rtol: 1e-3, atol: 0.002, mask, label: `${m} post_step_per_token_logps` });
    expectClose([got.loss], [want.loss], { rtol: 1e-4, atol: 1e-6, label: `${m} loss` });
    expectClose([got.grad_norm], [want.grad_norm], { rtol: 1e-4, atol: 1e-6, label: `${m} grad_norm` });
    // Every aggregation is reported and the chosen one is the loss; every stage that ran has a time.
    expect(Object.keys(got.losses)).toHaveLength(8);
    expect(got.losses[got.loss_type]).toBe(got.loss);
    for (const s of ['policy_forward', 'reference_forward', 'loss', 'backward', 'step', 're_evaluate']) expect(got.timings_ms[s], s).toBeGreaterThan(0);
    expect(got.per_token_entropy.flat().every((e) => e >= 0)).toBe(true);
  });
});

/** Runs the CLI in process on `batch` and returns its result. */
async function stepInProcess(batchPath: string, args: string[]): Promise<StepCliResult> {
  const out = tmp('result.json');
  expect(await main(['step', '--batch', batchPath, '--out', out, ...args])).toBe(0);
  return read<StepCliResult>(out);
}

describe('grpo-studio step reference variants', () => {
  const dir = join(GOLDEN, 'tiny-qwen2');

  it('without --ref-model and β > 0 the reference is a frozen copy: the same as passing the policy checkpoint as reference', async () => {
    const frozen = await stepInProcess(join(dir, 'batch.json'), ['--model', dir]);
    const copy = await stepInProcess(join(dir, 'batch.json'), ['--model', dir, '--ref-model', dir]);
    expect(frozen.ref_per_token_logps).toEqual(frozen.per_token_logps);
    expect(frozen.per_token_kl!.flat().every((x) => x === 0)).toBe(true);
    expect(frozen.reference).toBe('frozen-copy of the loaded weights');
    expect(copy.reference).toBe('model tiny-qwen2');
    // Same weights and the same kernels: the two runs can differ only by reduction order, which they share.
    const tight = { rtol: 1e-6, atol: 1e-7 };
    expectClose(frozen.ref_per_token_logps!.flat(), copy.ref_per_token_logps!.flat(), { ...tight, label: 'ref logps' });
    expectClose([frozen.loss, frozen.grad_norm], [copy.loss, copy.grad_norm], { ...tight, label: 'loss, grad_norm' });
    expectClose(frozen.post_step_per_token_logps.flat(), copy.post_step_per_token_logps.flat(), { ...tight, label: 'post-step logps' });
  });

  it('β = 0 loads no reference: no KL, and the loss is the golden loss without its β·KL term', async () => {
    const batch = read<{ config: Record<string, unknown>; completion_mask: number[][] }>(join(dir, 'batch.json'));
    batch.config.beta = 0;
    const path = tmp('batch.json');
    writeFileSync(path, JSON.stringify(batch));
    const got = await stepInProcess(path, ['--model', dir]);
    expect(got.ref_per_token_logps).toBeNull();
    expect(got.reference).toBeNull();
    expect(got.per_token_kl).toBeNull();
    expect(got.timings_ms.reference_forward).toBeUndefined();
    // grpo = mean_b[Σ_t (L − 0.04·KL)·M / n_b] from the golden float64 per-token loss and KL (β = 0.04 there).
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(dir, 'golden.safetensors'))));
    const L = toF64(st, 'per_token_loss');
    const KL = toF64(st, 'per_token_kl');
    const M = st.tensors.get('completion_mask')!.shape;
    const [B, C] = M;
    let loss = 0;
    for (let b = 0; b < B; b++) {
      const row = batch.completion_mask[b];
      let s = 0;
      for (let t = 0; t < row.length; t++) if (row[t]) s += L[b * C + t] - 0.04 * KL[b * C + t];
      loss += s / Math.max(1, row.reduce((a, x) => a + x, 0)) / B;
    }
    // README: loss rtol 1e-4, atol 1e-6.
    expectClose([got.loss], [loss], { rtol: 1e-4, atol: 1e-6, label: 'β = 0 loss' });
  });
});

describe('grpo-studio step follows the batch\'s trainer objective', () => {
  const dir = join(GOLDEN, 'tiny-qwen2');

  it('TRL grpo with run.gradient_accumulation_steps = 2: the objective is TRL\'s, loss and gradient halve (vs expected.json)', async () => {
    const batch = read<{ config: Record<string, unknown>; run?: Record<string, unknown> }>(join(dir, 'batch.json'));
    batch.run = { gradient_accumulation_steps: 2 };
    // One micro-batch of the accumulation window: without steps_per_generation, GRPOConfig would set it to 2 (refused).
    batch.config.steps_per_generation = 1;
    const path = tmp('batch.json');
    writeFileSync(path, JSON.stringify(batch));
    const got = await stepInProcess(path, ['--model', dir, '--ref-model', join(dir, 'ref')]);
    const want = read<Expected>(join(dir, 'expected.json'));
    expect(got.objective).toMatchObject({ trainer: 'trl', config: { loss_type: 'grpo', beta: 0.04, steps_per_generation: 1 }, run: { gradient_accumulation_steps: 2 } });
    // TRL's grpo divides by the accumulation steps (trl grpo_trainer.py _compute_loss); README: rtol 1e-4, atol 1e-6.
    expectClose([got.loss, got.grad_norm], [want.loss / 2, want.grad_norm / 2], { rtol: 1e-4, atol: 1e-6, label: 'loss, grad_norm / 2' });
    // The same batch without run context is the studio loss: no objective, expected.json's numbers.
    const plain = await stepInProcess(join(dir, 'batch.json'), ['--model', dir, '--ref-model', join(dir, 'ref')]);
    expect(plain.objective).toBeNull();
    expectClose([plain.loss, plain.grad_norm], [want.loss, want.grad_norm], { rtol: 1e-4, atol: 1e-6, label: 'studio loss, grad_norm' });
    // The loss after the step is TRL's objective too: the first AdamW step (after clipping) does not depend on the
    // gradient's scale beyond eps = 1e-8, so both runs reach the same weights and TRL's grpo halves the studio loss.
    expectClose(got.post_step_per_token_logps.flat(), plain.post_step_per_token_logps.flat(), { rtol: 1e-4, atol: 1e-5, label: 'post-step logps' });
    expectClose([got.loss_after], [plain.loss_after / 2], { rtol: 1e-3, atol: 1e-6, label: 'loss_after / 2' });
  });
});

describe("grpo-studio step takes a TRL config's optimizer step", () => {
  const dir = join(GOLDEN, 'tiny-qwen2');

  it('learning_rate on the linear schedule at run.global_step: 0.02 halfway through 100 steps is the golden 0.01 (vs expected.json)', async () => {
    // The golden update is torch AdamW at lr 0.01; as TrainingArguments: learning_rate 0.02, linear decay over
    // max_steps 100 (no warmup), at global_step 50 → 0.02 · (100 − 50) / 100 (transformers optimization.py).
    const batch = read<{ config: Record<string, unknown>; run?: Record<string, unknown> }>(join(dir, 'batch.json'));
    delete batch.config.optimizer;
    Object.assign(batch.config, { learning_rate: 0.02, lr_scheduler_type: 'linear' });
    batch.run = { global_step: 50, max_steps: 100 };
    const path = tmp('batch.json');
    writeFileSync(path, JSON.stringify(batch));
    const got = await stepInProcess(path, ['--model', dir, '--ref-model', join(dir, 'ref')]);
    expect(got.optimizer).toEqual({ name: 'adamw', lr: 0.01, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, momentum: 0, no_decay: 'biases_and_norms' });
    // The schedule's state is the optimizer's: the loss is still the studio's (no objective).
    expect(got.objective).toBeNull();
    const want = read<Expected>(join(dir, 'expected.json'));
    expectClose(got.post_step_per_token_logps.flat(), want.post_step_per_token_logps.flat(), { rtol: 1e-4, atol: 1e-5, label: 'post-step logps at the scheduled lr' });

    // Past the first step the schedule needs the run's length: an input error naming it.
    batch.run = { global_step: 50 };
    writeFileSync(path, JSON.stringify(batch));
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['step', '--model', dir, '--batch', path])).toBe(2);
      expect(err.mock.calls[0][0]).toMatch(/run\.max_steps: lr_scheduler_type linear at run\.global_step 50 needs the run's length/);
    } finally {
      err.mockRestore();
    }
  });
});

describe('grpo-studio step input errors', () => {
  const dir = join(GOLDEN, 'tiny-llama');
  const batch = () => read<Record<string, unknown> & { config: Record<string, unknown>; completion_ids: number[][] }>(join(dir, 'batch.json'));

  it.each([
    ['an unknown optimizer', (b: ReturnType<typeof batch>) => void (b.config.optimizer = { name: 'adam', lr: 1e-3 }), /config\.optimizer\.name: expected "adamw" or "sgd", got "adam"/],
    ['an unknown loss_type', (b: ReturnType<typeof batch>) => void (b.config.loss_type = 'ppo'), /config\.loss_type = "ppo": expected one of grpo, /],
    ['neither advantages nor rewards', (b: ReturnType<typeof batch>) => void delete b.advantages, /neither "advantages" nor "rewards"/],
    ['a token outside the vocabulary', (b: ReturnType<typeof batch>) => void (b.completion_ids[4][1] = 101), /\(policy llama, vocab_size 101\): completion_ids\[4\]\[1\] = 101 is not a token id in \[0, 101\)/],
  ])('%s: one line naming the field, exit 2', async (_what, edit, message) => {
    const b = batch();
    edit(b);
    const path = tmp('batch.json');
    writeFileSync(path, JSON.stringify(b));
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['step', '--model', dir, '--batch', path])).toBe(2);
      expect(err.mock.calls[0][0]).toMatch(message);
    } finally {
      err.mockRestore();
    }
  });
});
