// `grpo-studio convert` and the other verbs on trainer formats, end to end through bin/grpo-studio.mjs:
// the written batch is grpo-batch/v1, the detected format and notes go to stderr, bad input is exit 2 with
// one line naming file and key, and `doctor` reads a trainer dump directly.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseBatch } from '../../src/io/batch.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const fixture = (name: string) => path.join(root, 'tests/fixtures/formats', name);

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(root, 'bin/grpo-studio.mjs'), ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('grpo-studio convert', () => {
  it('two TRL rank files → one grpo-batch/v1 with whole groups; the summary names the trainer', () => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'convert-')), 'batch.json');
    const r = cli('convert', fixture('trl-rank0.safetensors'), fixture('trl-rank1.safetensors'), '--out', out);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/TRL GRPOTrainer \(trl\) → grpo-batch\/v1, 12 samples, 3 group\(s\) of up to 4/);
    const b = parseBatch(readFileSync(out, 'utf8'));
    expect(b.group_ids).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    expect(b.tool_mask![4]).toEqual([1, 1, 0, 0, 1, 1]);
  });

  it('writes a batch with an element outside its domain as read (nothing repaired) and exits 1, naming it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'convert-'));
    const bad = path.join(dir, 'mask2.json');
    writeFileSync(bad, JSON.stringify({ format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1], prompt_ids: [[5], [5]], completion_ids: [[1], [1]], completion_mask: [[2], [1]], advantages: [1, -1] }));
    const r = cli('convert', bad, '--out', path.join(dir, 'out.json'));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/1 schema error\(s\), first: completion_mask\[0\]\[0\] = 2: masks hold 0 or 1/);
    expect(parseBatch(readFileSync(path.join(dir, 'out.json'), 'utf8')).completion_mask).toEqual([[2], [1]]);
  });

  it('a broken dump is exit 2 with one line naming the file and key', () => {
    const bad = path.join(mkdtempSync(path.join(tmpdir(), 'convert-')), 'exp.safetensors');
    writeFileSync(bad, writeSafeTensors({
      sequences: { dtype: 'I32', shape: [1, 5], data: new Int32Array([1, 2, 3, 4, 5]) },
      action_mask: { dtype: 'I32', shape: [1, 5], data: new Int32Array([0, 0, 1, 1, 1]) },
    }, { index: '[0]', n_samples_per_prompt: '1' }));
    const r = cli('convert', bad);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/exp\.safetensors: action_mask has 5 columns, sequences\[:, 1:\] has 4/);
  });

  it('doctor reads a trainer dump directly: exit 1 on the planted bug, the format and notes in the report', () => {
    const r = cli('doctor', fixture('prime-rl-short-loss-mask.jsonl'));
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^.*prime-rl-short-loss-mask\.jsonl: prime-rl \(token export\) \(prime-rl\) → grpo-batch\/v1/);
    expect(r.stdout).toMatch(/note: no EOS id in the file: 2 inferred from the last trained token/);
    expect(r.stdout).toMatch(/\[mask-length-mismatch\].*sample 2: completion_mask has 3 entries, completion_ids has 5/);
    const json = JSON.parse(cli('doctor', fixture('verl-interleaved.safetensors'), '--json').stdout) as { format: string; unknownKeys: string[] };
    expect(json.format).toBe('verl');
    expect(json.unknownKeys).toEqual([]);
  });
});
