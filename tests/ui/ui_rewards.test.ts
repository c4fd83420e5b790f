// Reward functions (src/grpo/rewards.ts) and the JS reward sandbox (src/worker/reward_sandbox.ts), the
// sandbox driven through Node worker_threads: a hanging function times out on its own sample and the
// rest are still scored; throws, bad values and compile errors become per-sample errors. The same sandbox
// runs the tools of a multi-turn rollout: results as strings, failures as TRL's {'error': …} results.
import { buildSync } from 'esbuild';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { RewardDefinitionError, builtinReward, compileUserReward, scoreRewards, type RewardSample, type RewardSpec } from '../../src/grpo/rewards.ts';
import { runJsReward, runJsTools, type WorkerLike } from '../../src/worker/reward_sandbox.ts';

// The sandbox module bundled to plain JS once (a worker thread has no TypeScript loader).
const sandboxModule = (() => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-')), 'reward_sandbox.mjs');
  buildSync({ entryPoints: [path.resolve(import.meta.dirname, '../../src/worker/reward_sandbox.ts')], bundle: true, format: 'esm', platform: 'neutral', outfile: out, logLevel: 'error' });
  return pathToFileURL(out).href;
})();

/** The sandbox in a Node worker thread (tsx loads the TypeScript module), behind the WorkerLike shape. */
function nodeSandbox(): WorkerLike {
  const w = new Worker(
    `const { parentPort } = require('node:worker_threads');
     import(${JSON.stringify(sandboxModule)}).then((m) => parentPort.on('message', (req) => m.handleSandboxMessage(req, (r) => parentPort.postMessage(r))));`,
    { eval: true },
  );
  const port: WorkerLike = { onmessage: null, onerror: null, postMessage: (m) => w.postMessage(m), terminate: () => void w.terminate() };
  w.on('message', (data) => port.onmessage?.({ data }));
  w.on('error', (e) => port.onerror?.({ message: e.message }));
  return port;
}

const sample = (i: number, completion: string, answer = '82', n = 2): RewardSample => ({ index: i, group: 0, prompt: 'What is 37 + 45?', completion, answer, completion_ids: Array.from({ length: n }, (_, k) => k) });

describe('built-in rewards', () => {
  const base = { name: 'r', weight: 1, enabled: true };
  it('exact match ignores a trailing special token and, normalized, case / spaces / final period', () => {
    const strict = builtinReward({ ...base, kind: 'exact_match', normalize: false });
    const loose = builtinReward({ ...base, kind: 'exact_match', normalize: true });
    expect(strict(sample(0, '82<|im_end|>'))).toBe(1);
    expect(strict(sample(0, ' 82'))).toBe(0);
    expect(loose(sample(0, ' 82.  '))).toBe(1);
    expect(loose(sample(0, '83'))).toBe(0);
    expect(loose(sample(0, '82', ''))).toBeNull(); // no answer: does not apply
  });

  it('regex, contains and length', () => {
    expect(builtinReward({ ...base, kind: 'regex', pattern: '^\\d+$', flags: 'g' })(sample(0, '123'))).toBe(1);
    expect(() => builtinReward({ ...base, kind: 'regex', pattern: '(', flags: '' })).toThrow(RewardDefinitionError);
    const contains = builtinReward({ ...base, kind: 'contains', text: '', case_sensitive: false });
    expect(contains(sample(0, 'the sum is 82'))).toBe(1); // empty text: the answer
    expect(builtinReward({ ...base, kind: 'contains', text: 'SUM', case_sensitive: true })(sample(0, 'the sum'))).toBe(0);
    const len = builtinReward({ ...base, kind: 'length', target_tokens: 4 });
    expect([0, 2, 4, 6, 8, 12].map((n) => len(sample(0, '', '', n)))).toEqual([0, 0.5, 1, 0.5, 0, 0]);
  });

  it('compiles arrow functions and rejects what is not a function', () => {
    expect(compileUserReward('u', '(s) => s.completion.length;')(sample(0, 'abc'))).toBe(3);
    expect(compileUserReward('u', 'function reward(s) { return 2 }')(sample(0, ''))).toBe(2);
    expect(() => compileUserReward('u', '42')).toThrow(/function expression/);
    expect(() => compileUserReward('u', '(s) => {')).toThrow(/does not compile/);
  });
});

