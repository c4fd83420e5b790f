// `grpo-studio score` on every golden model's batch.json against its expected.json (ragged per sample),
// plus the bad-input path (a token outside the vocabulary → one line, exit 2).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { ScoreResult } from '../../src/cli/score.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';

const flat = (rows: number[][]) => rows.flat();

describe.each(GOLDEN_MODELS)('score %s', (m) => {
  it('matches expected.json (per_token_logps, ref_per_token_logps, per_token_kl)', async () => {
    const dir = join(GOLDEN, m);
    const out = join(mkdtempSync(join(tmpdir(), 'score-')), 'result.json');
    const code = await main(['score', '--model', dir, '--batch', join(dir, 'batch.json'), '--ref-model', join(dir, 'ref'), '--out', out]);
    expect(code).toBe(0);
    const got = JSON.parse(readFileSync(out, 'utf8')) as ScoreResult;
    const want = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8'));
    const batch = JSON.parse(readFileSync(join(dir, 'batch.json'), 'utf8'));
    const mask = flat(batch.completion_mask);
    // README: per-token log-probs and KL, rtol 1e-4, atol 1e-5, where completion_mask = 1.
    for (const k of ['per_token_logps', 'ref_per_token_logps', 'per_token_kl'] as const) {
      expect(got[k]!.map((r) => r.length), k).toEqual(want[k].map((r: number[]) => r.length));
      expectClose(flat(got[k]!), flat(want[k]), { rtol: 1e-4, atol: 1e-5, mask, label: `${m} ${k}` });
    }
    expect(got.per_token_entropy.map((r) => r.length)).toEqual(want.per_token_logps.map((r: number[]) => r.length));
    expect(got.per_token_entropy.flat().every((e) => e >= 0)).toBe(true);
    expect(got.adapter).toHaveProperty('backend');
  });
});

describe('score CLI input errors', () => {
  it('exits 2 with one line naming the sample and position of a token outside the vocabulary', async () => {
    const dir = join(GOLDEN, 'tiny-qwen2');
    const batch = JSON.parse(readFileSync(join(dir, 'batch.json'), 'utf8'));
    batch.completion_ids[3][2] = 83; // vocab_size is 83
    const path = join(mkdtempSync(join(tmpdir(), 'score-bad-')), 'batch.json');
    writeFileSync(path, JSON.stringify(batch));
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['score', '--model', dir, '--batch', path])).toBe(2);
      expect(err.mock.calls[0][0]).toMatch(/\(policy \w+, vocab_size 83\): completion_ids\[3\]\[2\] = 83 is not a token id in \[0, 83\)/);
      expect(await main(['score', '--model', join(dir, 'nope'), '--batch', path])).toBe(2);
      expect(err.mock.calls[1][0]).toMatch(/nope/);
      expect(await main(['score', '--batch', path])).toBe(2);
    } finally {
      err.mockRestore();
    }
  });
});

describe('a computation says what the file did not carry', () => {
  // prime-rl, NeMo-RL and slime dumps carry no loss settings and no sampling temperature: the numbers are the
  // studio's defaults' (temperature 1), and `score` / `step` / `mismatch` say so on stderr, as `convert` does.
  it.each(['slime-rollout-3.json', 'nemo-rl-train_data_step3.jsonl'])('score %s: the reader\'s notes on stderr, the temperature among them', async (f) => {
    const said: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((s: string) => void said.push(s));
    const file = join(__dirname, '..', 'fixtures', 'formats', f);
    const out = join(mkdtempSync(join(tmpdir(), 'score-')), 'result.json');
    const code = await main(['score', '--model', join(GOLDEN, 'tiny-gpt2'), '--batch', file, '--out', out]);
    vi.restoreAllMocks();
    expect(code).toBe(0);
    expect(said).toContainEqual(expect.stringMatching(new RegExp(`^note: .*${f.replace('.', '\\.')}: no loss settings in the file: .* scores at temperature 1 \\(the file carries no sampling temperature`)));
    expect(said.filter((s) => s.startsWith('note: ')).length).toBeGreaterThan(3);
  });
});
