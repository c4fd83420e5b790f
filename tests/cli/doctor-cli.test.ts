// `grpo-studio doctor` end to end: a real child process through bin/grpo-studio.mjs, exit codes 0/1/2,
// human and --json output.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const fixture = (name: string) => path.join(root, 'tests/fixtures/batches', `${name}.json`);

function doctor(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(root, 'bin/grpo-studio.mjs'), 'doctor', ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('grpo-studio doctor', () => {
  it('exit 0 on a golden batch (warnings only), findings grouped by severity', () => {
    const r = doctor(path.resolve(root, 'tests/golden/models/tiny-llama/batch.json'));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^WARNINGS \(1\)\n {2}\[zero-std-group\]/);
    expect(r.stdout).toMatch(/INFO \(1\)\n {2}\[truncated-completion\]/);
    expect(r.stdout).toMatch(/0 error\(s\), 1 warning\(s\), 1 info/);
  });

  it('exit 1 with errors; --json lists every finding', () => {
    const r = doctor(fixture('mask-length-mismatch'), '--json');
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { findings: { rule: string; sample: number; severity: string }[] };
    expect(out.findings.filter((f) => f.rule === 'mask-length-mismatch').map((f) => f.sample)).toEqual([0, 1, 2, 3]);
    expect(out.findings.every((f) => ['error', 'warning', 'info'].includes(f.severity))).toBe(true);
    const human = doctor(fixture('mask-length-mismatch'));
    expect(human.code).toBe(1);
    expect(human.stdout).toMatch(/^ERRORS \(4\)/);
  });

  it('--tokenizer enables the tokenizer rules', () => {
    const without = doctor(fixture('template-mismatch'));
    expect(without.code).toBe(0);
    expect(without.stdout).toMatch(/SKIPPED[\s\S]*\[template-mismatch\] needs a tokenizer/);
    const withTok = doctor(fixture('template-mismatch'), '--tokenizer', QWEN3_DIR, '--json');
    expect(withTok.code).toBe(1);
    expect(JSON.parse(withTok.stdout).findings.some((f: { rule: string }) => f.rule === 'template-mismatch')).toBe(true);
  });

  it('a --tokenizer that does not fit the batch is not applied: its rules are skipped with the reason, the exit code is the batch\'s', () => {
    const tiny = path.join(root, 'public/models/tiny-adder');
    const r = doctor(fixture('template-mismatch'), '--tokenizer', tiny);
    expect(r.code).toBe(0);
    for (const rule of ['token-out-of-vocabulary', 'retokenization-mismatch', 'template-mismatch']) {
      expect(r.stdout).toContain(`  [${rule}] --tokenizer ${tiny} does not fit this batch: pad_token_id 151643 is not its pad (302 "<|endoftext|>")`);
    }
    expect(r.stdout).toMatch(/0 error\(s\), 0 warning\(s\), 0 info/);
  });

  it('exit 2 with a one-line reason on unreadable input', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'doctor-'));
    const cases: [string[], RegExp][] = [];
    writeFileSync(path.join(dir, 'notjson.json'), '{"format": ');
    cases.push([[path.join(dir, 'notjson.json')], /not valid JSON/]);
    writeFileSync(path.join(dir, 'tag.json'), '{"format": "something-else"}');
    cases.push([[path.join(dir, 'tag.json')], /field "format" is "something-else"/]);
    writeFileSync(path.join(dir, 'missing.json'), '{"format": "grpo-batch/v1", "num_generations": 2, "pad_token_id": 0, "eos_token_ids": [1], "prompt_ids": [], "completion_ids": []}');
    cases.push([[path.join(dir, 'missing.json')], /missing required field "completion_mask"/]);
    cases.push([[path.join(dir, 'absent.json')], /cannot read .*ENOENT/]);
    cases.push([[fixture('clean'), '--tokenizer', dir], /--tokenizer .*tokenizer\.json/]);
    const badConfig = mkdtempSync(path.join(tmpdir(), 'doctor-model-'));
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(path.join(root, 'public/models/tiny-adder', f), path.join(badConfig, f));
    writeFileSync(path.join(badConfig, 'config.json'), '{"vocab_size": ');
    cases.push([[fixture('clean'), '--tokenizer', badConfig], /--tokenizer .*: config\.json is not valid JSON/]);
    cases.push([[fixture('clean'), '--bogus'], /unknown option --bogus/]);
    for (const [args, msg] of cases) {
      const r = doctor(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(msg);
    }
  });
});
