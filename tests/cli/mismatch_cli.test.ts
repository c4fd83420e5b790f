// `grpo-studio mismatch` end to end, in process: each planted fixture (tests/helpers/mismatch_fixtures.ts)
// is diagnosed by its rule on exactly the planted rows (--json, exit 1) and the clean one by none (exit 0);
// a batch without a side is exit 2 with one line naming the file and the field. On the embedded model
// (public/models/tiny-adder): a sampler that returned the base model's log-probs (`score`) while the trainer
// runs a PEFT adapter with nonzero lora_B is 'adapter-missing-on-sampler'; with the adapter's own log-probs
// as the sampler side it is not; and the recomputed trainer side — with and without the adapter — equals
// the float64 oracle (src/oracle/model.ts) within the golden tolerance (tests/golden/README.md: per-token
// log-probs rtol 1e-4, atol 1e-5 where completion_mask = 1).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { MismatchCliResult } from '../../src/cli/mismatch.ts';
import type { ScoreResult } from '../../src/cli/score.ts';
import { CORRECTIONS } from '../../src/grpo/mismatch/corrections.ts';
import { padBatch } from '../../src/grpo/batch.ts';
import type { DiagnosisId } from '../../src/grpo/mismatch/types.ts';
import { parsePythonJson, type GrpoBatch } from '../../src/io/batch.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { adderBatch, nonzeroAdapter, tinyAdderConfig } from '../helpers/adapter_mismatch.ts';
import { expectClose } from '../helpers/close.ts';
import { DIAGNOSIS_OF, plantedBatch, type Planted } from '../helpers/mismatch_fixtures.ts';

const MODEL = resolve(__dirname, '..', '..', 'public', 'models', 'tiny-adder');
const tmp = () => mkdtempSync(join(tmpdir(), 'mismatch-cli-'));
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

function writeBatch(batch: GrpoBatch): string {
  const path = join(tmp(), 'batch.json');
  writeFileSync(path, JSON.stringify(batch));
  return path;
}

/** `grpo-studio mismatch ARGS --json --out FILE`: the exit code and the result (stdout and stderr kept quiet). */
async function mismatch(args: string[]): Promise<{ code: number; result: MismatchCliResult }> {
  const out = join(tmp(), 'result.json');
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  try {
    const code = await main(['mismatch', ...args, '--json', '--out', out]);
    // NaN / Infinity are written as Python's json.dump writes them (a loss of 0 / 0 when a correction rejects every token).
    return { code, result: parsePythonJson(readFileSync(out, 'utf8'), out) as MismatchCliResult };
  } finally {
    err.mockRestore();
  }
}

describe('grpo-studio mismatch on planted fixtures', () => {
  it.each(Object.entries(DIAGNOSIS_OF) as [Exclude<Planted, 'clean'>, DiagnosisId][])('%s → %s on exactly the planted rows, exit 1', async (pattern, rule) => {
    const { batch, planted } = plantedBatch(pattern);
    const { code, result } = await mismatch([writeBatch(batch)]);
    expect(code).toBe(1);
    const d = result.report.diagnoses.find((x) => x.id === rule);
    expect(d, `${rule} among ${result.report.diagnoses.map((x) => x.id).join(', ')}`).toBeDefined();
    expect(d!.rows.map((r) => r.sample).sort((a, b) => a - b)).toEqual(planted);
    // The sides the report says it used, and the corrections side by side without their per-token arrays.
    expect([result.report.sampler, result.report.trainer]).toEqual(['sampling_per_token_logps', 'old_per_token_logps']);
    expect(result.corrections.length).toBeGreaterThan(0);
    for (const c of result.corrections) expect(Object.keys(c)).not.toContain('weights');
    expect(result.recomputed).toBeNull();
  });

  it('text report (--out): sides, quantiles, top tokens with text, diagnoses with rows, every correction side by side', async () => {
    const { batch, planted } = plantedBatch('top_p');
    const path = writeBatch(batch);
    const out = join(tmp(), 'report.txt');
    expect(await main(['mismatch', path, '--tokenizer', MODEL, '--out', out])).toBe(1);
    const text = readFileSync(out, 'utf8');
    expect(text).toContain(`${path}: sampler = sampling_per_token_logps, trainer = old_per_token_logps`);
    for (const section of ['PER TOKEN', 'PER SEQUENCE', 'TOP TOKENS', 'BY TOKEN CLASS', 'BY SAMPLER PROBABILITY', 'DIAGNOSES (1)', 'CORRECTIONS']) expect(text).toContain(section);
    expect(text).toMatch(/sample \d+ position \d+ turn 1: id \d+ "[^"]+" {2}p_sampler/);
    expect(text).toContain('[sampler-renormalised]');
    const rows = text.split('\n').find((l) => l.trim().startsWith('rows '))!;
    expect([...rows.matchAll(/(\d+): /g)].map((m) => Number(m[1]))).toEqual(planted);
    for (const c of CORRECTIONS) expect(text).toContain(c.label);
  });

  it('clean: no diagnosis, exit 0', async () => {
    const { code, result } = await mismatch([writeBatch(plantedBatch('clean').batch)]);
    expect(result.report.diagnoses).toEqual([]);
    expect(code).toBe(0);
  });

  it('a batch without one side: exit 2, one line naming the file and the field', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      for (const field of ['sampling_per_token_logps', 'old_per_token_logps'] as const) {
        const { batch } = plantedBatch('clean', { B: 4, C: 8 });
        delete batch[field];
        const path = writeBatch(batch);
        err.mockClear();
        expect(await main(['mismatch', path, '--json'])).toBe(2);
        expect(err.mock.calls).toHaveLength(1);
        const line = String(err.mock.calls[0][0]);
        expect(line.split('\n')).toHaveLength(1);
        expect(line).toContain(path);
        expect(line).toContain(field);
      }
      expect(await main(['mismatch', writeBatch(plantedBatch('clean', { B: 4, C: 8 }).batch), '--adapter', tmp()])).toBe(2);
      expect(String(err.mock.calls.at(-1)![0])).toMatch(/--adapter needs --model/);
    } finally {
      err.mockRestore();
    }
  });
});

