// Issue 13, fuzzing (fast-check) of the batch reader, the validator and the CLI. Properties: a valid batch
// validates clean; one element pushed outside its domain is always an error — from the validator, the
// Doctor and `assertComputable` alike — and survives serialisation (what the CLI reads); no input makes
// the reader or the Doctor throw anything but BatchFormatError. Spawned `grpo-studio doctor` (a few dozen
// runs, two at a time: the machine is small) never exits outside {0, 1, 2}, never prints a stack trace,
// never exits 0 on an out-of-domain element, and gives the verdict the page's code path gives. Also:
// output piped to a slow reader arrives whole, a reader closing early is no error, and an internal error
// is exit 3 with one line.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { completionMaskFromEos } from '../../src/grpo/batch.ts';
import { parseBatch, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { assertComputable, validateBatch } from '../../src/io/validate.ts';

vi.mock('../../src/cli/loss.ts', () => ({ run: async () => (null as unknown as { x: number }).x })); // a bug: TypeError

const ROOT = resolve(__dirname, '..', '..');
const BIN = join(ROOT, 'bin/grpo-studio.mjs');
const EOS = 2;
const V = 64;

const ids = (min: number, max: number) => fc.array(fc.integer({ min: 3, max: V - 1 }), { minLength: min, maxLength: max });

/** A valid batch: TRL masks (1 through the first EOS), rewards and finite log-probs. */
const validBatch: fc.Arbitrary<GrpoBatch> = fc
  .record({ G: fc.integer({ min: 1, max: 3 }), groups: fc.integer({ min: 1, max: 3 }) })
  .chain(({ G, groups }) =>
    fc.record({
      G: fc.constant(G),
      prompts: fc.array(ids(1, 5), { minLength: groups, maxLength: groups }),
      completions: fc.array(fc.tuple(ids(0, 5), fc.boolean()), { minLength: G * groups, maxLength: G * groups }),
      rewards: fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: G * groups, maxLength: G * groups }),
    }),
  )
  .map(({ G, prompts, completions, rewards }) => {
    const completion_ids = completions.map(([c, eos]) => (eos || c.length === 0 ? [...c, EOS] : c));
    return {
      format: 'grpo-batch/v1',
      num_generations: G,
      pad_token_id: 0,
      eos_token_ids: [EOS],
      prompt_ids: completion_ids.map((_, i) => prompts[Math.floor(i / G)]),
      completion_ids,
      completion_mask: completion_ids.map((r) => completionMaskFromEos(r, [EOS])),
      rewards,
      old_per_token_logps: completion_ids.map((r) => r.map((_, t) => -0.1 * (t + 1))),
      config: { scale_rewards: 'group', temperature: 1 },
    } satisfies GrpoBatch;
  });

/** Values outside each field's domain (mask ∉ {0,1}, id not a token id, reward not a number, config out of range). */
const BAD = {
  mask: [2, -1, 0.5, '1', true, NaN],
  id: [-1, 1.5, '7', V + 5, NaN, null],
  reward: ['x', true, [1]],
  logp: ['0.1', NaN, Infinity],
  config: [['scale_rewards', 'median'], ['temperature', '1.0'], ['temperature', 0], ['beta', -1], ['loss_type', 'grpo2'], ['kl_estimator', 'k9']],
} as const;

/** Which field was broken, and whether only a known vocabulary shows it (an integer id ≥ V). */
type Mutation = { field: string; needsVocab: boolean };

/** One element of a valid batch pushed outside its domain. */
const mutated: fc.Arbitrary<[GrpoBatch, Mutation]> = validBatch.chain((b) =>
  fc
    .record({ kind: fc.constantFrom('completion_mask', 'completion_ids', 'prompt_ids', 'rewards', 'old_per_token_logps', 'config', 'pad_token_id'), i: fc.nat(), t: fc.nat(), k: fc.nat() })
    .filter(({ kind, i }) => !['completion_mask', 'completion_ids', 'old_per_token_logps'].includes(kind) || b.completion_ids[i % b.completion_ids.length].length > 0)
    .map(({ kind, i, t, k }) => {
      const x = structuredClone(b);
      const row = i % x.completion_ids.length;
      const pick = <T>(xs: readonly T[]) => xs[k % xs.length];
      let value: unknown;
      if (kind === 'rewards') (x.rewards as unknown[])[row] = value = pick(BAD.reward);
      else if (kind === 'config') x.config = { ...x.config, [pick(BAD.config)[0]]: pick(BAD.config)[1] };
      else if (kind === 'pad_token_id') x.pad_token_id = (value = pick([-1, V, V + 100])) as number;
      else {
        const r = (x[kind] as unknown[][])[row];
        r[t % r.length] = value = kind === 'completion_mask' ? pick(BAD.mask) : kind === 'old_per_token_logps' ? pick(BAD.logp) : pick(BAD.id);
      }
      const needsVocab = kind !== 'completion_mask' && typeof value === 'number' && Number.isInteger(value) && value >= V;
      return [x, { field: kind, needsVocab }] as [GrpoBatch, Mutation];
    }),
);

/** The page's path: read the text as the worker does, run the Doctor; 2 when the file cannot be read. */
function pageVerdict(text: string): number {
  try {
    return diagnose(parseBatch(text, 'page')).counts.error > 0 ? 1 : 0;
  } catch (e) {
    expect((e as Error).name).toBe('BatchFormatError');
    return 2;
  }
}

