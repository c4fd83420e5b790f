// `grpo-studio step` on a verl batch under the engine worker (use_legacy_worker_impl disable), whose losses are
// normalised by the mini-batch's global counts (verl/workers/utils/losses.py ppo_loss). verl's driver always passes
// global_batch_size = ppo_mini_batch_size × rollout.n, empty rows included (verl/trainer/ppo/ray_trainer.py
// _update_actor): the step's batch is that mini-batch, so a row with no trained token still counts in a seq-mean
// divisor — ppo_loss's own None fallback (the non-empty rows) is a loss case's only. A batch holding several
// mini-batches (several optimizer steps), or a kl_cov selection over rows the engine splits into micro-batches, is
// refused. The divisor is checked by its ratio between runs of the same batch, not by a number of ours.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';

const MODEL = join(__dirname, '..', 'golden', 'models', 'tiny-qwen2');
const dir = mkdtempSync(join(tmpdir(), 'verl-engine-'));
const golden = JSON.parse(readFileSync(join(MODEL, 'batch.json'), 'utf8'));
const B = golden.completion_ids.length;

/** The golden batch as a verl engine batch; row 0 trains no token. */
function batchFile(name: string, config: Record<string, unknown>, run?: Record<string, unknown>): string {
  const { config: _trl, ...rest } = golden;
  const completion_mask = golden.completion_mask.map((r: number[], b: number) => (b === 0 ? r.map(() => 0) : r));
  const batch = { ...rest, completion_mask, trainer: 'verl', config: { use_legacy_worker_impl: 'disable', loss_agg_mode: 'seq-mean-token-mean', ppo_mini_batch_size: B, ppo_micro_batch_size_per_gpu: B, ...config }, ...(run ? { run } : {}) };
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(batch));
  return path;
}

async function loss(path: string): Promise<number> {
  const out = `${path}.out.json`;
  expect(await main(['step', '--model', MODEL, '--batch', path, '--out', out])).toBe(0);
  return JSON.parse(readFileSync(out, 'utf8')).loss;
}

describe('verl engine worker: a step on a batch', () => {
  it("seq-mean divides by the mini-batch's rows, the empty row included, as verl's driver passes global_batch_size", async () => {
    const derived = await loss(batchFile('derived.json', {}));
    const stated = await loss(batchFile('stated.json', {}, { global_batch_size: B }));
    const nonEmpty = await loss(batchFile('non_empty.json', {}, { global_batch_size: B - 1 }));
    expect(derived).toBe(stated);
    // Σ of the row means is the same in all three runs: only the divisor differs.
    expect(derived * B).toBeCloseTo(nonEmpty * (B - 1), 6); // float32 kernels
    expect(derived).not.toBeCloseTo(nonEmpty, 6);
  }, 120_000);

  it('a batch of several engine mini-batches is refused: verl takes one optimizer step per mini-batch', async () => {
    await expectRefusal(['step', '--model', MODEL, '--batch', batchFile('mini2.json', { ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 2 })], /config\.ppo_mini_batch_size: 2 rows per optimizer step .* the batch's 6 rows hold 3 mini-batches: verl's engine worker takes that many optimizer steps/);
  }, 120_000);

  it('rows that do not chunk evenly over the ranks are refused, as the legacy loop refuses them', async () => {
    await expectRefusal(['step', '--model', MODEL, '--batch', batchFile('dp4.json', {}, { data_parallel_size: 4 })], /run\.data_parallel_size: 4 ranks, but the batch's 6 rows do not chunk evenly over them/);
  }, 120_000);

  it('kl_cov under use_dynamic_bsz whose token budget packs each rank into one micro-batch runs (its top-k over those rows)', async () => {
    expect(Number.isFinite(await loss(batchFile('klcov_dyn.json', { loss_mode: 'kl_cov', use_dynamic_bsz: true, ppo_max_token_len_per_gpu: 100_000, ppo_micro_batch_size_per_gpu: null })))).toBe(true);
  }, 120_000);

  it("kl_cov over rows the engine splits into micro-batches is refused (its top-k is per micro-batch)", async () => {
    await expectRefusal(['step', '--model', MODEL, '--batch', batchFile('klcov.json', { loss_mode: 'kl_cov', ppo_micro_batch_size_per_gpu: 3 })], /config\.ppo_micro_batch_size_per_gpu: 3 rows per micro-batch, of each rank's 6, and loss_mode kl_cov \(its token selection\) spans each micro-batch's rows/);
  }, 120_000);
});

describe('verl: a rollout correction that rejects every token', () => {
  it("is refused naming why the trainer's loss is NaN (0 / 0 over no token), not as an overflow", async () => {
    const sampling = (golden.old_per_token_logps as number[][]).map((row) => row.map((x) => x + 0.3));
    const path = join(dir, 'all_rejected.json');
    writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(batchFile('base.json', {}), 'utf8')), sampling_per_token_logps: sampling, config: { rollout_rs: 'seq_mean_k1', rollout_rs_threshold: '0.999_1.001', ppo_mini_batch_size: B, ppo_micro_batch_size_per_gpu: B } }));
    await expectRefusal(['step', '--model', MODEL, '--batch', path], /verl: the trainer's loss is NaN on this batch: its corrections remove all \d+ loss tokens \(rejected or masked\), and its aggregation divides 0 by 0, as the trainer's own does; the step is not taken/);
  }, 120_000);
});
