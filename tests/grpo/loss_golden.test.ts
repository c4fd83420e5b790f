// The GRPO loss pipeline (src/grpo/loss.ts on the GPU) against every golden loss case
// (tests/golden/loss, PyTorch float64 mirroring TRL), with the tolerances of the golden README.
// The float64 refs in src/oracle/ are checked against the same files at near-float64 precision, since they
// are the oracle of every other kernel test.
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { testGpu } from '../helpers/gpu.ts';
import { expectClose, maxAbs, type CloseOptions } from '../helpers/close.ts';
import { parseSafeTensors, toF64, toI32, type SafeTensors } from '../../src/io/safetensors.ts';
import { readLossCase, uploadLossCase, type LossCase } from '../../src/cli/loss.ts';
import { AGGREGATIONS, grpo_loss, readGrpoLoss } from '../../src/grpo/loss.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';
import { kl_forward } from '../../src/oracle/kl.ts';
import { grpo_loss_backward, grpo_loss_forward } from '../../src/oracle/grpo_loss.ts';
import { loss_reduce_forward, loss_weights } from '../../src/oracle/loss_reduce.ts';
import { CLIP_HIGH, CLIP_LOW } from '../../src/kernels/types.ts';

const GOLDEN = path.resolve(__dirname, '..', 'golden', 'loss');
const CASES = readdirSync(GOLDEN).filter((f) => /^case_\d+\.safetensors$/.test(f)).sort();

/** Worst fraction of the tolerance per output over all cases (printed at the end for the report). */
const worst: Record<string, number> = {};
function check(label: string, actual: ArrayLike<number>, expected: ArrayLike<number>, o: CloseOptions): void {
  const out = label.split(' ')[1];
  worst[out] = Math.max(worst[out] ?? 0, expectClose(actual, expected, { ...o, label }).worst);
}
afterAll(() => {
  if (Object.keys(worst).length) console.log('worst fraction of the golden tolerance per output:\n' + Object.entries(worst).map(([k, v]) => `  ${k.padEnd(20)} ${v.toFixed(4)}`).join('\n'));
});

function load(file: string): { st: SafeTensors; c: LossCase } {
  const bytes = new Uint8Array(readFileSync(path.join(GOLDEN, file)));
  return { st: parseSafeTensors(bytes, file), c: readLossCase(bytes, file) };
}

/** zmax per row (README): max(1, largest |z| in the row), z = logits / temperature. */
function zmaxPerRow(c: LossCase): Float64Array {
  const z = new Float64Array(c.B * c.T).fill(1);
  for (let n = 0; n < c.B * c.T; n++) for (let v = 0; v < c.V; v++) z[n] = Math.max(z[n], Math.abs(c.logits[n * c.V + v] / c.config.temperature));
  return z;
}