describe('validator properties (fast-check)', () => {
  it('a valid batch validates clean for every purpose', () => {
    fc.assert(fc.property(validBatch, (b) => {
      expect(validateBatch(b, { purpose: 'step', vocab_size: V })).toEqual([]);
    }), { numRuns: 200 });
  });

  it('an out-of-domain element is an error for the validator, the Doctor and a computation, before and after serialisation', () => {
    fc.assert(
      fc.property(mutated, ([b, m]) => {
        for (const x of [b, parseBatch(serializeBatch(b))]) {
          const errors = validateBatch(x, { purpose: 'step', vocab_size: V }).filter((f) => f.severity === 'error');
          expect(errors.length, m.field).toBeGreaterThan(0);
          expect(() => assertComputable(x, { purpose: 'step', vocab_size: V })).toThrow(/./);
          // Without the model's vocabulary the Doctor cannot know V + 5 is out of range; everything else it sees.
          if (!m.needsVocab) expect(diagnose(x).counts.error, m.field).toBeGreaterThan(0);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('any JSON text: the reader throws BatchFormatError or returns a batch the Doctor can inspect without throwing', () => {
    const text = fc.oneof(
      fc.json({ maxDepth: 4 }),
      validBatch.map(serializeBatch).chain((s) => fc.tuple(fc.nat(s.length), fc.string({ maxLength: 4 })).map(([i, ins]) => s.slice(0, i) + ins + s.slice(i + ins.length))),
    );
    fc.assert(fc.property(text, (t) => void pageVerdict(t)), { numRuns: 300 });
  });
});

/** Spawns the real binary; resolves exit code, stdout and stderr. `slowReader` leaves stdout unread for a second. */
function spawnCli(args: string[], reader: 'fast' | 'slow' | 'closes' = 'fast'): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    if (reader === 'slow') {
      child.stdout.pause();
      setTimeout(() => child.stdout.resume(), 1000);
    }
    if (reader === 'closes') child.stdout.once('data', () => child.stdout.destroy()); // `| head -c 10`
    child.on('error', fail);
    child.on('close', (code) => done({ code: code ?? -1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

async function pool<T, R>(items: T[], width: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]);
    }
  }));
  return out;
}

const STACK = /\n\s+at .+:\d+:\d+/;

describe('grpo-studio doctor, spawned', () => {
  it('exit codes stay in {0, 1, 2}, no stack traces, never 0 on a bad element, the page\'s verdict', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fuzz-cli-'));
    const texts: { text: string; bad: boolean }[] = [
      ...fc.sample(validBatch, { numRuns: 6, seed: 13 }).map((b) => ({ text: serializeBatch(b), bad: false })),
      ...fc.sample(mutated, { numRuns: 16, seed: 13 }).map(([b, m]) => ({ text: serializeBatch(b), bad: !m.needsVocab })),
      { text: '{"format": "grpo-batch/v1", "x": ' + '['.repeat(5000) + ']'.repeat(5000) + '}', bad: true },
      { text: serializeBatch(fc.sample(validBatch, { numRuns: 1, seed: 1 })[0]).slice(0, 40), bad: true },
      { text: 'null', bad: true },
    ];
    const results = await pool(texts, 2, async ({ text }) => {
      const file = join(dir, `b${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(file, text);
      return spawnCli(['doctor', file]);
    });
    results.forEach((r, i) => {
      const what = `case ${i}: ${r.stderr.slice(0, 200)}`;
      expect([0, 1, 2], what).toContain(r.code);
      expect(r.stderr, what).not.toMatch(STACK);
      if (texts[i].bad) expect(r.code, what).not.toBe(0);
      expect(r.code, what).toBe(pageVerdict(texts[i].text));
      if (r.code === 2) expect(r.stderr.trim().split('\n'), what).toHaveLength(1);
    });
  }, 120_000);

  it('a result larger than a pipe buffer reaches a slow reader whole', async () => {
    const B = 1500;
    const b: GrpoBatch = {
      format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [EOS],
      prompt_ids: Array.from({ length: B }, () => [5, 6]),
      completion_ids: Array.from({ length: B }, () => [7, EOS, 0]),
      completion_mask: Array.from({ length: B }, () => [1, 1, 1]), // mask on the pad: one finding per row
    };
    const file = join(mkdtempSync(join(tmpdir(), 'pipe-')), 'b.json');
    writeFileSync(file, serializeBatch(b));
    const r = await spawnCli(['doctor', file, '--json'], 'slow');
    expect(r.code).toBe(1);
    expect(r.stdout.length).toBeGreaterThan(4 * 65_536);
    expect(JSON.parse(r.stdout).findings.filter((f: { rule: string }) => f.rule === 'mask-covers-padding')).toHaveLength(B);
    // A reader that closes early is no error of ours: no EPIPE stack trace.
    const closed = await spawnCli(['doctor', file, '--json'], 'closes');
    expect(closed.stderr).toBe('');
    expect(closed.code).toBe(1);
  }, 60_000);
});

describe('internal errors', () => {
  it('are exit 3 with one line; the stack only with --debug', async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
    expect(await main(['loss', 'case.safetensors'])).toBe(3);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^grpo-studio loss: internal error: TypeError: .* \(rerun with --debug for the stack trace\)$/);
    lines.length = 0;
    expect(await main(['loss', 'case.safetensors', '--debug'])).toBe(3);
    expect(lines.join('\n')).toMatch(STACK);
    spy.mockRestore();
  });
});