describe('scoreRewards', () => {
  it('weights each function and skips NaN terms (TRL nansum); failures become NaN with an error', async () => {
    const specs: RewardSpec[] = [
      { name: 'correct', weight: 1, enabled: true, kind: 'exact_match', normalize: true },
      { name: 'format', weight: 0.5, enabled: true, kind: 'regex', pattern: '^\\d+$', flags: '' },
      { name: 'off', weight: 9, enabled: false, kind: 'length', target_tokens: 2 },
      { name: 'js', weight: 2, enabled: true, kind: 'js', source: '', timeout_ms: 100 },
    ];
    const samples = [sample(0, '82'), sample(1, 'eighty'), sample(2, '7', '')];
    const fakeJs = async () => ({ values: [1, NaN, 0.25], errors: [{ sample: 1, message: 'boom' }] });
    const t = await scoreRewards(specs, samples, fakeJs);
    expect(t.names).toEqual(['correct', 'format', 'js']);
    expect(t.weights).toEqual([1, 0.5, 2]);
    expect(t.rewards_per_func[2][0]).toBeNaN(); // no answer
    // 1 + 0.5 + 2·1; 0 + 0 + NaN skipped; NaN skipped + 0.5 + 2·0.25
    expect(t.rewards).toEqual([3.5, 0, 1]);
    expect(t.errors).toEqual([{ reward: 'js', sample: 1, message: 'boom' }]);
  });
});

describe('JS reward sandbox', () => {
  const js = (source: string, timeout_ms = 400) => ({ name: 'user', weight: 1, enabled: true, kind: 'js' as const, source, timeout_ms });
  const samples = [0, 1, 2, 3].map((i) => sample(i, `c${i}`));

  it('times out a hanging sample, reports throws and bad values, scores the rest', async () => {
    const src = `(s) => {
      if (s.index === 1) while (true) {}
      if (s.index === 2) throw new Error('boom');
      if (s.index === 3) return 'x';
      return 0.5;
    }`;
    const col = await runJsReward(js(src), samples, nodeSandbox);
    expect(col.values[0]).toBe(0.5);
    expect(col.values.slice(1).every(Number.isNaN)).toBe(true);
    const bySample = Object.fromEntries(col.errors.map((e) => [e.sample, e.message]));
    expect(bySample[1]).toMatch(/timed out after 400 ms/);
    expect(bySample[2]).toBe('Error: boom');
    expect(bySample[3]).toMatch(/returned string/);
  });

  it('reports a compile error on every sample', async () => {
    const col = await runJsReward(js('(s) => {'), samples, nodeSandbox);
    expect(col.values.every(Number.isNaN)).toBe(true);
    expect(col.errors.map((e) => e.sample)).toEqual([0, 1, 2, 3]);
    expect(col.errors[0].message).toMatch(/does not compile/);
  });

  it('hides network globals from user code', async () => {
    const col = await runJsReward(js('(s) => (typeof fetch === "undefined" ? 1 : 0)'), samples.slice(0, 1), nodeSandbox);
    expect(col.values).toEqual([1]);
  });
});

describe('the JS reward template a new "js" reward starts with', () => {
  it('scores a correct completion that still ends in its EOS text as 1, a wrong one as 0', async () => {
    const { newReward } = await import('../../src/store/settings.ts');
    const spec = newReward('js');
    if (spec.kind !== 'js') throw new Error('expected a js reward');
    const fn = compileUserReward('template', spec.source);
    // The sampler's completion_texts keep the special token's text, as tokenizer.decode writes it.
    expect(fn(sample(0, '59<|im_end|>', '59'))).toBe(1);
    expect(fn(sample(1, ' 59 <|im_end|><|endoftext|>', '59'))).toBe(1);
    expect(fn(sample(2, '58<|im_end|>', '59'))).toBe(0);
    expect(fn(sample(3, '59', '59'))).toBe(1);
  });
});

describe('the tools sandbox (multi-turn rollouts)', () => {
  const calls = (...names: string[]) => names.map((name, i) => ({ sample: i, name, arguments: { a: 6, b: 7 } }));

  it('runs each call with its arguments; a result is str()ed, an async tool awaited', async () => {
    const src = '({ multiply: ({ a, b }) => a * b, pair: async ({ a, b }) => [a, b], echo: ({ a }) => `a=${a}` })';
    expect(await runJsTools(src, calls('multiply', 'pair', 'echo'), 1000, nodeSandbox)).toEqual(['42', '[6,7]', 'a=6']);
  });

  it('an unknown tool, a throw and a hang become error results; the calls after a hang still run', async () => {
    const src = '({ multiply: ({ a, b }) => a * b, boom: () => { throw new Error("no") }, spin: () => { for (;;) {} } })';
    const out = await runJsTools(src, calls('nope', 'boom', 'spin', 'multiply'), 300, nodeSandbox);
    expect(out[0]).toBe("{'error': 'Tool nope not found.'}");
    expect(out[1]).toBe("{'error': 'no'}");
    expect(out[2]).toMatch(/^\{'error': 'timed out after 300 ms/);
    expect(out[3]).toBe('42');
  });

  it('a source that is not an object of functions fails every call with one reason', async () => {
    const out = await runJsTools('(a) => a', calls('multiply', 'multiply'), 300, nodeSandbox);
    expect(out).toEqual(out.map(() => "{'error': 'the tools source must be an object of functions, e.g. ({ multiply: ({ a, b }) => a * b }); got function'}"));
  });
});