describe('golden loss cases', () => {
  it('are all there', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(16);
  });

  for (const file of CASES) {
    it(`${file}: GPU matches the float64 golden within the README tolerances`, async () => {
      const gpu = await testGpu();
      const { st, c } = load(file);
      const inputs = uploadLossCase(gpu, c);
      // Default options: masked rows skipped, as the step pipeline runs it; per-token values compared where M = 1.
      const res = await grpo_loss(gpu, inputs, c.config);
      const r = await readGrpoLoss(gpu, res, { dlogits: true });
      const M = c.completion_mask;
      const zmax = zmaxPerRow(c);
      const tag = (out: string) => `${file} ${out}`;
      check(tag('per_token_logps'), r.per_token_logps, toF64(st, 'per_token_logps'), { rtol: 1e-5, atol: 1e-6, atolAt: (i) => 1e-6 * zmax[i], mask: M });
      check(tag('per_token_entropy'), r.per_token_entropy, toF64(st, 'per_token_entropy'), { rtol: 1e-5, atol: 1e-6, atolAt: (i) => 1e-6 * zmax[i], mask: M });
      check(tag('per_token_kl'), r.per_token_kl!, toF64(st, 'per_token_kl'), { rtol: 1e-4, atol: 1e-5, mask: M });
      check(tag('importance_ratio'), r.importance_ratio, toF64(st, 'importance_ratio'), { rtol: 1e-4, atol: 1e-5, mask: M });
      check(tag('per_token_loss'), r.per_token_loss, toF64(st, 'per_token_loss'), { rtol: 1e-4, atol: 1e-5, mask: M });
      // Clip flags must match exactly (README: every log-ratio is >= 1e-3 from a boundary).
      const onM = (a: ArrayLike<number>) => Array.from(a, (x, i) => (M[i] ? x : 0));
      expect(onM(r.is_low_clipped), `${file} is_low_clipped`).toEqual(onM(toI32(st, 'is_low_clipped')));
      expect(onM(r.is_high_clipped), `${file} is_high_clipped`).toEqual(onM(toI32(st, 'is_high_clipped')));
      const counts = JSON.parse(st.metadata.clip_counts);
      expect(r.clip_counts, `${file} clip_counts`).toEqual({ delta_binding: 0, ...counts });
      for (const a of AGGREGATIONS) check(tag(`loss.${a}`), [r.losses[a]], toF64(st, `loss.${a}`), { rtol: 1e-4, atol: 1e-6 });
      check(tag('loss'), [r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6 });
      const dlogits = toF64(st, 'dlogits');
      check(tag('dlogits'), r.dlogits!, dlogits, { rtol: 1e-4, atol: 1e-5 * maxAbs(dlogits) });
      // Masked rows' gradient is exactly zero.
      for (let n = 0; n < c.B * c.T; n++) if (!M[n]) for (let v = 0; v < c.V; v++) if (r.dlogits![n * c.V + v] !== 0) expect.fail(`${file}: dlogits[${n}, ${v}] = ${r.dlogits![n * c.V + v]} on a masked row`);
      res.destroy();
    });
  }
});

describe('float64 refs (the oracle of the kernel tests)', () => {
  for (const file of CASES) {
    it(`${file}: src/oracle reproduces the golden at float64 precision`, () => {
      const { st, c } = load(file);
      const { B, T, V, config: cfg } = c;
      const M = c.completion_mask;
      // Scored at every position (mask null), like TRL: the golden has values at M = 0 too.
      const g = logprob_gather_forward(c.logits, c.completion_ids, null, B * T, V, cfg.temperature);
      const kl = kl_forward(g.logp, c.ref_per_token_logps!, cfg.kl_estimator);
      const f = grpo_loss_forward(g.logp, c.old_per_token_logps!, kl, c.advantages, M, B, T, cfg);
      const red = loss_reduce_forward(f.loss, M, f.clip, B, T, cfg);
      const dlogp = grpo_loss_backward(g.logp, c.ref_per_token_logps!, c.advantages, M, f.ratio, loss_weights(M, B, T, cfg.loss_type, cfg), B, T, cfg);
      const dlogits = logprob_gather_backward(c.logits, c.completion_ids, M, g.lse, dlogp, B * T, V, cfg.temperature);
      // Same float32 inputs, float64 arithmetic in another summation order: agreement to ~1e-12 relative.
      const tight = { rtol: 1e-9, atol: 1e-12 };
      expectClose(g.logp, toF64(st, 'per_token_logps'), { ...tight, label: 'ref logp' });
      expectClose(g.entropy, toF64(st, 'per_token_entropy'), { ...tight, label: 'ref entropy' });
      expectClose(kl, toF64(st, 'per_token_kl'), { ...tight, label: 'ref kl' });
      expectClose(f.ratio, toF64(st, 'importance_ratio'), { ...tight, label: 'ref ratio' });
      expectClose(f.loss, toF64(st, 'per_token_loss'), { ...tight, label: 'ref loss' });
      expect(Array.from(f.clip, (x) => (x & CLIP_LOW ? 1 : 0))).toEqual(Array.from(toI32(st, 'is_low_clipped')));
      expect(Array.from(f.clip, (x) => (x & CLIP_HIGH ? 1 : 0))).toEqual(Array.from(toI32(st, 'is_high_clipped')));
      expect(red.clip_counts).toEqual({ delta_binding: 0, ...JSON.parse(st.metadata.clip_counts) });
      for (const a of AGGREGATIONS) expectClose([red.losses[a]], toF64(st, `loss.${a}`), { ...tight, label: `ref loss.${a}` });
      const gd = toF64(st, 'dlogits');
      expectClose(dlogits, gd, { rtol: 1e-9, atol: 1e-12 * maxAbs(gd), label: 'ref dlogits' });
    });
  }
});
