// LayerNorm and RMSNorm (forward and backward) and the column-sum pass, GPU against the float64 twins
// in src/oracle/, on odd shapes (C = 33, 48, 97, 896; N = 1, 7, 301), with the adapter's threads per row, a
// GPU's and SwiftShader's (rowThreads: 8 on lavapipe, 4 on SwiftShader, 32–256 on GPUs), with extreme rows: large |x|,
// variance far below eps, a large mean over a small spread, and all-equal rows. The twins' backward
// passes are checked first against central finite differences of their forward passes.
//
// Tolerances. Float32 sums of k terms are off by at most ~k·u·Σ|terms| (u = 2^-24 ≈ 6e-8); our
// row reductions are C/WG strided terms + log2(WG) tree levels deep (226 at C = 896 with SwiftShader's 4 threads per
// row, 115 with lavapipe's 8), the weight gradients R + P (rows per partial, then partials: 531 at 70,001 rows), so we
// allow TOL = 1e-5 × the magnitude of the summed terms ("scale"), or 1.5× the worst-case bound where that is more
// (tolAt: 2.0e-5 at 4 threads; tolWeights: 4.7e-5 at 70,001 rows), far below the O(scale) error of any wrong formula. The one amplified error is the row
// mean's f32 rounding (u·|mean|), which the forward multiplies by rstd: the output scale includes
// rstd·|mean|.
import { describe, expect, it } from 'vitest';
import { asAdapterClass, testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { tally } from '../helpers/tally.ts';
import { maxAbs } from '../helpers/close.ts';
import { dot, fdGradient } from '../helpers/fd.ts';
import * as ref from '../../src/oracle/layernorm.ts';
import * as rmsRef from '../../src/oracle/rmsnorm.ts';
import { colsum_forward as colsumRef } from '../../src/oracle/colsum.ts';
import { gpuRowThreads, layernorm_backward, layernorm_forward, rowThreads } from '../../src/kernels/layernorm.ts';
import { rowsPerPartial } from '../../src/kernels/colsum.ts';
import { rmsnorm_backward, rmsnorm_forward } from '../../src/kernels/rmsnorm.ts';
import { colsum_forward } from '../../src/kernels/colsum.ts';
import type { Gpu } from '../../src/gpu/context.ts';

/** Each case runs with the adapter's threads per row (rowThreads), a GPU's and SwiftShader's. */
const THREADS = ['adapter', 'gpu', 'swiftshader'] as const;
const TOL = 1e-5;
/** The tolerance at `threads` per row: the worst-case bound of the deepest row sum (896 / threads strided terms and the tree's levels) with half again as margin, at least TOL. */
const tolAt = (threads: number) => Math.max(TOL, 1.5 * (896 / threads + Math.log2(threads)) * 2 ** -24);
/** The weight gradients' tolerance at N rows: R rows per partial summed in order, then P partials (and the accumulated value). */
const tolWeights = (N: number) => {
  const R = rowsPerPartial(N);
  return Math.max(TOL, 1.5 * (R + Math.ceil(N / R) + 1) * 2 ** -24);
};

/** Threads per row of setting `t` at width C (undefined: the adapter's own). */
const threadsOf = (gpu: Gpu, t: (typeof THREADS)[number], C: number) => (t === 'gpu' ? gpuRowThreads(C) : t === 'swiftshader' ? rowThreads(asAdapterClass(gpu, 'swiftshader'), C) : undefined);

const check = tally('ops_norm');
const SHAPES: Array<[number, number]> = [1, 7, 301].flatMap((N) => [33, 48, 97, 896].map((C) => [N, C] as [number, number]));
const EPS = 1e-5;

/** Rows cycling through normal, large |x|, variance << eps, large mean with small spread, all equal. */
function rows(rng: Rng, N: number, C: number, salt: number): Float32Array {
  const x = new Float32Array(N * C);
  for (let n = 0; n < N; n++) {
    const kind = (n + salt) % 5;
    const c = rng.normal();
    for (let i = 0; i < C; i++) {
      const z = rng.normal();
      x[n * C + i] = [z, 3e3 * z, 1e-4 * z, 3 + 1e-2 * z, c][kind];
    }
  }
  return x;
}

async function read(gpu: Gpu, buf: GPUBuffer, n: number) {
  return gpu.readF32(buf, n);
}

describe('float64 twins vs finite differences', () => {
  // h = 1e-5 on O(1) values: truncation error ~h^2 = 1e-10, rounding ~1e-16/h = 1e-11 (float64).
  const N = 4;
  const C = 7;
  const rng = new Rng(11);
  const x = Float64Array.from(rows(rng, N, C, 0)); // normal, large, variance << eps, offset rows
  const w = Float64Array.from(rng.f32(C, 0.3), (v) => 1 + v);
  const b = Float64Array.from(rng.f32(C, 0.1));
  const g = Float64Array.from(rng.f32(N * C));
  const step = (v: number) => 1e-5 * Math.max(1, Math.abs(v));

  it('layernorm_backward is the gradient of layernorm_forward', () => {
    const L = () => dot(ref.layernorm_forward(x, w, b, N, C, EPS).out, g);
    const f = ref.layernorm_forward(x, w, b, N, C, EPS);
    const bw = ref.layernorm_backward(g, x, w, f.mean, f.rstd, N, C);
    for (const [name, arr, grad] of [['dinp', x, bw.dinp], ['dweight', w, bw.dweight], ['dbias', b, bw.dbias]] as const) {
      const num = fdGradient(L, arr, step);
      check(grad, num, { rtol: 1e-6, atol: 1e-6 * maxAbs(num), label: `layernorm FD ${name}`, key: 'twin FD layernorm' });
    }
  });

  it('rmsnorm_backward is the gradient of rmsnorm_forward', () => {
    const L = () => dot(rmsRef.rmsnorm_forward(x, w, N, C, EPS).out, g);
    const f = rmsRef.rmsnorm_forward(x, w, N, C, EPS);
    const bw = rmsRef.rmsnorm_backward(g, x, w, f.rstd, N, C);
    for (const [name, arr, grad] of [['dinp', x, bw.dinp], ['dweight', w, bw.dweight]] as const) {
      const num = fdGradient(L, arr, step);
      check(grad, num, { rtol: 1e-6, atol: 1e-6 * maxAbs(num), label: `rmsnorm FD ${name}`, key: 'twin FD rmsnorm' });
    }
  });
});

describe('layernorm (GPU vs float64 twin)', () => {
  SHAPES.flatMap((shape, s) => THREADS.map((t) => [shape, s, t] as const)).forEach(([[N, C], s, t]) => {
    it(`N=${N} C=${C}, ${t} threads per row`, async () => {
      const gpu = await testGpu();
      const threads = threadsOf(gpu, t, C);
      const tol = tolAt(threads ?? rowThreads(gpu, C));
      const rng = new Rng(100 + s);
      const inp = rows(rng, N, C, s);
      const weight = Float32Array.from(rng.f32(C, 0.1), (v) => 1 + v);
      const bias = rng.f32(C, 0.05);
      const dout = rng.f32(N * C);
      const f = ref.layernorm_forward(inp, weight, bias, N, C, EPS);

      const out = gpu.createBuffer('out', N * C * 4);
      const mean = gpu.createBuffer('mean', N * 4);
      const rstd = gpu.createBuffer('rstd', N * 4);
      const [inpB, weightB] = [gpu.upload('inp', inp), gpu.upload('weight', weight)];
      let rec = gpu.recorder('layernorm_forward test');
      layernorm_forward(rec, { out, mean, rstd, inp: inpB, weight: weightB, bias: gpu.upload('bias', bias), N, C, eps: EPS, threads });
      await rec.submit();
      const [gOut, gMean, gRstd] = await Promise.all([read(gpu, out, N * C), read(gpu, mean, N), read(gpu, rstd, N)]);

      const wmax = maxAbs(weight);
      const bmax = maxAbs(bias);
      const outScale = Float64Array.from(f.rstd, (r, n) => wmax * (maxAbs(f.out, n * C, n * C + C) / Math.max(wmax, 1e-30) + r * Math.abs(f.mean[n])) + bmax);
      check(gOut, f.out, { rtol: tol, atol: 0, atolAt: (i) => tol * outScale[Math.floor(i / C)], label: `out N=${N} C=${C}`, key: 'layernorm_forward out' });
      check(gMean, f.mean, { rtol: tol, atol: 0, atolAt: (n) => tol * maxAbs(inp, n * C, n * C + C), label: 'mean', key: 'layernorm_forward mean' });
      // rstd = (var + eps)^-1/2: inverseSqrt is within 2 ulp; var carries the reduction error above.
      check(gRstd, f.rstd, { rtol: tol, atol: 0, label: 'rstd', key: 'layernorm_forward rstd' });

      // Backward: both sides get the same f32 mean/rstd, so only the backward's own arithmetic differs.
      const mean32 = Float32Array.from(f.mean);
      const rstd32 = Float32Array.from(f.rstd);
      const bw = ref.layernorm_backward(dout, inp, weight, mean32, rstd32, N, C);
      const accumulate = s % 2 === 1;
      const pre = accumulate ? rng.f32(N * C + 2 * C) : new Float32Array(N * C + 2 * C).fill(NaN); // NaN: must be overwritten
      const dinp = gpu.upload('dinp', pre.subarray(0, N * C));
      const dweight = gpu.upload('dweight', pre.subarray(N * C, N * C + C));
      const dbias = gpu.upload('dbias', pre.subarray(N * C + C));
      rec = gpu.recorder('layernorm_backward test');
      layernorm_backward(rec, {
        dinp, dweight, dbias, dout: gpu.upload('dout', dout), inp: inpB, weight: weightB,
        mean: gpu.upload('mean32', mean32), rstd: gpu.upload('rstd32', rstd32), N, C, accumulate, accumulateDinp: accumulate, threads,
      });
      await rec.submit();
      const plus = (a: Float64Array, off: number) => (accumulate ? a.map((v, i) => v + pre[off + i]) : a);

      // Scales: per row rstd·(max|dnorm| + max|norm|·mean|dnorm·norm|); per column Σ_n |dout·norm| and Σ_n |dout|.
      const rowScale = new Float64Array(N);
      const colW = new Float64Array(C);
      const colB = new Float64Array(C);
      for (let n = 0; n < N; n++) {
        let dn = 0, nn = 0, dnn = 0;
        for (let i = 0; i < C; i++) {
          const norm = (inp[n * C + i] - mean32[n]) * rstd32[n];
          const d = weight[i] * dout[n * C + i];
          dn = Math.max(dn, Math.abs(d));
          nn = Math.max(nn, Math.abs(norm));
          dnn += Math.abs(d * norm) / C;
          colW[i] += Math.abs(dout[n * C + i] * norm);
          colB[i] += Math.abs(dout[n * C + i]);
        }
        rowScale[n] = rstd32[n] * (dn + nn * dnn) + (accumulate ? maxAbs(pre, n * C, n * C + C) : 0);
      }
      check(await read(gpu, dinp, N * C), plus(bw.dinp, 0), { rtol: tol, atol: 0, atolAt: (i) => tol * rowScale[Math.floor(i / C)], label: `dinp N=${N} C=${C}`, key: 'layernorm_backward dinp' });
      const preW = accumulate ? maxAbs(pre, N * C, N * C + 2 * C) : 0;
      check(await read(gpu, dweight, C), plus(bw.dweight, N * C), { rtol: tol, atol: 0, atolAt: (j) => tolWeights(N) * (colW[j] + preW), label: 'dweight', key: 'layernorm_backward dweight' });
      check(await read(gpu, dbias, C), plus(bw.dbias, N * C + C), { rtol: tol, atol: 0, atolAt: (j) => tolWeights(N) * (colB[j] + preW), label: 'dbias', key: 'layernorm_backward dbias' });
    });
  });

  it('rejects undersized buffers, naming the kernel and the field', async () => {
    const gpu = await testGpu();
    const [N, C] = [3, 33];
    const buf = (elems: number) => gpu.createBuffer('b', elems * 4);
    const fwd = { out: buf(N * C), mean: buf(N), rstd: buf(N), inp: buf(N * C), weight: buf(C), bias: buf(C), N, C, eps: EPS };
    expect(() => layernorm_forward(gpu.recorder('x'), { ...fwd, bias: buf(C - 1) })).toThrow('layernorm_forward: bias holds 128 bytes, needs 132 (33 elements)');
    const back = { dinp: buf(N * C), dweight: buf(C), dout: buf(N * C), inp: buf(N * C), weight: buf(C), rstd: buf(N), N, C, accumulate: false };
    expect(() => rmsnorm_backward(gpu.recorder('x'), { ...back, dout: buf(N * C - 1) })).toThrow('rmsnorm_backward: dout holds 392 bytes, needs 396 (99 elements)');
  });

  it('all-equal rows normalise to the bias', async () => {
    // var = 0, rstd = 1/sqrt(eps) = 316: x - mean is 0 up to the mean's own error. Even from an exact
    // sum, mean = sum / C is only within 2.5 ulp (WGSL's f32 division; NVIDIA's is approximate), so
    // |out - bias| <= |w|·rstd·3 ulp(x); noise from an uncorrected tree-summed mean would be log2(C)x larger.
    const gpu = await testGpu();
    const N = 3;
    const C = 97;
    const vals = [0.7, -1234.5, 1e-3];
    const inp = Float32Array.from({ length: N * C }, (_, i) => vals[Math.floor(i / C)]);
    const bias = new Rng(5).f32(C);
    const out = gpu.createBuffer('out', N * C * 4);
    const rec = gpu.recorder('equal rows');
    layernorm_forward(rec, {
      out, mean: gpu.createBuffer('mean', N * 4), rstd: gpu.createBuffer('rstd', N * 4), inp: gpu.upload('inp', inp),
      weight: gpu.upload('w', new Float32Array(C).fill(1.5)), bias: gpu.upload('b', bias), N, C, eps: EPS,
    });
    await rec.submit();
    const ulp = (x: number) => 2 ** (Math.floor(Math.log2(Math.abs(x))) - 23);
    check(await read(gpu, out, N * C), Float64Array.from({ length: N * C }, (_, i) => bias[i % C]), {
      rtol: 0, atol: 0, atolAt: (i) => 1.5 * (1 / Math.sqrt(EPS)) * 3 * ulp(vals[Math.floor(i / C)]), label: 'all-equal rows', key: 'layernorm_forward all-equal rows',
    });
  });
});

describe('rmsnorm (GPU vs float64 twin)', () => {
  const cases: Array<[number, number]> = [...SHAPES, [70_001, 8]]; // 70001 rows: the 2-D workgroup grid (Qwen3 q_norm-like C)
  cases.flatMap((shape, s) => THREADS.map((t) => [shape, s, t] as const)).forEach(([[N, C], s, t]) => {
    it(`N=${N} C=${C}, ${t} threads per row`, async () => {
      const gpu = await testGpu();
      const threads = threadsOf(gpu, t, C);
      const tol = tolAt(threads ?? rowThreads(gpu, C));
      const rng = new Rng(200 + s);
      const inp = rows(rng, N, C, s);
      const weight = Float32Array.from(rng.f32(C, 0.1), (v) => 1 + v);
      const dout = rng.f32(N * C);
      const f = rmsRef.rmsnorm_forward(inp, weight, N, C, EPS);

      const out = gpu.createBuffer('out', N * C * 4);
      const rstd = gpu.createBuffer('rstd', N * 4);
      const [inpB, weightB] = [gpu.upload('inp', inp), gpu.upload('weight', weight)];
      let rec = gpu.recorder('rmsnorm_forward test');
      rmsnorm_forward(rec, { out, rstd, inp: inpB, weight: weightB, N, C, eps: EPS, threads });
      await rec.submit();
      // No cancellation anywhere (a sum of squares, then products): plain relative error, a few ulp
      // plus the row reduction's bound on mean(x^2) (tolAt; halved by the square root).
      check(await read(gpu, out, N * C), f.out, { rtol: tol, atol: 1e-30, label: `out N=${N} C=${C}`, key: 'rmsnorm_forward out' });
      check(await read(gpu, rstd, N), f.rstd, { rtol: tol, atol: 0, label: 'rstd', key: 'rmsnorm_forward rstd' });

      const rstd32 = Float32Array.from(f.rstd);
      const bw = rmsRef.rmsnorm_backward(dout, inp, weight, rstd32, N, C);
      const accumulate = s % 2 === 0;
      const pre = accumulate ? rng.f32(N * C + C) : new Float32Array(N * C + C).fill(NaN);
      const dinp = gpu.upload('dinp', pre.subarray(0, N * C));
      const dweight = gpu.upload('dweight', pre.subarray(N * C));
      rec = gpu.recorder('rmsnorm_backward test');
      rmsnorm_backward(rec, {
        dinp, dweight, dout: gpu.upload('dout', dout), inp: inpB, weight: weightB, rstd: gpu.upload('rstd32', rstd32),
        N, C, accumulate, accumulateDinp: accumulate, threads,
      });
      await rec.submit();
      const plus = (a: Float64Array, off: number) => (accumulate ? a.map((v, i) => v + pre[off + i]) : a);
      // Scales: per row rstd·(max|dnorm| + max|x·rstd|·mean|dnorm·x·rstd|); per column Σ_n |dout·x·rstd|.
      const rowScale = new Float64Array(N);
      const colW = new Float64Array(C);
      for (let n = 0; n < N; n++) {
        let dn = 0, nn = 0, dnn = 0;
        for (let i = 0; i < C; i++) {
          const norm = inp[n * C + i] * rstd32[n];
          const d = weight[i] * dout[n * C + i];
          dn = Math.max(dn, Math.abs(d));
          nn = Math.max(nn, Math.abs(norm));
          dnn += Math.abs(d * norm) / C;
          colW[i] += Math.abs(dout[n * C + i] * norm);
        }
        rowScale[n] = rstd32[n] * (dn + nn * dnn) + (accumulate ? maxAbs(pre, n * C, n * C + C) : 0);
      }
      check(await read(gpu, dinp, N * C), plus(bw.dinp, 0), { rtol: tol, atol: 0, atolAt: (i) => tol * rowScale[Math.floor(i / C)], label: `dinp N=${N} C=${C}`, key: 'rmsnorm_backward dinp' });
      const preW = accumulate ? maxAbs(pre, N * C) : 0;
      check(await read(gpu, dweight, C), plus(bw.dweight, N * C), { rtol: tol, atol: 0, atolAt: (j) => tolWeights(N) * (colW[j] + preW), label: 'dweight', key: 'rmsnorm_backward dweight' });
    });
  });
});

describe('colsum_forward', () => {
  for (const accumulate of [false, true]) {
    it(`P=37 C=301 accumulate=${accumulate}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(accumulate ? 1 : 2);
      const [P, C] = [37, 301];
      const inp = rng.f32(P * C, 10);
      const pre = rng.f32(C);
      const out = gpu.upload('out', accumulate ? pre : new Float32Array(C).fill(NaN));
      const rec = gpu.recorder('colsum test');
      colsum_forward(rec, { out, inp: gpu.upload('inp', inp), P, C, accumulate });
      await rec.submit();
      const want = colsumRef(inp, P, C).map((v, j) => v + (accumulate ? pre[j] : 0));
      // A sequential sum of 37 (+1) terms: error ≤ 38·u·Σ|terms| ≈ 2.3e-6·Σ|terms|; TOL·Σ|terms| allowed.
      const abs = colsumRef(inp.map(Math.abs), P, C);
      check(await read(gpu, out, C), want, { rtol: 0, atol: 0, atolAt: (j) => TOL * (abs[j] + Math.abs(pre[j])), label: 'colsum', key: 'colsum_forward' });
    });
  }
});
