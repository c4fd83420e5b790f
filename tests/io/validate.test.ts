// Issue 13, one validator: each malformed input of the issue is stopped before any number is computed —
// by `assertComputable` (the page's and the worker's path) and by the CLI verbs (exit 2, one line naming
// field, sample, position) — or reported by the Doctor (exit 1). Each case ran to a changed number, a
// stack trace or exit 0 before the validator existed.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { MAX_JSON_DEPTH, parseBatch, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { assertComputable, InputError, validateBatch, validateConfig, type ValidateOptions } from '../../src/io/validate.ts';
import { GOLDEN } from '../helpers/golden.ts';

const GPT2 = join(GOLDEN, 'tiny-gpt2');
const golden = (): GrpoBatch => parseBatch(readFileSync(join(GPT2, 'batch.json'), 'utf8'));
const clean = (): GrpoBatch => parseBatch(readFileSync(join(__dirname, '..', 'fixtures/batches/clean.json'), 'utf8'));
const tmpFile = (b: GrpoBatch | string) => {
  const p = join(mkdtempSync(join(tmpdir(), 'validate-')), 'batch.json');
  writeFileSync(p, typeof b === 'string' ? b : serializeBatch(b));
  return p;
};

/** The one-line reason a computation stops with, or undefined when it may go on. */
function stopReason(b: GrpoBatch, opts: ValidateOptions): string | undefined {
  try {
    assertComputable(b, opts, 'b.json');
    return undefined;
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as Error).message).not.toContain('\n');
    return (e as Error).message;
  }
}

/** Runs the CLI in process; returns the exit code and what it wrote to stderr. */
async function cli(argv: string[]): Promise<{ code: number; stderr: string }> {
  const lines: string[] = [];
  const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
  const log = vi.spyOn(console, 'log').mockImplementation(() => {});
  try {
    return { code: await main(argv), stderr: lines.join('\n') };
  } finally {
    spy.mockRestore();
    log.mockRestore();
  }
}

afterEach(() => vi.restoreAllMocks());

describe('element domains: stopped for a computation, an error finding for the Doctor', () => {
  const cases: [string, (b: GrpoBatch) => void, RegExp][] = [
    ['completion_mask 2', (b) => (b.completion_mask[1][0] = 2), /completion_mask\[1\]\[0\] = 2: masks hold 0 or 1/],
    ['completion_mask −1', (b) => (b.completion_mask[2][1] = -1), /completion_mask\[2\]\[1\] = -1/],
    ['completion_mask 0.5', (b) => (b.completion_mask[0][2] = 0.5), /completion_mask\[0\]\[2\] = 0.5/],
    ['a string reward', (b) => ((b.rewards as unknown[]) = [1, '0', 1, 0]), /rewards\[1\] = "0" is not a number/],
    ['scale_rewards "median"', (b) => (b.config = { scale_rewards: 'median' as never }), /config.scale_rewards = "median": expected one of group, batch, none$/],
    ['temperature "1.0"', (b) => (b.config = { temperature: '1.0' as never }), /config.temperature = "1.0": expected a finite number$/],
    ['pad_token_id < 0', (b) => (b.pad_token_id = -1), /pad_token_id = -1 is not a token id/],
    ['rewards-only, B not a multiple of G', (b) => ((b.num_generations = 3), (b.rewards = [1, 0, 1, 0])), /4 samples is not a multiple of num_generations = 3/],
  ];
  for (const [name, mutate, reason] of cases) {
    it(name, () => {
      const b = clean();
      b.rewards = [1, 0, 1, 0];
      mutate(b);
      expect(stopReason(b, { purpose: 'step' })).toMatch(reason);
      expect(stopReason(b, { purpose: 'score' })).toMatch(reason);
      const report = diagnose(b);
      expect(report.counts.error).toBeGreaterThan(0);
      expect(report.findings.some((f) => f.severity === 'error' && reason.test(f.message))).toBe(true);
    });
  }

  it('the clean batch and every golden batch pass', () => {
    expect(stopReason(clean(), { purpose: 'step', vocab_size: 20 })).toBeUndefined();
    expect(stopReason(golden(), { purpose: 'step', vocab_size: 97, max_positions: 64 })).toBeUndefined();
  });

  it('ids, pad and EOS must lie inside a known vocabulary', () => {
    const b = clean();
    expect(stopReason(b, { vocab_size: 16 })).toMatch(/completion_ids\[3\]\[0\] = 16 is not a token id in \[0, 16\)/);
    b.pad_token_id = 20;
    expect(stopReason(b, { vocab_size: 20 })).toMatch(/pad_token_id = 20 is not a token id in \[0, 20\)/);
    b.pad_token_id = 0;
    b.eos_token_ids = [1, 99];
    expect(stopReason(b, { vocab_size: 20 })).toMatch(/eos_token_ids\[1\] = 99/);
  });

  it('rows must fit the model positions (GPT-2 n_positions)', () => {
    const b = clean();
    expect(stopReason(b, { max_positions: 7 })).toBeUndefined(); // widest prompt 3 + widest completion 4
    expect(stopReason(b, { max_positions: 6 })).toMatch(/3 \+ completion width 4 = 7 tokens exceeds the model's 6 positions .*; sample 2 reaches position 6 at completion token 3/);
  });
});

describe('step inputs must be finite where the trainer would produce NaN', () => {
  it('NaN / null advantages', () => {
    const b = parseBatch(serializeBatch(golden()).replace(/"advantages": \[[^\]]*\]/, '"advantages": [0.5, null, 1, 1, 1, 1]'));
    expect(stopReason(b, { purpose: 'step' })).toMatch(/advantages\[1\] = NaN is not finite/);
    expect(stopReason(b, { purpose: 'score' })).toBeUndefined(); // score does not read advantages
  });

  it('a NaN old log-prob under mask 1 (and −Inf under mask 0)', () => {
    const b = golden();
    b.old_per_token_logps![2][0] = NaN;
    expect(stopReason(b, { purpose: 'step' })).toMatch(/old_per_token_logps\[2\]\[0\] = NaN \(completion_mask 1\) is not finite/);
    const c = golden();
    const t = c.completion_mask[0].indexOf(0);
    if (t >= 0) {
      c.old_per_token_logps![0][t] = -Infinity;
      expect(stopReason(c, { purpose: 'step' })).toMatch(/completion_mask 0/);
    }
  });

  it('NaN rewards when advantages are computed from them', () => {
    const b = clean();
    b.rewards = [1, NaN, 0, 1];
    expect(stopReason(b, { purpose: 'step' })).toMatch(/rewards\[1\] = NaN is not finite/);
    expect(stopReason(b, { purpose: 'inspect' })).toBeUndefined(); // the Doctor's nonfinite rule reports it
  });
});