describe('grpo-studio mismatch --model tiny-adder --adapter', () => {
  it('the sampler has the base’s log-probs: adapter-missing-on-sampler; with the adapter’s: none; both recomputed sides equal the float64 oracle', async () => {
    const batch = await adderBatch();
    const config = tinyAdderConfig();
    const { weights, dir: adapter } = nonzeroAdapter();

    // The sampler side: the base model's log-probs, as `score` computes them.
    const scoreOut = join(tmp(), 'score.json');
    expect(await main(['score', '--model', MODEL, '--batch', writeBatch(batch), '--out', scoreOut])).toBe(0);
    const base = read<ScoreResult>(scoreOut).per_token_logps;
    const missing = await mismatch([writeBatch({ ...batch, sampling_per_token_logps: base }), '--model', MODEL, '--adapter', adapter]);
    expect(missing.code).toBe(1);
    const d = missing.result.report.diagnoses.find((x) => x.id === 'adapter-missing-on-sampler');
    expect(d, missing.result.report.diagnoses.map((x) => x.id).join(', ')).toBeDefined();
    expect(d!.rows.map((r) => r.sample).sort()).toEqual([0, 1, 2, 3]);
    expect([missing.result.report.trainer, missing.result.recomputed!.adapter]).toEqual(['recomputed', adapter]);
    // The adapter moves the trainer well past the tolerance; the base matches the sampler.
    expect(missing.result.report.adapter!.with_adapter_mean_abs).toBeGreaterThan(0.2);
    expect(missing.result.report.adapter!.base_mean_abs).toBeLessThan(1e-4);

    // Both recomputed sides against the float64 oracle, with and without the adapter.
    const p = padBatch(batch);
    const baseModel = await RefModel.from_pretrained(new FolderSource(MODEL));
    const x = { B: p.B, T: p.L, input_ids: p.input_ids, attention_mask: p.attention_mask, position_ids: p.position_ids };
    const N = p.B * p.C;
    const oracle = (m: RefModel) => logprob_gather_forward(m.forward(x, { logits_to_keep: p.C }).logits, p.completion_ids, null, N, config.vocab_size, 1).logp;
    const ragged = (rows: number[][]) => rows.flatMap((r) => [...r, ...new Array<number>(p.C - r.length).fill(0)]);
    const tol = { rtol: 1e-4, atol: 1e-5, mask: p.completion_mask };
    expectClose(ragged(missing.result.recomputed!.per_token_logps), oracle(new RefModel(config, baseModel.weights, weights)), { ...tol, label: 'recomputed with the adapter' });
    expectClose(ragged(missing.result.recomputed!.base_per_token_logps!), oracle(baseModel), { ...tol, label: 'recomputed base' });
    expectClose(ragged(base), oracle(baseModel), { ...tol, label: 'score (the sampler side)' });

    // A sampler that had the adapter: its log-probs are the trainer's, nothing to diagnose.
    const synced = await mismatch([writeBatch({ ...batch, sampling_per_token_logps: missing.result.recomputed!.per_token_logps }), '--model', MODEL, '--adapter', adapter]);
    expect(synced.result.report.diagnoses.map((x) => x.id)).not.toContain('adapter-missing-on-sampler');
    expect(synced.result.report.diagnoses).toEqual([]);
    expect(synced.code).toBe(0);
  });
});
