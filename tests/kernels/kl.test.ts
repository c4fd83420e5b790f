// kl_forward (GPU) against its float64 twin: odd sizes, tiny and large log-ratios, every estimator.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { expectClose } from '../helpers/close.ts';
import { kl_forward as klRef } from '../../src/oracle/kl.ts';
import type { KlEstimator } from '../../src/kernels/types.ts';
import { kl_forward } from '../../src/kernels/kl.ts';

describe('kl_forward', () => {
  for (const estimator of ['k1', 'k2', 'k3'] as KlEstimator[]) {
    it(`${estimator} matches the float64 reference`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(7 + estimator.length);
      const n = 70_001; // > 65535/256 workgroups? no: exercises a non-multiple of WG
      const logp = Float32Array.from({ length: n }, (_, i) => (i % 97 === 0 ? -30 : -Math.abs(rng.normal()) * 5));
      // Log-ratios from 1e-7 to ~3: k3 must keep its O(d^2) precision for tiny d.
      const ref = Float32Array.from(logp, (x, i) => x + (i % 3 === 0 ? rng.normal() * 1e-4 : rng.normal() * 0.8));
      const out = gpu.createBuffer('kl', n * 4);
      const rec = gpu.recorder('kl test');
      kl_forward(rec, { logp: gpu.upload('logp', logp), refLogp: gpu.upload('ref', ref), kl: out, n, estimator });
      await rec.submit();
      const got = await gpu.readF32(out, n);
      // Inputs are exact f32 values; f32 arithmetic on d has relative error ~1e-7, exp adds a few ulps.
      expectClose(got, klRef(logp, ref, estimator), { rtol: 1e-4, atol: 1e-7, label: `kl ${estimator}` });
    });
  }

  it('rejects a buffer shorter than n, naming the kernel and the field', async () => {
    const gpu = await testGpu();
    const [big, small] = [gpu.createBuffer('big', 400), gpu.createBuffer('small', 16)];
    expect(() => kl_forward(gpu.recorder('x'), { logp: big, refLogp: small, kl: big, n: 100, estimator: 'k3' })).toThrow('kl_forward: refLogp holds 16 bytes, needs 400 (100 elements)');
  });
});