describe('config values', () => {
  it('checks the fields the step and score read; unknown keys pass', () => {
    expect(validateConfig({ loss_type: 'dr_grpo', beta: 0, epsilon: 0.2, epsilon_high: null, delta: 2, kl_estimator: 'k1', vendor_key: 'x' })).toEqual([]);
    const bad = validateConfig({ loss_type: 'grpo2', beta: -1, epsilon: -0.5, delta: 0, kl_estimator: 'k4', max_completion_length: 2.5, position_ids: 'left' });
    expect(bad.map(([f]) => f)).toEqual(['config.loss_type', 'config.beta', 'config.epsilon', 'config.delta', 'config.kl_estimator', 'config.max_completion_length', 'config.position_ids']);
    // One rule per field, the trainer's: TRL bounds ε below by 0 only, and max_grad_norm 0 is "no clipping".
    expect(validateConfig({ epsilon: 1.5, max_grad_norm: 0 })).toEqual([]);
  });
});

describe('reading', () => {
  it('deep JSON is reported as nesting, not as invalid JSON', () => {
    const deep = `{"format": "grpo-batch/v1", "x": ${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
    expect(() => parseBatch(deep, 'deep.json')).toThrow(new RegExp(`deep.json: JSON nesting deeper than ${MAX_JSON_DEPTH} levels`));
    const ok = `{"format": "grpo-batch/v1", "x": ${'['.repeat(100)}${']'.repeat(100)}}`;
    expect(() => parseBatch(ok)).toThrow(/missing required field "num_generations"/);
  });

  it('200,000 rows: validator and Doctor run without a stack overflow', () => {
    const B = 200_000;
    const b: GrpoBatch = {
      format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
      prompt_ids: Array.from({ length: B }, () => [5, 6]),
      completion_ids: Array.from({ length: B }, (_, i) => (i === 7 ? [0, 0] : [9, 1])),
      completion_mask: Array.from({ length: B }, () => [1, 1]),
      rewards: Array.from({ length: B }, (_, i) => i % 3),
    };
    expect(validateBatch(b, { purpose: 'step' })).toEqual([]);
    const report = diagnose(b);
    expect(report.findings.length).toBeGreaterThan(0); // sample 7: mask 1 on pads
    expect(report.skipped.filter((s) => /could not run/.test(s.reason))).toEqual([]);
  });
});

describe('CLI verbs stop with exit 2 and one line', () => {
  it('score: config.temperature "1.0"; step: NaN advantage, mask 2', async () => {
    const b = golden();
    b.config = { ...b.config, temperature: '1.0' as never };
    let r = await cli(['score', '--model', GPT2, '--batch', tmpFile(b)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^grpo-studio score: .*batch.json: config.temperature = "1.0": expected a finite number$/);

    const a = golden();
    a.advantages![3] = NaN;
    r = await cli(['step', '--model', GPT2, '--batch', tmpFile(a)]);
    expect(r).toMatchObject({ code: 2 });
    expect(r.stderr).toMatch(/advantages\[3\] = NaN is not finite/);

    const m = golden();
    m.completion_mask[4][1] = 2;
    r = await cli(['step', '--model', GPT2, '--batch', tmpFile(m)]);
    expect(r).toMatchObject({ code: 2 });
    expect(r.stderr).toMatch(/completion_mask\[4\]\[1\] = 2/);
  });

  it('score: pad_token_id ≥ vocab and a GPT-2 batch longer than n_positions are named against the model', async () => {
    const b = golden();
    b.pad_token_id = 97;
    let r = await cli(['score', '--model', GPT2, '--batch', tmpFile(b)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/policy gpt2, vocab_size 97\): pad_token_id = 97 is not a token id in \[0, 97\)$/);

    const long = golden();
    long.completion_ids[1] = Array.from({ length: 70 }, (_, t) => 3 + (t % 50));
    long.completion_mask[1] = long.completion_ids[1].map(() => 1);
    long.old_per_token_logps![1] = long.completion_ids[1].map(() => -1);
    r = await cli(['score', '--model', GPT2, '--batch', tmpFile(long)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/exceeds the model's 64 positions .*; sample 1 reaches position 64 at completion token 59$/);
    expect(r.stderr.split('\n')).toHaveLength(1);
  });
});

describe('the Doctor with a model known', () => {
  it('reports ids and rows beyond the model (what the worker passes with modelLimits)', () => {
    const { findings } = diagnose(clean(), { vocab_size: 16, max_positions: 6 });
    const schema = findings.filter((x) => x.rule === 'schema');
    expect(schema.some((x) => /exceeds the model's 6 positions/.test(x.message))).toBe(true);
    // Ids past the vocabulary are the token-out-of-vocabulary rule's, not the schema's.
    expect(schema.some((x) => /\[0\] = 16/.test(x.message))).toBe(false);
    expect(findings.some((x) => x.rule === 'token-out-of-vocabulary' && /completion_ids\[3\]\[0\] = 16/.test(x.message))).toBe(true);
  });
});

describe('results', () => {
  it('NaN / ±Inf in a result are written as Python JSON words and make the exit code 1, never null with 0', async () => {
    const { writeResult } = await import('../../src/cli/args.ts');
    const out = join(mkdtempSync(join(tmpdir(), 'result-')), 'r.json');
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
    expect(await writeResult(out, { loss: 0.5, per_token_logps: [[-1, NaN], [-Infinity]], grad_norm: Infinity }, 'step')).toBe(1);
    expect(readFileSync(out, 'utf8')).toBe('{"loss":0.5,"per_token_logps":[[-1,NaN],[-Infinity]],"grad_norm":Infinity}\n');
    expect(lines).toEqual(['grpo-studio step: the result holds 3 non-finite value(s), first in per_token_logps (NaN); written as NaN / Infinity']);
    expect(await writeResult(out, { loss: 0.5, note: 'NaN' }, 'step')).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual({ loss: 0.5, note: 'NaN' });
    spy.mockRestore();
  });
});

describe('unused checkpoint tensors', () => {
  it('score names them on stderr (a warning) and still exits 0', async () => {
    const { cpSync } = await import('node:fs');
    const { parseSafeTensors, toF32, writeSafeTensors } = await import('../../src/io/safetensors.ts');
    const dir = join(mkdtempSync(join(tmpdir(), 'unused-')), 'm');
    cpSync(GPT2, dir, { recursive: true });
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(dir, 'model.safetensors'))));
    const tensors = Object.fromEntries([...st.tensors].map(([n, t]) => [n, { dtype: 'F32' as const, shape: t.shape, data: toF32(st, n).slice() }]));
    writeFileSync(join(dir, 'model.safetensors'), writeSafeTensors({ ...tensors, 'score.weight': { dtype: 'F32', shape: [2], data: new Float32Array(2) } }));
    const r = await cli(['score', '--model', dir, '--batch', join(GPT2, 'batch.json'), '--out', join(dir, 'r.json')]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^grpo-studio score: warning: .*: 1 checkpoint tensor\(s\) not used by config.json: "score.weight"$/);
  });
});
