// Bad input to the CLI verbs: each refusal is one line naming the file (or flag), the tensor or field, and where;
// a tensor the batch importers accept is accepted by `loss` / `advantages` too; nothing is computed on a value the
// user did not mean (a flag given twice). Cases are the repo's golden and fixture files with one fact changed.
import { describe, expect, it, vi } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.ts';
import { readLossCase } from '../../src/cli/loss.ts';
import { caseWith } from '../helpers/edit_case.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { GOLDEN, GOLDEN_ROOT } from '../helpers/golden.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const tmp = mkdtempSync(path.join(tmpdir(), 'grpo-bad-input-more-'));
const lossCase = path.join(GOLDEN_ROOT, 'loss', 'case_00.safetensors');
const advCase = (n: number) => path.join(GOLDEN_ROOT, 'trainers', 'advantages', `case_0${n}.safetensors`);
const TRL_ADV = advCase(0); // trainer trl, reward_weights of 2 functions
const VERL_ADV = advCase(4); // trainer verl, grpo: reads index
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A config JSON with one field set to Python's bare NaN (json.dumps of float('nan')). */
const withNaN = (config: string, key: string, wrap = (x: string) => x) => JSON.stringify({ ...JSON.parse(config), [key]: '@nan@' }).replace('"@nan@"', wrap('NaN'));

/** console.error / console.log lines of one in-process run, and its exit code. */
async function run(argv: string[]): Promise<{ code: number; err: string[]; out: string[] }> {
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  const log = vi.spyOn(console, 'log').mockImplementation(() => {});
  try {
    const code = await main(argv);
    return { code, err: err.mock.calls.map((c) => String(c[0])), out: log.mock.calls.map((c) => String(c[0])) };
  } finally {
    err.mockRestore();
    log.mockRestore();
  }
}

describe('loss: tensors and config read as the importers read them, refusals naming the file', () => {
  it('whole-number F32 completion_ids are the ids (the importers accept them; loss used to refuse)', () => {
    const f32 = caseWith(lossCase, (t) => (t.completion_ids = { dtype: 'F32', shape: t.completion_ids.shape, data: Float32Array.from(t.completion_ids.data as Int32Array) }));
    const want = readLossCase(new Uint8Array(readFileSync(lossCase)), lossCase);
    expect(Array.from(readLossCase(new Uint8Array(readFileSync(f32)), f32).completion_ids)).toEqual(Array.from(want.completion_ids));
  });

  it('completion_mask 0.5 (F32): the file, tensor, sample and position', async () => {
    const f = caseWith(lossCase, (t) => {
      const m = Float32Array.from(t.completion_mask.data as Int32Array);
      m[6] = 0.5;
      t.completion_mask = { dtype: 'F32', shape: t.completion_mask.shape, data: m };
    });
    const T = readLossCase(new Uint8Array(readFileSync(lossCase)), lossCase).T;
    const [b, t] = [Math.floor(6 / T), 6 % T];
    await expectRefusal(['loss', f], new RegExp(`^grpo-studio loss: ${esc(f)}: completion_mask\\[${b}\\]\\[${t}\\] \\(sample ${b}, position ${t}\\) = 0\\.5 \\(dtype F32\\) is not an integer$`));
  });

  it('logits as I64: the file and the tensor', async () => {
    const f = caseWith(lossCase, (t) => (t.logits = { dtype: 'I64', shape: t.logits.shape, data: new BigInt64Array(t.logits.data.length) }));
    await expectRefusal(['loss', f], new RegExp(`^grpo-studio loss: ${esc(f)}: logits has dtype I64, expected a floating tensor$`));
  });

  it('config beta NaN (Python\'s json): refused by the settings check naming config.beta, not a JSON syntax error', async () => {
    const f = caseWith(lossCase, (_, m) => (m.config = withNaN(m.config, 'beta')));
    await expectRefusal(['loss', f], new RegExp(`^grpo-studio loss: ${esc(f)}: config\\.beta: .*NaN`));
  });

  it('a truncated config: names __metadata__ "config" and the file', async () => {
    const f = caseWith(lossCase, (_, m) => (m.config = m.config.slice(0, 14)));
    await expectRefusal(['loss', f], new RegExp(`^grpo-studio loss: ${esc(f)}: __metadata__ "config" must be a JSON object: not valid JSON`));
  });
});

