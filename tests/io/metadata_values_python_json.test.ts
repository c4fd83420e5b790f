// A safetensors dump's __metadata__ values are JSON as Python's json.dumps writes it: NaN, Infinity and -Infinity
// as bare words (TRL's rewards_per_func holds NaN where a reward function returned None, and json.dumps of its
// .tolist() writes exactly that). They read as the grpo-batch JSON reader reads them — numbers, then judged as any
// NaN reward is — so NaN and null give one batch and one Doctor answer. A value that is no JSON even for Python is
// a one-line refusal naming the file, the key and the parser's reason, where the reader needs a list or object.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import type { ImportResult } from '../../src/io/formats/common.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';
import { refusal } from '../helpers/refusal.ts';

// trl-rank0: rank 0 of 2, 6 rows, metadata rewards for all 12 samples.
const R0 = new Uint8Array(readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures', 'formats', 'trl-rank0.safetensors')));
const B = 6;
const ALL = 12;
const read = (meta: Record<string, string | undefined>) => readAnyBatch(editSafetensors(R0, meta), 'trl.safetensors');
const doctor = (r: ImportResult) => diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred));

/** A value as Python's json.dumps writes it (float('nan') → NaN, float('inf') → Infinity), or as null for None. */
const py = (x: number | null): string => (x === null ? 'null' : Number.isNaN(x) ? 'NaN' : x === Infinity ? 'Infinity' : x === -Infinity ? '-Infinity' : String(x));
const pyRows = (rows: (number | null)[][]) => `[${rows.map((r) => `[${r.map(py).join(', ')}]`).join(', ')}]`;

describe('NaN, Infinity and -Infinity in metadata JSON', () => {
  it('rewards_per_func with NaN reads as the null version (None → NaN), and the Doctor says the same of both', () => {
    const reward = fc.oneof(fc.double({ min: -10, max: 10, noNaN: true }).map((x) => x + 0), fc.constant(NaN)); // + 0: -0 prints as 0
    fc.assert(
      fc.property(fc.array(fc.array(reward, { minLength: 2, maxLength: 2 }), { minLength: ALL, maxLength: ALL }), (rows) => {
        const withNaN = read({ rewards_per_func: pyRows(rows), reward_weights: '[1.0, 1.0]' });
        const withNull = read({ rewards_per_func: pyRows(rows.map((r) => r.map((x) => (Number.isNaN(x) ? null : x)))), reward_weights: '[1.0, 1.0]' });
        // Rank 0 of 2 keeps the gathered list's first B rows, a NaN wherever Python wrote NaN.
        expect(withNaN.batch.rewards_per_func).toEqual(rows.slice(0, B));
        expect(withNaN.batch.rewards_per_func).toEqual(withNull.batch.rewards_per_func);
        expect(doctor(withNaN).findings).toEqual(doctor(withNull).findings);
      }),
      { numRuns: 25 },
    );
  });

  it('the review case: one reward function returned None for one sample (NaN in json.dumps)', () => {
    const rows = Array.from({ length: ALL }, (_, i) => [1, i === 3 ? NaN : 0]);
    const r = read({ rewards_per_func: pyRows(rows), reward_weights: '[1.0, 1.0]' });
    expect(r.batch.rewards_per_func![3]).toEqual([1, NaN]);
    expect(doctor(r).findings).toEqual(doctor(read({ rewards_per_func: pyRows(rows.map((x) => x.map((v) => (Number.isNaN(v) ? null : v)))), reward_weights: '[1.0, 1.0]' })).findings);
  });

  it('a metrics object with NaN keeps its numbers', () => {
    expect(read({ metrics: '{"kl": NaN, "loss": 0.5}' }).batch.metrics).toEqual({ kl: NaN, loss: 0.5 });
  });

  it('±Infinity among rewards are numbers, as in a grpo-batch file', () => {
    const rewards = [Infinity, 0, -Infinity, 1, 0, 1, 1, 0, 0.5, 0.5, 0.5, 0.5];
    expect(read({ rewards: `[${rewards.map(py).join(', ')}]` }).batch.rewards).toEqual(rewards.slice(0, B));
  });

  it('an id carrier of NaN is named as NaN, not as null', () => {
    expect(refusal(() => read({ pad_token_id: 'NaN' }))).toBe('trl.safetensors: __metadata__ pad_token_id = NaN is not a token id (an integer in [0, 2^31))');
  });
});

describe('a metadata value that is no JSON even for Python', () => {
  it.each([
    ['rewards_per_func', '[[1.0, nan], [1.0, 0.0]]', 'a JSON list'], // Python writes NaN, never nan
    ['rewards', '[1.0, 0.0,', 'a JSON list'],
    ['metrics', '{"kl": NaN,', 'a JSON object'],
    ['config', "{'num_generations': 4}", 'a JSON object'], // str(dict), not json.dumps
  ])('%s = %s is one line naming the file, the key and why', (key, text, what) => {
    const msg = refusal(() => read({ [key]: text }));
    expect(msg).toMatch(new RegExp(`^trl\\.safetensors: __metadata__ "${key}" must be ${what}: not valid JSON, even as Python's json writes it \\(.+\\)$`));
  });

  it('a value of the wrong kind keeps the plain message', () => {
    expect(refusal(() => read({ metrics: '5' }))).toBe('trl.safetensors: __metadata__ "metrics" must be a JSON object');
  });

  it('nesting past the JSON depth limit is named as such', () => {
    const msg = refusal(() => read({ metrics: '['.repeat(300) + ']'.repeat(300) }));
    expect(msg).toMatch(/^trl\.safetensors: __metadata__ "metrics" must be a JSON object: JSON nesting deeper than \d+ levels/);
  });
});

describe('a prime-rl line re-saved with Python json', () => {
  it('NaN among the log-probs reads as the writer\'s null does', () => {
    const text = readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures', 'formats', 'prime-rl-short-loss-mask.jsonl'), 'utf8');
    const line = text.split('\n')[0];
    const rec = JSON.parse(line) as { inference_logprobs: number[] };
    const at = rec.inference_logprobs.length - 1;
    const withNull = line.replace(/"inference_logprobs":\[[^\]]*\]/, `"inference_logprobs":[${rec.inference_logprobs.map((x, t) => (t === at ? 'null' : String(x))).join(',')}]`);
    const withNaN = withNull.replace(/"inference_logprobs":\[([^\]]*)null\]/, '"inference_logprobs":[$1NaN]');
    expect(withNaN).not.toBe(withNull);
    const r = (l: string) => readAnyBatch(new TextEncoder().encode([l, ...text.split('\n').slice(1)].join('\n')), 'r.jsonl');
    expect(r(withNaN).batch).toEqual(r(withNull).batch);
    expect(Number.isNaN(r(withNaN).batch.sampling_per_token_logps![0].at(-1))).toBe(true);
  });
});

describe('a non-finite value inside a list setting', () => {
  it('is named as the file has it (NaN, Infinity), not as JSON null', async () => {
    const { checkSetting, specOf } = await import('../../src/grpo/settings/table.ts');
    const { TRL_SETTINGS } = await import('../../src/grpo/settings/trl.ts');
    const row = specOf(TRL_SETTINGS, 'reward_weights');
    expect(() => checkSetting(row, [NaN, 0.5], 'config')).toThrow(/^config\.reward_weights: expected .*, got \[NaN,0\.5\]$/);
    expect(() => checkSetting(row, [Infinity], 'config')).toThrow(/got \[Infinity\]$/);
  });
});
