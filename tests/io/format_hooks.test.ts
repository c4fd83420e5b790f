// The Python hooks of docs/import/{trl,verl,openrlhf}.md, run unchanged (tests/python/run_hook.py, with a
// dependency-free safetensors shim) on synthetic tensors of each trainer's shapes; what they write must
// import with the right format, boundaries, masks, groups and advantages. A doc edit that breaks its
// hook breaks this test.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stepSettingsOfFile } from '../../src/cli/args.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { mergeImports, readAnyBatch } from '../../src/io/formats/index.ts';
import { python } from '../helpers/python.ts';

const root = path.resolve(import.meta.dirname, '..', '..');

function runHook(trainer: string): { dir: string; files: string[] } {
  const dir = mkdtempSync(path.join(tmpdir(), `hook-${trainer}-`));
  const r = spawnSync(python(), [path.join(root, 'tests/python/run_hook.py'), trainer, path.join(root, `docs/import/${trainer}.md`), dir], {
    encoding: 'utf8', timeout: 120_000, env: { ...process.env, PYTHONPATH: path.join(root, 'tests/python/shim') },
  });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return { dir, files: JSON.parse(r.stdout) as string[] };
}

const read = (dir: string, files: string[]) => mergeImports(files.map((name) => ({ name, result: readAnyBatch(new Uint8Array(readFileSync(path.join(dir, name))), name) })));

/** The hook's code block is at most 10 lines of Python, as the issue asks. */
function hookLines(trainer: string): number {
  const block = /```python\n([\s\S]*?)```/.exec(readFileSync(path.join(root, `docs/import/${trainer}.md`), 'utf8'))![1];
  return block.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#')).length;
}

describe('docs/import hooks', () => {
  it('TRL: the subclass writes one file per rank; merged they give 12 rows in 3 groups of 4', () => {
    expect(hookLines('trl')).toBeLessThanOrEqual(10);
    const { dir, files } = runHook('trl');
    expect(files).toEqual(['grpo_step0_rank0.safetensors', 'grpo_step0_rank1.safetensors']);
    const r = read(dir, files);
    expect(r.format).toBe('trl');
    expect(r.unknownKeys).toEqual([]);
    const b = r.batch;
    expect(b.num_generations).toBe(4);
    expect(b.pad_token_id).toBe(0);
    expect(b.eos_token_ids).toEqual([2]);
    expect(b.group_ids).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    expect(b.prompt_ids[0]).toEqual([0, 0, 11, 12, 13]);
    expect(b.prompt_mask![0]).toEqual([0, 0, 1, 1, 1]);
    // rank 0 row 0: length 3 + 0 → [40, 41, EOS] then padding
    expect(b.completion_ids[0]).toEqual([40, 41, 2, 0, 0, 0, 0]);
    expect(b.completion_mask[0]).toEqual([1, 1, 1, 0, 0, 0, 0]);
    expect(b.advantages![0]).toBeCloseTo(-1, 6);
    expect(b.advantages![6]).toBeCloseTo(0, 6); // rank 1 row 0: linspace(-1, 1, 6)[0] + 1
    expect(b.config).toMatchObject({ loss_type: 'dapo', beta: 0, gradient_accumulation_steps: 1, lr_scheduler_type: 'linear' });
    // TrainerState: where the learning-rate schedule is.
    expect(b.run).toMatchObject({ global_step: 0, max_steps: 40 });
    expect(diagnose(b).findings.filter((f) => f.severity === 'error')).toEqual([]);
  });

  it('verl: uid from non_tensor_batch gives the groups of interleaved rows; norm_adv_by_std_in_grpo false → no std', () => {
    expect(hookLines('verl')).toBeLessThanOrEqual(10);
    const { dir, files } = runHook('verl');
    const r = read(dir, files);
    expect(r.format).toBe('verl');
    const b = r.batch;
    expect(b.group_ids).toEqual([0, 1, 0, 1]);
    expect(b.num_generations).toBe(2);
    expect(b.config).toMatchObject({ scale_rewards: 'none', loss_agg_mode: 'token-mean' });
    expect(b.completion_mask).toEqual([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0]]);
    expect(b.prompt_ids[1]).toEqual([0, 0, 21, 22]);
    expect(b.rewards).toEqual([1, 0, 0, 1]);
    expect(b.advantages).toEqual([0.5, -0.5, -0.5, 0.5]);
    const report = diagnose(b);
    expect(report.findings.filter((f) => f.severity === 'error')).toEqual([]);
    expect(report.skipped.map((s) => s.rule)).not.toContain('advantage-mismatch'); // checked, and it matches
    // Issue 21: the hook saves the actor's batch sizes, so `step` resolves its settings (it used to refuse,
    // exit 2, "ppo_micro_batch_size_per_gpu: null with use_dynamic_bsz false"). 2 prompts × n 2 // 1 GPU = 4.
    expect(b.config).toMatchObject({ ppo_micro_batch_size_per_gpu: 2, ppo_mini_batch_size: 4, use_dynamic_bsz: false });
    const step = stepSettingsOfFile(b, path.join(dir, files[0]));
    expect(step.config.trainer?.config).toMatchObject({ ppo_micro_batch_size_per_gpu: 2, ppo_mini_batch_size: 4 });
  });

  it('OpenRLHF: one file per experience (different widths), merged by index into whole groups', () => {
    expect(hookLines('openrlhf')).toBeLessThanOrEqual(10);
    const { dir, files } = runHook('openrlhf');
    expect(files).toEqual(['exp_0_0.safetensors', 'exp_0_1.safetensors']);
    const r = read(dir, files);
    expect(r.format).toBe('openrlhf');
    const b = r.batch;
    expect(b.group_ids).toEqual([0, 1, 0, 1]); // index [0, 2, 1, 3] // 2
    expect(b.prompt_ids).toEqual([[11, 12], [11, 12], [21, 22, 23], [21, 22, 23]]);
    expect(b.completion_ids).toEqual([[40, 2, 0, 0], [41, 42, 2, 0], [43, 2], [44, 2]]);
    expect(b.completion_mask).toEqual([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1], [1, 1]]);
    b.old_per_token_logps!.forEach((row, i) => row.forEach((x, t) => expect(x).toBeCloseTo(b.completion_mask[i][t] ? -0.3 : 0, 6)));
    b.advantages!.forEach((a, i) => expect(a).toBeCloseTo([1, -1, -1, 1][i] * Math.SQRT1_2, 6));
    expect(b.rewards).toEqual([1, 0, 0, 1]);
    // The args travel as the config: the estimator decides how the Doctor judges the advantages (group_norm: checked).
    expect(b.config).toMatchObject({ 'algo.advantage.estimator': 'group_norm', 'algo.kl.use_loss': true, advantage_estimator: 'openrlhf' });
    const report = diagnose(b);
    expect(report.findings.filter((f) => f.severity === 'error').map((f) => f.message)).toEqual([]);
    expect(report.skipped.map((s) => s.rule)).not.toContain('advantage-mismatch');
  });
});
