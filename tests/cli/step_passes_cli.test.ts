// `grpo-studio step` with μ > 1 (TRL num_iterations = 2 in the batch's config) on the tiny-qwen2 golden batch:
// the JSON holds every pass (`passes`), and each pass is printed as one line on stderr, not only the last.
// Expectations come from the golden files, not from the pipeline: pass 1's ratio is exp(logp − old) of
// expected.json's log-probs against the batch's old ones, pass 2's of the golden post-step log-probs (one
// AdamW step from the golden gradient), and pass 2's mean KL is TRL's k3 of those against the golden reference.
// μ = 1 prints no pass lines and holds one pass; β = 0 without a reference has no KL: null, not NaN; every
// completion masked has no ratio range (null, exit 0), not an empty min / max's ±Infinity.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN } from '../helpers/golden.ts';

const dir = join(GOLDEN, 'tiny-qwen2');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
const tmp = (name: string) => join(mkdtempSync(join(tmpdir(), 'step-passes-')), name);

interface Batch {
  completion_mask: number[][];
  old_per_token_logps: number[][];
  config: Record<string, unknown>;
}
interface Expected {
  per_token_logps: number[][];
  ref_per_token_logps: number[][];
  post_step_per_token_logps: number[][];
  loss: number;
  grad_norm: number;
}

/** Steps a copy of the golden batch with `config` merged in (against the golden reference unless `ref` is false); returns the result and the stderr lines. */
async function step(config: Record<string, unknown>, ref = true, edit: (b: Batch) => void = () => {}): Promise<{ got: StepCliResult; lines: string[] }> {
  const batch = read<Batch>(join(dir, 'batch.json'));
  Object.assign(batch.config, config);
  edit(batch);
  const path = tmp('batch.json');
  writeFileSync(path, JSON.stringify(batch));
  const out = tmp('result.json');
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  expect(await main(['step', '--model', dir, ...(ref ? ['--ref-model', join(dir, 'ref')] : []), '--batch', path, '--out', out])).toBe(0);
  const lines = err.mock.calls.map((c) => String(c[0]));
  return { got: read<StepCliResult>(out), lines };
}

afterEach(() => vi.restoreAllMocks());

/** [min, max] of exp(logp − old) over the masked tokens of ragged rows. */
function ratioRange(logp: number[][], old: number[][], mask: number[][]): [number, number] {
  const r = mask.flatMap((row, b) => row.flatMap((m, t) => (m ? [Math.exp(logp[b][t] - old[b][t])] : [])));
  return [Math.min(...r), Math.max(...r)];
}

describe('grpo-studio step prints every pass (μ = 2)', () => {
  const batch = read<Batch>(join(dir, 'batch.json'));
  const want = read<Expected>(join(dir, 'expected.json'));
  const mask = batch.completion_mask;
  const tokens = mask.flat().reduce((a, m) => a + m, 0);

  it('holds pass 1 and pass 2 in `passes`: ratio ranges, KL, clipped fraction from the golden log-probs', async () => {
    const { got, lines } = await step({ num_iterations: 2 });
    expect(got.passes.map((p) => p.pass)).toEqual([1, 2]);
    const [p1, p2] = got.passes;
    // Pass 1 is the loss stage and the first step: the result's own loss and grad norm (README: rtol 1e-4, atol 1e-6 vs golden).
    expect([p1.loss, p1.grad_norm]).toEqual([got.loss, got.grad_norm]);
    expectClose([p1.loss, p1.grad_norm], [want.loss, want.grad_norm], { rtol: 1e-4, atol: 1e-6, label: 'pass 1 loss, grad_norm' });
    // README: log-probs rtol 1e-4 (pass 1) and post-step rtol 1e-3, atol 0.002 (pass 2): the ratio inherits that error.
    expectClose([p1.ratio_min!, p1.ratio_max!], ratioRange(want.per_token_logps, batch.old_per_token_logps, mask), { rtol: 1e-3, atol: 1e-4, label: 'pass 1 ratio range' });
    expectClose([p2.ratio_min!, p2.ratio_max!], ratioRange(want.post_step_per_token_logps, batch.old_per_token_logps, mask), { rtol: 3e-3, atol: 3e-3, label: 'pass 2 ratio range' });
    // The step moved the policy: pass 2's ratio leaves pass 1's range.
    expect([p2.ratio_min, p2.ratio_max]).not.toEqual([p1.ratio_min, p1.ratio_max]);
    // TRL's k3 (β = 0.04, kl_estimator k3): exp(ref − logp) − (ref − logp) − 1, averaged over the masked tokens.
    const k3 = (logp: number[][]) => mask.flatMap((row, b) => row.flatMap((m, t) => (m ? [Math.exp(want.ref_per_token_logps[b][t] - logp[b][t]) - (want.ref_per_token_logps[b][t] - logp[b][t]) - 1] : []))).reduce((a, x) => a + x, 0) / tokens;
    expectClose([p1.mean_kl!], [k3(want.per_token_logps)], { rtol: 1e-3, atol: 1e-5, label: 'pass 1 mean KL' });
    expectClose([p2.mean_kl!], [k3(want.post_step_per_token_logps)], { rtol: 1e-2, atol: 3e-3, label: 'pass 2 mean KL' });
    for (const p of got.passes) expect(p.clipped_fraction).toBeCloseTo((p.clipped_low + p.clipped_high) / tokens, 12);
    // One line per pass on stderr, each naming its pass, loss, clipping, ratio range and KL.
    const passLines = lines.filter((l) => /^pass \d\/2:/.test(l));
    expect(passLines).toHaveLength(2);
    expect(passLines[0]).toMatch(/^pass 1\/2: loss \S+ · clipped [\d.]+% \(\d+ low, \d+ high\) · ratio \[\S+, \S+\] · mean KL \S+ · grad norm \S+$/);
    expect(passLines[1]).toMatch(/^pass 2\/2: /);
    // The printed numbers are the JSON's (4 significant digits).
    const [lo, hi] = passLines[1].match(/ratio \[(\S+), (\S+)\]/)!.slice(1).map(Number);
    expectClose([lo, hi], [p2.ratio_min!, p2.ratio_max!], { rtol: 1e-3, atol: 0, label: 'printed pass 2 ratio range' });
    expect(passLines[1]).toContain(`(${p2.clipped_low} low, ${p2.clipped_high} high)`);
  });

  it('μ = 1: one pass in `passes`, no pass lines', async () => {
    const { got, lines } = await step({});
    expect(got.passes.map((p) => p.pass)).toEqual([1]);
    expect(lines.filter((l) => l.startsWith('pass '))).toEqual([]);
  });

  it('β = 0 without a reference: no KL, so each pass says so (null in the JSON, not NaN)', async () => {
    const { got, lines } = await step({ num_iterations: 2, beta: 0 }, false);
    expect(got.passes.map((p) => p.mean_kl)).toEqual([null, null]);
    expect(lines.filter((l) => /^pass \d\/2:/.test(l)).every((l) => l.includes('· no KL (β = 0) ·'))).toBe(true);
  });
});

describe('every completion masked', () => {
  it('exits 0 with loss 0 and no ratio range (null), the pass line saying there is no token in the loss', async () => {
    const { got, lines } = await step({ num_iterations: 2 }, true, (b) => (b.completion_mask = b.completion_mask.map((r) => r.map(() => 0))));
    expect(got.loss).toBe(0);
    for (const p of got.passes) expect([p.ratio_min, p.ratio_max]).toEqual([null, null]);
    expect(lines.filter((l) => /^pass 1\/2:/.test(l))[0]).toContain('· no token in the loss ·');
  });
});