describe('advantages: the same rules', () => {
  it('rewards_per_func as I64: the file and the tensor', async () => {
    const f = caseWith(TRL_ADV, (t) => (t.rewards_per_func = { dtype: 'I64', shape: t.rewards_per_func.shape, data: new BigInt64Array(t.rewards_per_func.data.length) }));
    await expectRefusal(['advantages', f], new RegExp(`^grpo-studio advantages: ${esc(f)}: rewards_per_func has dtype I64, expected a floating tensor$`));
  });

  it('reward_weights [NaN, …] in Python\'s json: refused naming config.reward_weights, not "is not JSON"', async () => {
    const f = caseWith(TRL_ADV, (_, m) => (m.config = withNaN(m.config, 'reward_weights', (x) => `[${x}, 0.5]`)));
    await expectRefusal(['advantages', f], new RegExp(`^grpo-studio advantages: ${esc(f)}: config\\.reward_weights`));
  });

  it('a whole-number F32 index gives the result of the I32 one; 0.5 is refused naming the sample', async () => {
    const asF32 = (x: number | null) => caseWith(VERL_ADV, (t) => {
      const a = Float32Array.from(t.index.data as Int32Array);
      if (x !== null) a[2] = x;
      t.index = { dtype: 'F32', shape: t.index.shape, data: a };
    });
    const outs = [path.join(tmp, 'adv_i32.json'), path.join(tmp, 'adv_f32.json')];
    expect((await run(['advantages', VERL_ADV, '--out', outs[0]])).code).toBe(0);
    expect((await run(['advantages', asF32(null), '--out', outs[1]])).code).toBe(0);
    expect(readFileSync(outs[1], 'utf8')).toBe(readFileSync(outs[0], 'utf8'));
    const bad = asF32(0.5);
    await expectRefusal(['advantages', bad], new RegExp(`^grpo-studio advantages: ${esc(bad)}: index\\[2\\] \\(sample 2\\) = 0\\.5 \\(dtype F32\\) is not an integer$`));
  });
});

describe('flags and summaries', () => {
  const M = path.join(GOLDEN, 'tiny-llama');

  it('a flag given twice is refused, naming it (score used to keep the last --batch)', async () => {
    await expectRefusal(['score', '--model', M, '--batch', '/nonexistent', '--batch', path.join(M, 'batch.json')], /^grpo-studio score: --batch is given twice: give it once$/);
    await expectRefusal(['convert', path.join(M, 'batch.json'), '--out', path.join(tmp, 'a.json'), '--out=' + path.join(tmp, 'b.json')], /^grpo-studio convert: --out is given twice/);
    await expectRefusal(['doctor', path.join(M, 'batch.json'), '--json', '--json'], /^grpo-studio doctor: --json is given twice/);
  });

  it('several files stay positional: doctor A B reads both', async () => {
    const ranks = ['trl-rank0.safetensors', 'trl-rank1.safetensors'].map((f) => path.join(root, 'tests/fixtures/formats', f));
    expect((await run(['doctor', ...ranks, '--json'])).code).not.toBe(2);
  });

  it('--ref-model without config.json is named as --ref-model', async () => {
    const empty = path.join(tmp, 'no-model');
    mkdirSync(empty, { recursive: true });
    await expectRefusal(['score', '--model', M, '--batch', path.join(M, 'batch.json'), '--ref-model', empty], new RegExp(`^grpo-studio score: --ref-model ${esc(empty)}: no config\\.json$`));
  });

  it('convert counts groups in whole numbers: samples not filling num_generations blocks are said so', async () => {
    const batch = JSON.parse(readFileSync(path.join(root, 'tests/fixtures/batches/clean.json'), 'utf8'));
    const B = batch.completion_ids.length;
    const G = B + 1; // no whole block
    const f = path.join(tmp, 'ng.json');
    writeFileSync(f, JSON.stringify({ ...batch, num_generations: G }));
    const r = await run(['convert', f, '--out', path.join(tmp, 'ng_out.json')]);
    expect(r.code).toBe(1); // the schema error says why
    expect(r.err[0]).toContain(`${B} samples, no whole groups of num_generations = ${G}`);
    expect(r.err[0]).not.toMatch(/\d\.\d+ group|e-\d+ group/);
  });

  it('plan says when the rows exceed a learned position table (step refuses them), exit 0', async () => {
    const gpt2 = path.join(root, 'tests/fixtures/configs/gpt2.json');
    const n = JSON.parse(readFileSync(gpt2, 'utf8')).n_positions as number;
    const over = await run(['plan', '--model', gpt2, '--batch', `4x${n + 1}`, '--limits', 'default']);
    expect(over.code).toBe(0);
    expect(over.out.join('\n')).toContain(`! batch rows of ${n + 1} tokens > the model's ${n} positions`);
    const json = await run(['plan', '--model', gpt2, '--batch', `4x${n + 1}`, '--limits', 'default', '--json']);
    expect(JSON.parse(json.out[0]).positions).toMatch(new RegExp(`${n} positions`));
    const fits = await run(['plan', '--model', gpt2, '--batch', `4x${n}`, '--limits', 'default']);
    expect(fits.out.join('\n')).not.toMatch(/positions/);
  });
});
