// `grpo-studio step` and `score` on a trainer's batch say the trainer's numbers:
// - step on one TRL rank's file (rank 0 of 2, gradient_accumulation_steps 2, num_items_in_batch over both ranks):
//   losses[loss_type] is the loss TRL's _compute_loss forms (its run scalings in), for each loss type;
// - score reads the batch's own ref_per_token_logps (the trainer's reference) whatever --ref-model is loaded, as
//   step does, checks the model against them, and its KL is the batch trainer's estimator: TRL's k3, verl's
//   low_var_kl with its clamps (k = clamp(ref − logp, ±20), exp(k) − k − 1 clamped to ±10: verl core_algos.py
//   kl_penalty_forward), computed here from score's own log-probs.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { ScoreResult } from '../../src/cli/score.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { GOLDEN } from '../helpers/golden.ts';

const MODEL = join(GOLDEN, 'tiny-gpt2');
const FORMATS = resolve(__dirname, '../fixtures/formats');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
type Batch = Record<string, unknown> & { config: Record<string, unknown>; run?: Record<string, unknown>; completion_mask: number[][]; ref_per_token_logps: number[][] };

let dir = '';
let r0: Batch;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'step-score-trainer-'));
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'log').mockImplementation(() => {});
  expect(await main(['convert', join(FORMATS, 'trl-rank0.safetensors'), '--out', join(dir, 'r0.json')])).toBe(0);
  r0 = read<Batch>(join(dir, 'r0.json'));
  expect(r0.config).toMatchObject({ rank: 0, num_processes: 2, gradient_accumulation_steps: 2 });
  expect(r0.ref_per_token_logps).toBeTruthy();
}, 120_000);

function write(name: string, b: Batch): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(b));
  return path;
}

describe('step on one TRL rank of two, two accumulation steps', () => {
  for (const loss_type of ['dapo', 'grpo', 'bnpo', 'dr_grpo']) {
    it(`${loss_type}: losses[loss_type] is the loss`, async () => {
      const out = join(dir, `step-${loss_type}.out.json`);
      expect(await main(['step', '--model', MODEL, '--batch', write(`r0-${loss_type}`, { ...r0, config: { ...r0.config, loss_type } }), '--out', out])).toBe(0);
      const r = read<StepCliResult>(out);
      expect(r.objective?.trainer).toBe('trl');
      expect(r.loss_type).toBe(loss_type);
      expect(r.losses[loss_type]).toBe(r.loss);
      // verl's aggregation names are no TRL loss: not in the table as TRL numbers.
      expect(r.losses['token-mean']).toBeUndefined();
    }, 120_000);
  }
});

describe("score reads the batch's reference log-probs, with its trainer's KL", () => {
  const k3 = (lp: number, ref: number) => Math.exp(ref - lp) - (ref - lp) - 1;
  const lowVarKl = (lp: number, ref: number) => {
    const k = Math.min(20, Math.max(-20, ref - lp));
    return Math.min(10, Math.max(-10, Math.exp(k) - k - 1));
  };

  async function score(name: string, b: Batch, ref: boolean): Promise<ScoreResult> {
    const out = join(dir, `${name}.score.json`);
    expect(await main(['score', '--model', MODEL, ...(ref ? ['--ref-model', MODEL] : []), '--batch', write(name, b), '--out', out])).toBe(0);
    return read<ScoreResult>(out);
  }

  function expectKl(r: ScoreResult, b: Batch, kl: (lp: number, ref: number) => number) {
    expect(r.per_token_kl).not.toBeNull();
    let far = 0;
    b.completion_mask.forEach((row, i) =>
      row.forEach((m, t) => {
        const want = kl(r.per_token_logps[i][t], b.ref_per_token_logps[i][t]);
        expect(Math.abs(r.per_token_kl![i][t] - want)).toBeLessThanOrEqual(1e-4 * Math.abs(want) + 1e-5);
        if (m && Math.abs(want) > 1e-3) far++;
      }),
    );
    expect(far).toBeGreaterThan(0);
  }

  it('TRL (k3) with --ref-model the policy itself: the KL is to the batch reference, not 0, and the model is checked', async () => {
    const r = await score('trl', r0, true);
    expect(r.ref_per_token_logps).toEqual(r0.ref_per_token_logps.map((row) => row.map((x) => Math.fround(x))));
    expect(r.reference).toBe('batch');
    expect(r.reference_check?.max_abs_diff).toBeGreaterThan(1e-3);
    expectKl(r, r0, k3);
  }, 120_000);

  it('verl low_var_kl: clamped as verl clamps it, with or without --ref-model', async () => {
    const b: Batch = {
      ...r0, trainer: 'verl', run: undefined,
      config: { use_kl_loss: true, kl_loss_type: 'low_var_kl', kl_loss_coef: 0.01, ppo_micro_batch_size_per_gpu: 256 },
      ref_per_token_logps: r0.ref_per_token_logps.map((row, i) => row.map((x, t) => x + ((i + t) % 2 ? 15 : -15))),
    };
    for (const ref of [false, true]) {
      const r = await score(`verl-${ref}`, b, ref);
      expectKl(r, b, lowVarKl);
      expect(r.per_token_kl!.flat().every((x) => Math.abs(x) <= 10)).toBe(true);
    }
  }, 120_000);
});
