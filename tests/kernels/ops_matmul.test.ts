// matmul_forward / matmul_backward (GPU) against their float64 twins, with every GEMM kernel the adapter
// runs (gemmKernels: subgroup, tiled and direct on lavapipe): odd shapes that are not multiples of the
// 64×64×16 tiles (narrower for few rows or columns) nor of the subgroup kernel's row blocks and 16 columns,
// K below a tile, single rows and columns, both weight layouts, bias, accumulation, the few-row (decode)
// kernel for 'out_in' weights, binding-window splits (forced by a lowered binding limit, and once for
// real past lavapipe's 128 MiB); which kernel each adapter class gets; the tiled kernel's split K (its slice
// counts) and register prefetch (bitwise the kernel without it); the epilogue's scale and residual (bitwise the
// product followed by their own rounding); and the twin's backward against central finite differences of the
// twin's forward.
//
// Tolerance: the inputs are exact f32 values and the twin is exact in float64, so the only error is the
// GPU's f32 accumulation. Each of the K fused multiply-adds rounds by at most u = 2⁻²⁴ of the running
// sum, itself bounded by S = Σ_k |x_k·w_k| (+ |b| + |previous value|); the roundings have random signs
// and grow like √K, so an element passes within 4·u·√K·S (headroom ×4; the rigorous worst case is K·u·S).
import { describe, expect, it } from 'vitest';
import { spyDispatches, testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { expectClose } from '../helpers/close.ts';
import { dot, fdGradient } from '../helpers/fd.ts';
import { matmul_backward as mmBackRef, matmul_forward as mmRef, type WeightLayout } from '../../src/oracle/matmul.ts';
import { GEMM_KERNELS, gemmKernels, matmul_backward, matmul_forward, type MatmulKernel } from '../../src/kernels/matmul.ts';
import { adapterClass, type Gpu } from '../../src/gpu/context.ts';
import { bf16ToF32, f32ToBf16 } from '../../src/io/safetensors.ts';
import { sharedScratch } from '../../src/kernels/scratch.ts';
import { asAdapterClass } from '../helpers/gpu.ts';

const U = 2 ** -24;
const abs = (a: ArrayLike<number>) => Float64Array.from(a, Math.abs);

/** Per-element tolerance from S (same shape as the result) and the length of the sums. */
function tolFrom(S: Float64Array, K: number) {
  return (i: number) => 4 * U * Math.sqrt(K) * S[i] + 1e-30;
}

async function forwardCase(gpu: Gpu, rng: Rng, M: number, K: number, N: number, layout: WeightLayout, withBias: boolean, bindingLimit?: number, kernel?: MatmulKernel) {
  const inp = rng.f32(M * K);
  const weight = rng.f32(N * K, 0.5);
  const bias = withBias ? rng.f32(N) : null;
  // Extreme but finite rows: a row of large values and a row of zeros.
  for (let k = 0; k < K; k++) {
    inp[k] *= 1e3;
    if (M > 2) inp[K + k] = 0;
  }
  const out = gpu.createBuffer('out', M * N * 4);
  const rec = gpu.recorder('matmul test');
  matmul_forward(rec, {
    out,
    inp: gpu.upload('inp', inp),
    weight: gpu.upload('weight', weight),
    bias: bias ? gpu.upload('bias', bias) : undefined,
    M,
    K,
    N,
    weightLayout: layout,
    bindingLimit,
    kernel,
  });
  const kernels = [...rec.kernels];
  await rec.submit();
  const got = await gpu.readF32(out, M * N);
  const want = mmRef(inp, weight, bias, M, K, N, layout);
  const S = mmRef(abs(inp), abs(weight), bias ? abs(bias) : null, M, K, N, layout);
  const r = expectClose(got, want, { atol: 0, rtol: 0, atolAt: tolFrom(S, K), label: `forward ${M}x${K}x${N} ${layout} ${kernel ?? 'default'}` });
  return { worst: r.worst, kernels };
}

describe('matmul_forward', () => {
  // M picks the row tile (8, 16, 32 or 64 rows): every size is covered.
  const shapes: Array<[number, number, number]> = [[37, 53, 29], [130, 97, 201], [1, 67, 5], [65, 16, 64], [3, 200, 1], [13, 29, 70], [30, 45, 131]];
  for (const layout of ['out_in', 'in_out'] as WeightLayout[]) {
    it(`${layout}: odd shapes, with and without bias, every GEMM kernel`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(layout === 'out_in' ? 11 : 12);
      // The test adapter (lavapipe) fixes its subgroup size, so every kernel is checked here, the subgroup one too.
      expect([...gemmKernels(gpu)].sort()).toEqual(['direct', 'subgroup', 'tiled']);
      for (const kernel of gemmKernels(gpu)) {
        let worst = 0;
        for (const [M, K, N] of shapes) {
          for (const withBias of [true, false]) worst = Math.max(worst, (await forwardCase(gpu, rng, M, K, N, layout, withBias, undefined, kernel)).worst);
        }
        console.log(`matmul_forward ${layout} ${kernel}: worst ${worst.toFixed(3)} of tolerance`);
      }
    });
  }

  it('every GEMM kernel: M, N, K around its blocks (K = 1 and below a tile, one row, one column, 2 row blocks)', async () => {
    const gpu = await testGpu();
    const rng = new Rng(17);
    // Subgroup kernel: 1, 2 or 4 rows per invocation (M = 1, 2 / 9 / 33+), row blocks of up to 256 rows (257, 300: two
    // blocks of a 160-row workgroup), 16 columns; tiled: 8 / 16 / 32 / 64 rows × 16 / 32 / 64 columns × 16 (N = 1, 15, 16,
    // 17, 31 take the narrow ones); direct: up to 16 × 64 per workgroup (4 or fewer rows of invocations), 1 / 2 / 4 rows per invocation (M = 1, 2 / 3, 4+).
    const edges: Array<[number, number, number, WeightLayout]> = [
      [1, 1, 1, 'in_out'], [1, 17, 33, 'out_in'], [2, 5, 16, 'in_out'], [257, 3, 15, 'out_in'], [255, 16, 17, 'in_out'],
      [300, 1, 65, 'out_in'], [9, 577, 1, 'in_out'], [33, 15, 31, 'out_in'], [129, 17, 130, 'out_in'], [65, 33, 127, 'in_out'],
    ];
    for (const kernel of gemmKernels(gpu)) {
      let worst = 0;
      for (const [M, K, N, layout] of edges) {
        const r = await forwardCase(gpu, rng, M, K, N, layout, (M + N) % 2 === 0, undefined, kernel);
        expect(r.kernels).toEqual(['matmul_forward']);
        worst = Math.max(worst, r.worst);
      }
      console.log(`matmul_forward ${kernel} around its blocks: worst ${worst.toFixed(3)} of tolerance`);
    }
  });

  it('picks the subgroup kernel on lavapipe (a fixed subgroup size), the direct one on SwiftShader, the tiled one on GPUs', () => {
    const fake = (adapter: Partial<Gpu['adapter']>, sub: [number, number] | null) =>
      ({
        hasSubgroups: sub !== null,
        adapter: { vendor: '', architecture: '', device: '', description: '', isFallback: false, ...adapter },
        device: { adapterInfo: sub ? { subgroupMinSize: sub[0], subgroupMaxSize: sub[1] } : {} },
      }) as unknown as Gpu;
    const lavapipe = { vendor: 'mesa', architecture: 'software', description: 'llvmpipe: Mesa 25.0.7 (LLVM 15.0.6)', isFallback: true };
    // Every class orders every kernel of the one table (GEMM_KERNELS), the subgroup one where it can run.
    for (const report of [lavapipe, { vendor: 'google', architecture: 'swiftshader' }, { vendor: 'nvidia', architecture: 'hopper' }]) {
      expect([...gemmKernels(fake(report, [8, 8]))].sort()).toEqual([...GEMM_KERNELS].sort());
    }
    expect(gemmKernels(fake(lavapipe, [8, 8]))).toEqual(['subgroup', 'tiled', 'direct']);
    expect(gemmKernels(fake({ vendor: 'google', architecture: 'swiftshader' }, [4, 4]))).toEqual(['direct', 'tiled', 'subgroup']); // barriers and shuffles are dear there
    expect(gemmKernels(fake({ vendor: 'google', description: 'SwiftShader driver 5.0.0', isFallback: true }, null))).toEqual(['direct', 'tiled']);
    expect(gemmKernels(fake(lavapipe, null))).toEqual(['tiled', 'direct']); // no subgroups feature
    expect(gemmKernels(fake(lavapipe, [4, 16]))).toEqual(['tiled', 'direct']); // size not fixed
    expect(gemmKernels(fake(lavapipe, [64, 64]))).toEqual(['tiled', 'direct']); // wider than its 32 columns
    expect(gemmKernels(fake({ vendor: 'nvidia', architecture: 'hopper' }, [32, 32]))).toEqual(['tiled', 'subgroup', 'direct']);
    expect(gemmKernels(fake({ vendor: 'amd', architecture: 'rdna-3' }, [32, 64]))).toEqual(['tiled', 'direct']);
  });

  it('out_in with M <= 16 (decode): the few-row kernel, odd K and N, with and without bias; the default on GPUs', async () => {
    const gpu = await testGpu();
    const rng = new Rng(15);
    let worst = 0;
    for (const M of [1, 3, 16]) {
      for (const K of [37, 576, 1537]) {
        for (const N of [29, 577, 2049]) {
          for (const withBias of [true, false]) {
            const r = await forwardCase(gpu, rng, M, K, N, 'out_in', withBias, undefined, 'rows');
            expect(r.kernels).toEqual(['matmul_rows_forward']);
            worst = Math.max(worst, r.worst);
          }
        }
      }
    }
    console.log(`matmul_rows_forward: worst ${worst.toFixed(3)} of tolerance`);
    // The launcher's own choice: the few-row kernel on GPUs; on CPU adapters their GEMM (subgroup, direct) is
    // faster at any row count.
    const rows = adapterClass(gpu.adapter) === 'gpu';
    for (const M of [1, 5, 16]) {
      const { kernels } = await forwardCase(gpu, rng, M, 37, 29, 'out_in', true);
      expect(kernels).toEqual([rows ? 'matmul_rows_forward' : 'matmul_forward']);
    }
    const big = { out: gpu.createBuffer('o', 17 * 29 * 4), inp: gpu.createBuffer('i', 17 * 37 * 4), weight: gpu.createBuffer('w', 29 * 37 * 4), M: 17, K: 37, N: 29, weightLayout: 'out_in' as const };
    expect(() => matmul_forward(gpu.recorder('x'), { ...big, kernel: 'rows' })).toThrow(/few-row kernel takes up to 16 rows/);
  });

  it('keeps the GEMM (not the few-row kernel) for 17 rows, and for few rows whose weight exceeds one binding', async () => {
    const gpu = await testGpu();
    const rng = new Rng(16);
    expect((await forwardCase(gpu, rng, 17, 37, 29, 'out_in', true)).kernels).toEqual(['matmul_forward']);
    // 16 KiB windows: the 201×97 weight (78 KB) needs several.
    const { kernels } = await forwardCase(gpu, rng, 3, 97, 201, 'out_in', true, 16 * 1024);
    expect(kernels.length).toBeGreaterThan(1);
    expect(kernels.every((k) => k === 'matmul_forward')).toBe(true);
  });

  it('splits operands past a (lowered) binding limit in M, N and K blocks', async () => {
    const gpu = await testGpu();
    const rng = new Rng(13);
    // 16 KiB windows: the weight (201×97 f32 = 78 KB) and the output (130×201 = 105 KB) need several.
    for (const layout of ['out_in', 'in_out'] as WeightLayout[]) {
      const { kernels } = await forwardCase(gpu, rng, 130, 97, 201, layout, true, 16 * 1024);
      expect(kernels.length).toBeGreaterThan(4);
    }
  });

  it('splits a weight bigger than the real 128 MiB binding limit (out_in, like a big-vocab lm_head)', async () => {
    const gpu = await testGpu();
    const [M, K] = [3, 32];
    const N = Math.ceil((gpu.limits.maxStorageBufferBindingSize / (K * 4)) * 1.05); // weight just past the limit
    // 35M weights: a cheap integer hash instead of Box-Muller keeps the test fast; values in [-1, 1).
    const weight = new Float32Array(N * K);
    for (let i = 0; i < weight.length; i++) weight[i] = ((Math.imul(i + 1, 2654435761) >>> 8) / 2 ** 23) - 1;
    const inp = new Rng(14).f32(M * K);
    const out = gpu.createBuffer('out', M * N * 4);
    const rec = gpu.recorder('matmul big');
    matmul_forward(rec, { out, inp: gpu.upload('inp', inp), weight: gpu.upload('weight', weight), M, K, N, weightLayout: 'out_in' });
    expect(rec.kernels.length).toBeGreaterThan(1);
    await rec.submit();
    const got = await gpu.readF32(out, M * N);
    const want = new Float64Array(M * N);
    const S = new Float64Array(M * N);
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let [s, a] = [0, 0];
        for (let k = 0; k < K; k++) {
          const t = inp[m * K + k] * weight[n * K + k];
          s += t;
          a += Math.abs(t);
        }
        want[m * N + n] = s;
        S[m * N + n] = a;
      }
    }
    expectClose(got, want, { atol: 0, rtol: 0, atolAt: tolFrom(S, K), label: 'forward past the binding limit' });
  });
});

describe('matmul_backward', () => {
  for (const layout of ['out_in', 'in_out'] as WeightLayout[]) {
    for (const bindingLimit of [undefined, 8 * 1024]) {
      it(`${layout}${bindingLimit ? ', split windows' : ''}: dinp, dweight, dbias (overwrite and accumulate), every GEMM kernel`, async () => {
        const gpu = await testGpu();
        for (const kernel of gemmKernels(gpu)) {
          const rng = new Rng(layout === 'out_in' ? 21 : 22);
          let worst = 0;
          for (const [M, K, N] of [[37, 53, 29], [130, 97, 201], [1, 19, 3]] as Array<[number, number, number]>) {
            const inp = rng.f32(M * K);
            const weight = rng.f32(N * K, 0.5);
            const dout = rng.f32(M * N);
            const want = mmBackRef(dout, inp, weight, M, K, N, layout);
            const Sdinp = mmBackRef(abs(dout), abs(inp), abs(weight), M, K, N, layout);
            for (const accumulate of [false, true]) {
              const prevW = rng.f32(N * K);
              const prevB = rng.f32(N);
              const prevX = rng.f32(M * K);
              const dinp = gpu.upload('dinp', prevX);
              const dweight = gpu.upload('dweight', prevW);
              const dbias = gpu.upload('dbias', prevB);
              const rec = gpu.recorder('matmul backward test');
              matmul_backward(rec, {
                dinp,
                dweight,
                dbias,
                dout: gpu.upload('dout', dout),
                inp: gpu.upload('inp', inp),
                weight: gpu.upload('weight', weight),
                M,
                K,
                N,
                weightLayout: layout,
                accumulate,
                accumulateDinp: accumulate,
                bindingLimit,
                kernel,
              });
              await rec.submit();
              const add = (x: Float64Array, prev: Float32Array) => (accumulate ? x.map((v, i) => v + prev[i]) : x);
              const addAbs = (x: Float64Array, prev: Float32Array) => (accumulate ? x.map((v, i) => v + Math.abs(prev[i])) : x);
              const label = `${M}x${K}x${N} ${layout} acc=${accumulate} ${kernel}`;
              const checks: Array<[GPUBuffer, Float64Array, Float64Array, number, string]> = [
                [dinp, add(want.dinp, prevX), addAbs(Sdinp.dinp, prevX), N, 'dinp'],
                [dweight, add(want.dweight, prevW), addAbs(Sdinp.dweight, prevW), M, 'dweight'],
                [dbias, add(want.dbias, prevB), addAbs(Sdinp.dbias, prevB), M, 'dbias'],
              ];
              for (const [buf, exp, S, len, name] of checks) {
                const got = await gpu.readF32(buf, exp.length);
                const r = expectClose(got, exp, { atol: 0, rtol: 0, atolAt: tolFrom(S, len + 1), label: `${name} ${label}` });
                worst = Math.max(worst, r.worst);
              }
            }
          }
          console.log(`matmul_backward ${layout}${bindingLimit ? ' split' : ''} ${kernel}: worst ${worst.toFixed(3)} of tolerance`);
        }
      });
    }
  }

  it("the tiled kernel splits K where few output tiles meet a long K (LoRA's rank-16 sides), summing the slices in order: forward and dweight vs float64, accumulating, deterministic", async () => {
    const gpu = await testGpu();
    const rng = new Rng(31);
    // x·Aᵀ (M 600 tokens × rank 16 over K 1,100: 10 tiles, 14 slices) and dA (16 × 48 over 1,300 tokens: 1 tile, 17 slices).
    const [M, K, N] = [600, 1100, 16];
    const inp = rng.f32(M * K);
    const weight = rng.f32(N * K, 0.5);
    const prev = rng.f32(M * N);
    const want = mmRef(inp, weight, null, M, K, N, 'out_in').map((v, i) => v + prev[i]);
    const S = mmRef(abs(inp), abs(weight), null, M, K, N, 'out_in').map((v, i) => v + Math.abs(prev[i]));
    const runs: Float32Array[] = [];
    for (let rep = 0; rep < 2; rep++) {
      const out = gpu.upload('out', prev);
      const rec = gpu.recorder('split forward');
      matmul_forward(rec, { out, inp: gpu.upload('inp', inp), weight: gpu.upload('weight', weight), M, K, N, weightLayout: 'out_in', accumulate: true, kernel: 'tiled' });
      expect(rec.kernels).toEqual(['matmul_forward', 'colsum_forward']);
      await rec.submit();
      runs.push(await gpu.readF32(out, M * N));
    }
    expectClose(runs[0], want, { atol: 0, rtol: 0, atolAt: tolFrom(S, K + 1), label: 'split forward' });
    expect(runs[1]).toEqual(runs[0]);

    const [T, In, R] = [1300, 48, 16];
    const x = rng.f32(T * In);
    const a = rng.f32(R * In, 0.5);
    const dout = rng.f32(T * R);
    const prevW = rng.f32(R * In);
    const ref = mmBackRef(dout, x, a, T, In, R, 'out_in');
    const refAbs = mmBackRef(abs(dout), abs(x), abs(a), T, In, R, 'out_in');
    const dweight = gpu.upload('dweight', prevW);
    const rec = gpu.recorder('split dweight');
    matmul_backward(rec, { dweight, dout: gpu.upload('dout', dout), inp: gpu.upload('x', x), weight: gpu.upload('a', a), M: T, K: In, N: R, weightLayout: 'out_in', accumulate: true, kernel: 'tiled' });
    expect(rec.kernels).toEqual(['matmul_backward:dweight', 'colsum_forward']);
    await rec.submit();
    const got = await gpu.readF32(dweight, R * In);
    expectClose(got, ref.dweight.map((v, i) => v + prevW[i]), { atol: 0, rtol: 0, atolAt: tolFrom(refAbs.dweight.map((v, i) => v + Math.abs(prevW[i])), T + 1), label: 'split dweight' });

    // d(x·Aᵀ) = dY·B (rank 16 over K = 1,100 outputs), accumulated into an input gradient; and the forward again in
    // lowered binding windows (row blocks of 59: the first splits K, the later ones start mid-page and do not).
    const [Out, Tok] = [1100, 600];
    const dy = rng.f32(Tok * Out);
    const bw = rng.f32(Out * R, 0.5);
    const prevX = rng.f32(Tok * R);
    const refB = mmBackRef(dy, rng.f32(Tok * R), bw, Tok, R, Out, 'out_in');
    const refBAbs = mmBackRef(abs(dy), new Float32Array(Tok * R), abs(bw), Tok, R, Out, 'out_in');
    const dinp = gpu.upload('dinp', prevX);
    const rec2 = gpu.recorder('split dinp');
    matmul_backward(rec2, { dinp, dout: gpu.upload('dy', dy), inp: gpu.upload('u', new Float32Array(Tok * R)), weight: gpu.upload('b', bw), M: Tok, K: R, N: Out, weightLayout: 'out_in', accumulate: false, accumulateDinp: true, kernel: 'tiled' });
    expect(rec2.kernels).toEqual(['matmul_backward:dinp', 'colsum_forward']);
    await rec2.submit();
    expectClose(await gpu.readF32(dinp, Tok * R), refB.dinp.map((v, i) => v + prevX[i]), { atol: 0, rtol: 0, atolAt: tolFrom(refBAbs.dinp.map((v, i) => v + Math.abs(prevX[i])), Out + 1), label: 'split dinp' });
    const windowed = gpu.upload('out', prev);
    const rec3 = gpu.recorder('split forward, windows');
    matmul_forward(rec3, { out: windowed, inp: gpu.upload('inp', inp), weight: gpu.upload('weight', weight), M, K, N, weightLayout: 'out_in', accumulate: true, kernel: 'tiled', bindingLimit: 256 * 1024 });
    expect(rec3.kernels.filter((k) => k === 'colsum_forward').length).toBeGreaterThan(0);
    await rec3.submit();
    expectClose(await gpu.readF32(windowed, M * N), want, { atol: 0, rtol: 0, atolAt: tolFrom(S, K + 1), label: 'split forward, windows' });
  });

  it('split K fills the GPU by invocations: a narrow tile (64 invocations) gets slices 64 deep, a full 256-invocation tile 256 deep', async () => {
    // The rule (src/kernels/matmul.ts): about 264 · 256 invocations in all, slices at least 256 · invocations / 256
    // deep, at most 64 of them. The slices are read off the partials' scratch, fresh in a view of the test GPU.
    const slicesOf = async (M: number, K: number, N: number) => {
      const view = asAdapterClass(await testGpu(), 'gpu');
      const rec = view.recorder('split count');
      matmul_forward(rec, { out: view.createBuffer('o', M * N * 4), inp: view.createBuffer('i', M * K * 4), weight: view.createBuffer('w', N * K * 4), M, K, N, weightLayout: 'out_in' });
      await rec.submit();
      return sharedScratch(view, 'matmul:split_k', 4).size / (M * N * 4);
    };
    // x·Aᵀ at rank 16: 64 × 16 tiles, 10 of them; 1,100 / 64 → 17 slices asked, each rounded up to whole 16-deep
    // steps (80) → 14 (counting workgroups instead: 264 / 10, but 256 deep → 4).
    expect(await slicesOf(600, 1100, 16)).toBe(14);
    // 64 × 64 tiles, 10 × 2 of them: ceil(264 / 20) = 14, but slices at least 256 deep → 4 (288 deep).
    expect(await slicesOf(600, 1100, 100)).toBe(4);
  });

  it('forced K slices (the bench\'s split A/B): 1 is no split, 2 and 5 within the float64 bound with one colsum each; refused where partials cannot sum into C', async () => {
    const gpu = await testGpu();
    const rng = new Rng(41);
    const [M, K, N] = [203, 577, 130]; // 4 × 3 full tiles: the launcher alone would not split
    const inp = rng.f32(M * K);
    const weight = rng.f32(N * K, 0.5);
    const prev = rng.f32(M * N);
    const ref = mmRef(inp, weight, null, M, K, N, 'out_in');
    const S = mmRef(abs(inp), abs(weight), null, M, K, N, 'out_in').map((v, i) => v + Math.abs(prev[i]));
    const [inpBuf, wBuf] = [gpu.upload('inp', inp), gpu.upload('weight', weight)];
    for (const slices of [1, 2, 5]) {
      const out = gpu.upload('out', prev);
      const rec = gpu.recorder(`slices ${slices}`);
      matmul_forward(rec, { out, inp: inpBuf, weight: wBuf, M, K, N, weightLayout: 'out_in', accumulate: true, kernel: 'tiled', slices });
      expect(rec.kernels, `${slices} slices`).toEqual(slices === 1 ? ['matmul_forward'] : ['matmul_forward', 'colsum_forward']);
      await rec.submit();
      expectClose(await gpu.readF32(out, M * N), ref.map((v, i) => v + prev[i]), { atol: 0, rtol: 0, atolAt: tolFrom(S, K + 1), label: `${slices} slices` });
    }
    const rec = gpu.recorder('refused slices');
    const out = gpu.createBuffer('out', M * N * 4);
    const one = /^matmul_forward: [^\n]+$/;
    expect(() => matmul_forward(rec, { out, inp: inpBuf, weight: wBuf, M, K, N, weightLayout: 'out_in', kernel: 'tiled', slices: 2, bias: gpu.createBuffer('b', N * 4) })).toThrow(one);
    expect(() => matmul_forward(rec, { out, inp: inpBuf, weight: wBuf, M, K, N, weightLayout: 'out_in', kernel: 'direct', slices: 2 })).toThrow(one);
    expect(() => matmul_forward(rec, { out, inp: inpBuf, weight: wBuf, M: 3, K, N, weightLayout: 'out_in', kernel: 'rows', slices: 2 })).toThrow(one);
    expect(() => matmul_forward(rec, { out, inp: inpBuf, weight: wBuf, M, K, N, weightLayout: 'out_in', kernel: 'tiled', slices: 0 })).toThrow(one);
    // K = 64 makes at most 4 slices of whole 16-deep steps: 5 asked is refused, not rounded.
    const k64 = gpu.createBuffer('k64', 64 * N * 4);
    expect(() => matmul_forward(rec, { out, inp: inpBuf, weight: k64, M, K: 64, N, weightLayout: 'out_in', kernel: 'tiled', slices: 5 })).toThrow(/^matmul_forward: K = 64 does not cut into 5 slices of whole 16-deep steps \(it would be 4\)$/);
    // 100 × 400 operands fit a 170 KB binding; 5 slices of 100 × 100 partials (200 KB) do not.
    const [a4, b4, c4] = [gpu.createBuffer('a', 100 * 400 * 4), gpu.createBuffer('b', 100 * 400 * 4), gpu.createBuffer('c', 100 * 100 * 4)];
    expect(() => matmul_forward(rec, { out: c4, inp: a4, weight: b4, M: 100, K: 400, N: 100, weightLayout: 'out_in', kernel: 'tiled', slices: 5, bindingLimit: 170_000 })).toThrow(/^matmul_forward: 5 K slices of 100 × 100 partials exceed one binding \(170000 bytes\)$/);
    expect(rec.kernels).toEqual([]); // refused before anything was recorded
    await rec.submit();
  });

  it("the tiled kernel's register prefetch (64 × 64 tiles): bitwise the kernel without it and within the float64 bound, forward (both layouts, bf16, bias, windows), dinp and split-K dweight; narrower tiles never prefetch", async () => {
    const gpu = await testGpu();
    const rng = new Rng(37);
    // Runs `record` with the prefetch on and off into fresh copies of `prev`; returns both results.
    const both = async (n: number, prev: Float32Array, record: (rec: ReturnType<Gpu['recorder']>, out: GPUBuffer, prefetch: boolean) => void) => {
      const runs: Float32Array[] = [];
      for (const prefetch of [true, false]) {
        const out = gpu.upload('out', prev);
        const rec = gpu.recorder('prefetch test');
        record(rec, out, prefetch);
        await rec.submit();
        runs.push(await gpu.readF32(out, n));
      }
      expect(runs[1]).toEqual(runs[0]);
      return runs[0];
    };
    // Which pipelines run (first, before this test has turned the prefetch off anywhere): turning it off gives a
    // 64 × 64 tile another pipeline, a narrow tile the same one.
    const pipelinesFor = async (M: number, N: number, prefetch?: boolean) => {
      const before = gpu.cache.pipelineCount;
      const rec = gpu.recorder('prefetch pipelines');
      matmul_forward(rec, { out: gpu.createBuffer('o', M * N * 4), inp: gpu.createBuffer('i', M * 20 * 4), weight: gpu.createBuffer('w', N * 20 * 4), M, K: 20, N, weightLayout: 'out_in', kernel: 'tiled', prefetch });
      await rec.submit();
      return gpu.cache.pipelineCount - before;
    };
    await pipelinesFor(100, 16);
    expect(await pipelinesFor(100, 16, false)).toBe(0); // 64 × 16 tiles: no prefetch either way
    await pipelinesFor(100, 80);
    expect(await pipelinesFor(100, 80, false)).toBe(1);
    let worst = 0;
    // K = 16 (one slice: no next one to fetch), 17 and 1 (a partial slice), 33 (three); M and N at and past 64.
    const shapes: Array<[number, number, number, WeightLayout]> = [[64, 16, 64, 'out_in'], [65, 17, 127, 'in_out'], [129, 33, 130, 'out_in'], [200, 301, 70, 'in_out'], [64, 1, 65, 'out_in'], [300, 70, 100, 'in_out'], [300, 100, 120, 'out_in']];
    for (const [M, K, N, layout] of shapes) {
      for (const bf of [false, true]) {
        const inp = rng.f32(M * K);
        const bits = f32ToBf16(rng.f32(N * K, 0.5));
        const weight = bf ? bf16ToF32(bits) : rng.f32(N * K, 0.5);
        const bias = rng.f32(N);
        const args = { inp: gpu.upload('inp', inp), weight: bf ? gpu.upload('w', bits) : gpu.upload('w', weight), bias: gpu.upload('bias', bias), M, K, N, weightLayout: layout, weightDtype: bf ? ('bf16' as const) : ('f32' as const), kernel: 'tiled' as const };
        // 16 KiB windows: the last two shapes stay in 64-wide tiles (blocks of 40 × 100 over K blocks of 32, and
        // 33 rows over 40 or 64 weight rows) read at operand offsets past 0 (a K block's column, a window's misalignment).
        for (const bindingLimit of [undefined, 16 * 1024]) {
          const got = await both(M * N, new Float32Array(M * N), (rec, out, prefetch) => matmul_forward(rec, { ...args, out, bindingLimit, prefetch }));
          const S = mmRef(abs(inp), abs(weight), abs(bias), M, K, N, layout);
          worst = Math.max(worst, expectClose(got, mmRef(inp, weight, bias, M, K, N, layout), { atol: 0, rtol: 0, atolAt: tolFrom(S, K), label: `prefetch forward ${M}x${K}x${N} ${layout} bf16=${bf} limit=${bindingLimit}` }).worst);
        }
      }
    }
    // dinp (dout · W, the weight read along N) and dweight (doutᵀ · x, A transposed) over 1,300 tokens: 2 × 2 tiles of
    // the 70 × 100 gradient, so K splits into slices (plus colsum), each prefetching.
    const [T, In, Out] = [1300, 100, 70];
    const x = rng.f32(T * In);
    const w = rng.f32(Out * In, 0.5);
    const dout = rng.f32(T * Out);
    const [prevX, prevW] = [rng.f32(T * In), rng.f32(Out * In)];
    const ref = mmBackRef(dout, x, w, T, In, Out, 'out_in');
    const refAbs = mmBackRef(abs(dout), abs(x), abs(w), T, In, Out, 'out_in');
    const bufs = { dout: gpu.upload('dout', dout), inp: gpu.upload('x', x), weight: gpu.upload('w', w), M: T, K: In, N: Out, weightLayout: 'out_in' as const, kernel: 'tiled' as const };
    const dinp = await both(T * In, prevX, (rec, out, prefetch) => matmul_backward(rec, { ...bufs, dinp: out, accumulate: false, accumulateDinp: true, prefetch }));
    worst = Math.max(worst, expectClose(dinp, ref.dinp.map((v, i) => v + prevX[i]), { atol: 0, rtol: 0, atolAt: tolFrom(refAbs.dinp.map((v, i) => v + Math.abs(prevX[i])), Out + 1), label: 'prefetch dinp' }).worst);
    const dweight = await both(Out * In, prevW, (rec, out, prefetch) => {
      matmul_backward(rec, { ...bufs, dweight: out, accumulate: true, prefetch });
      expect(rec.kernels).toEqual(['matmul_backward:dweight', 'colsum_forward']);
    });
    worst = Math.max(worst, expectClose(dweight, ref.dweight.map((v, i) => v + prevW[i]), { atol: 0, rtol: 0, atolAt: tolFrom(refAbs.dweight.map((v, i) => v + Math.abs(prevW[i])), T + 1), label: 'prefetch split dweight' }).worst);
    console.log(`tiled GEMM with register prefetch: worst ${worst.toFixed(3)} of tolerance`);
  });

  it("the epilogue's scale and residual (one dispatch fewer each): bitwise the product, then its f32 multiply or add, every kernel, split K, binding windows, bias; dinpScale on the backward", async () => {
    const gpu = await testGpu();
    const rng = new Rng(41);
    const f = Math.fround;
    // One product, written plain and then with the epilogue: returns both readbacks and the fused recording's kernels.
    const run = async (M: number, K: number, N: number, opts: { layout?: WeightLayout; bias?: boolean; kernel?: MatmulKernel; bindingLimit?: number; scale?: number; residual?: boolean }) => {
      const layout = opts.layout ?? 'out_in';
      const inp = rng.f32(M * K);
      const weight = rng.f32(N * K, 0.5);
      const bias = opts.bias ? rng.f32(N) : null;
      const resid = rng.f32(M * N, 3);
      const args = { inp: gpu.upload('inp', inp), weight: gpu.upload('w', weight), bias: bias ? gpu.upload('bias', bias) : undefined, M, K, N, weightLayout: layout, kernel: opts.kernel, bindingLimit: opts.bindingLimit };
      const plain = gpu.createBuffer('plain', M * N * 4);
      const fused = gpu.createBuffer('fused', M * N * 4);
      const r1 = gpu.recorder('plain');
      matmul_forward(r1, { ...args, out: plain });
      const r2 = gpu.recorder('fused');
      matmul_forward(r2, { ...args, out: fused, scale: opts.scale, residual: opts.residual ? gpu.upload('resid', resid) : undefined });
      const kernels = { plain: [...r1.kernels], fused: [...r2.kernels] };
      await r1.submit();
      await r2.submit();
      return { plain: await gpu.readF32(plain, M * N), fused: await gpu.readF32(fused, M * N), resid, kernels, inp, weight, bias, layout };
    };
    const kernels: MatmulKernel[] = [...gemmKernels(gpu), 'rows'];
    for (const kernel of kernels) {
      const [M, K, N] = kernel === 'rows' ? [5, 61, 33] : [37, 53, 29];
      for (const bias of [false, true]) {
        const r = await run(M, K, N, { kernel, bias, residual: true });
        expect(r.fused, `${kernel} residual bias=${bias}`).toEqual(Float32Array.from(r.plain, (v, i) => f(v + r.resid[i])));
        expect(r.kernels.fused).toEqual(r.kernels.plain);
      }
      const r = await run(M, K, N, { kernel, scale: 0.37 });
      expect(r.fused, `${kernel} scale`).toEqual(Float32Array.from(r.plain, (v) => f(v * f(0.37))));
    }
    // Split K (x·Aᵀ at rank 16 over K = 1,100: 14 slices, summed by colsum, which finishes the epilogue), the
    // residual and the scale each; a 16 KiB binding limit: 3-row windows of A (4,400-byte rows), so C and the
    // residual are bound in windows that start mid-page, with N in blocks too.
    for (const opts of [{ residual: true }, { scale: 2.5 }, { residual: true, bindingLimit: 16 * 1024 }]) {
      const r = await run(600, 1100, 16, { kernel: 'tiled', ...opts });
      if (!opts.bindingLimit) expect(r.kernels.fused).toEqual(['matmul_forward', 'colsum_forward']);
      expect(r.fused, JSON.stringify(opts)).toEqual(Float32Array.from(r.plain, (v, i) => (opts.scale ? f(v * f(opts.scale)) : f(v + r.resid[i]))));
    }
    // Cut along K (an [in, out] weight past the binding limit: K and N blocks): the bias goes with the first block
    // and the residual with the last, so the stream is added to the finished product, as the separate kernel did.
    const cut = await run(40, 300, 30, { layout: 'in_out', kernel: 'tiled', bias: true, residual: true, bindingLimit: 16 * 1024 });
    expect(cut.kernels.fused.length).toBeGreaterThan(1);
    expect(cut.fused).toEqual(Float32Array.from(cut.plain, (v, i) => f(v + cut.resid[i])));
    const S = mmRef(abs(cut.inp), abs(cut.weight), abs(cut.bias!), 40, 300, 30, 'in_out').map((v, i) => v + Math.abs(cut.resid[i]));
    expectClose(cut.fused, mmRef(cut.inp, cut.weight, cut.bias, 40, 300, 30, 'in_out').map((v, i) => v + cut.resid[i]), { atol: 0, rtol: 0, atolAt: tolFrom(S, 302), label: 'residual, K blocks' });
    // A scaled product is a bare one (the factor multiplies the product alone, and no add may fuse with it into an
    // fma): with a bias, a residual or accumulation, or cut along K, it is refused.
    const refused = gpu.recorder('refused');
    expect(() => matmul_forward(refused, { out: gpu.createBuffer('o', 40 * 30 * 4), inp: gpu.createBuffer('i', 40 * 300 * 4), weight: gpu.createBuffer('w', 300 * 30 * 4), M: 40, K: 300, N: 30, weightLayout: 'in_out', kernel: 'tiled', scale: 2, bindingLimit: 16 * 1024 })).toThrow(
      'matmul_forward: a scaled product must fit one K block (K = 300, 128 per binding window)',
    );
    const small = { out: gpu.createBuffer('o', 4 * 4), inp: gpu.createBuffer('i', 4 * 4), weight: gpu.createBuffer('w', 4 * 4), M: 2, K: 2, N: 2, weightLayout: 'out_in' as const, scale: 2 };
    for (const extra of [{ bias: gpu.createBuffer('b', 16) }, { residual: gpu.createBuffer('r', 16) }, { accumulate: true }]) {
      expect(() => matmul_forward(refused, { ...small, ...extra })).toThrow('matmul_forward: a scaled product takes no bias, residual or accumulation (the scale applies to the product alone)');
    }
    expect(() => matmul_backward(refused, { dinp: small.out, dout: small.inp, inp: small.inp, weight: small.weight, M: 2, K: 2, N: 2, weightLayout: 'out_in', accumulate: false, accumulateDinp: true, dinpScale: 2 })).toThrow(
      'matmul_backward:dinp: a scaled product takes no bias, residual or accumulation',
    );
    expect(refused.kernels).toEqual([]);
    await refused.submit();
    const same = gpu.createBuffer('same', 4 * 4);
    expect(() => matmul_forward(gpu.recorder('aliased'), { out: same, residual: same, inp: same, weight: same, M: 2, K: 2, N: 2, weightLayout: 'out_in' })).toThrow('matmul_forward: residual must not be out');
    // The backward's dinpScale (LoRA's du = scaling·(dout·B), M 600 × r 16 over K = 1,100: split), with a dweight beside it.
    const [T, R, Out] = [600, 16, 1100];
    const dout = gpu.upload('dout', rng.f32(T * Out));
    const bw = gpu.upload('b', rng.f32(Out * R, 0.5));
    const u = gpu.upload('u', rng.f32(T * R));
    const outs = [gpu.createBuffer('du', T * R * 4), gpu.createBuffer('du scaled', T * R * 4)];
    const dB = [gpu.createBuffer('dB', Out * R * 4), gpu.createBuffer('dB scaled', Out * R * 4)];
    for (const [i, dinpScale] of [[0, undefined], [1, 0.37]] as const) {
      const rec = gpu.recorder('dinpScale');
      matmul_backward(rec, { dinp: outs[i], dweight: dB[i], dout, inp: u, weight: bw, M: T, K: R, N: Out, weightLayout: 'out_in', accumulate: false, dinpScale, kernel: 'tiled' });
      await rec.submit();
    }
    const [du, duScaled] = await Promise.all(outs.map((b) => gpu.readF32(b, T * R)));
    expect(duScaled).toEqual(Float32Array.from(du, (v) => f(v * f(0.37))));
    expect(await gpu.readF32(dB[1], Out * R)).toEqual(await gpu.readF32(dB[0], Out * R)); // the weight gradient is not scaled
  });

  it("the direct kernel's vec4 entry point (B in f32; ld, window and block bases multiples of 4): forward (both layouts, bias, residual, 1–3 rows), dinp, dweight with K tails (tokens 4n + 1, 2, 3), binding windows; within the float64 bound and bitwise the tiled kernel (unsplit: one fma per k in increasing k, as both make it); the one-element entry point elsewhere", async () => {
    const gpu = await testGpu();
    const rng = new Rng(43);
    /** The entry points a recording's direct dispatches take, in order. */
    const entries = (rec: ReturnType<Gpu['recorder']>) => spyDispatches(rec, (d) => (d.shader === 'matmul_direct_forward' ? (d.entryPoint ?? 'main') : undefined));
    // Forward: the direct kernel against the tiled one unsplit (slices 1), and against float64.
    const forward = async (M: number, K: number, N: number, layout: WeightLayout, opts: { bias?: boolean; residual?: boolean; bf16?: boolean; bindingLimit?: number } = {}) => {
      const inp = rng.f32(M * K);
      const w = rng.f32(N * K, 0.5);
      const weight = opts.bf16 ? bf16ToF32(f32ToBf16(w)) : w;
      const bias = opts.bias ? rng.f32(N) : null;
      const resid = opts.residual ? rng.f32(M * N, 3) : null;
      const buffers = { inp: gpu.upload('inp', inp), weight: opts.bf16 ? gpu.upload('w', new Uint32Array(f32ToBf16(w).buffer)) : gpu.upload('w', weight), bias: bias ? gpu.upload('bias', bias) : undefined, residual: resid ? gpu.upload('resid', resid) : undefined };
      const outs = { direct: gpu.createBuffer('direct', M * N * 4), tiled: gpu.createBuffer('tiled', M * N * 4) };
      const rec = gpu.recorder('direct vec4');
      const seen = entries(rec);
      const common = { ...buffers, M, K, N, weightLayout: layout, weightDtype: opts.bf16 ? ('bf16' as const) : undefined, bindingLimit: opts.bindingLimit };
      matmul_forward(rec, { ...common, out: outs.direct, kernel: 'direct' });
      if (!opts.bindingLimit) matmul_forward(rec, { ...common, out: outs.tiled, kernel: 'tiled', slices: 1 });
      await rec.submit();
      const got = await gpu.readF32(outs.direct, M * N);
      if (!opts.bindingLimit) expect(got, `${M}x${K}x${N} ${layout} vs tiled`).toEqual(await gpu.readF32(outs.tiled, M * N));
      const want = mmRef(inp, weight, bias, M, K, N, layout).map((v, i) => v + (resid?.[i] ?? 0));
      const S = mmRef(abs(inp), abs(weight), bias ? abs(bias) : null, M, K, N, layout).map((v, i) => v + Math.abs(resid?.[i] ?? 0));
      expectClose(got, want, { atol: 0, rtol: 0, atolAt: tolFrom(S, K + 2), label: `direct ${M}x${K}x${N} ${layout} ${JSON.stringify(opts)}` });
      return seen;
    };
    expect(await forward(37, 64, 52, 'out_in', { bias: true, residual: true })).toEqual(['main_vec']);
    expect(await forward(37, 20, 44, 'in_out', { bias: true })).toEqual(['main_vec']);
    for (const M of [1, 2, 3]) expect(await forward(M, 8, 12, 'out_in')).toEqual(['main_vec']); // 1 and 2 rows per invocation: A's rows load one by one
    expect(await forward(37, 63, 52, 'out_in')).toEqual(['main']); // K (A's ld) not a multiple of 4
    expect(await forward(37, 64, 50, 'in_out')).toEqual(['main']); // N (B's ld) not a multiple of 4
    expect(await forward(37, 64, 52, 'out_in', { bf16: true })).toEqual(['main']);
    // 16 KiB windows of 576-byte rows of A: blocks of 16 rows (every window base 0), all vec4.
    const windows = await forward(100, 144, 52, 'out_in', { bias: true, bindingLimit: 16 * 1024 });
    expect(windows.length).toBeGreaterThan(1);
    expect(new Set(windows)).toEqual(new Set(['main_vec']));
    // 4 KiB windows of B (K, N) = (64, 52): K blocks of 18 rows, so the block at k0 = 18 has A's block base 18 (the
    // one-element entry), the one at 36 base 36 with B's window base 40 (vec4, and a K tail of 2): both entries, one product.
    expect(new Set(await forward(37, 64, 52, 'in_out', { bindingLimit: 4096 }))).toEqual(new Set(['main', 'main_vec']));
    // Backward: dinp (dout (M, N) · W) and dweight (doutᵀ (stored (M, N)) · inp over M tokens, the last M % 4 one k at a time).
    for (const [M, K, N, layout] of [[37, 64, 52, 'out_in'], [38, 64, 52, 'out_in'], [39, 20, 44, 'in_out'], [40, 20, 44, 'in_out']] as Array<[number, number, number, WeightLayout]>) {
      const inp = rng.f32(M * K);
      const weight = rng.f32(N * K, 0.5);
      const dout = rng.f32(M * N);
      const bufs = { dout: gpu.upload('dout', dout), inp: gpu.upload('inp', inp), weight: gpu.upload('w', weight) };
      const grads = (tag: string) => ({ dinp: gpu.createBuffer(`dinp ${tag}`, M * K * 4), dweight: gpu.createBuffer(`dweight ${tag}`, N * K * 4) });
      const [direct, tiled] = [grads('direct'), grads('tiled')];
      const rec = gpu.recorder('direct vec4 backward');
      const seen = entries(rec);
      matmul_backward(rec, { ...bufs, ...direct, M, K, N, weightLayout: layout, accumulate: false, kernel: 'direct' });
      matmul_backward(rec, { ...bufs, ...tiled, M, K, N, weightLayout: layout, accumulate: false, kernel: 'tiled' });
      expect(rec.kernels, 'the tiled dweight is not split').not.toContain('colsum_forward');
      await rec.submit();
      expect(seen).toEqual(['main_vec', 'main_vec']);
      const want = mmBackRef(dout, inp, weight, M, K, N, layout);
      const S = mmBackRef(abs(dout), abs(inp), abs(weight), M, K, N, layout);
      for (const [name, len, n] of [['dinp', M * K, N], ['dweight', N * K, M]] as const) {
        const got = await gpu.readF32(direct[name], len);
        expect(got, `${name} ${M}x${K}x${N} ${layout} vs tiled`).toEqual(await gpu.readF32(tiled[name], len));
        expectClose(got, want[name], { atol: 0, rtol: 0, atolAt: tolFrom(S[name], n + 1), label: `direct ${name} ${M}x${K}x${N} ${layout}` });
      }
    }
  });

  it('float64 twin: backward matches central finite differences of the forward', () => {
    const rng = new Rng(23);
    for (const layout of ['out_in', 'in_out'] as WeightLayout[]) {
      const [M, K, N] = [5, 7, 3];
      const inp = Float64Array.from(rng.f32(M * K));
      const weight = Float64Array.from(rng.f32(N * K));
      const bias = Float64Array.from(rng.f32(N));
      const g = rng.f32(M * N); // L = Σ g ⊙ y
      const L = () => dot(g, mmRef(inp, weight, bias, M, K, N, layout));
      const grads = mmBackRef(g, inp, weight, M, K, N, layout);
      const h = 1e-5;
      for (const [x, dx] of [[inp, grads.dinp], [weight, grads.dweight], [bias, grads.dbias]] as Array<[Float64Array, Float64Array]>) {
        const fd = fdGradient(L, x, h);
        // L is linear in each input: central differences are exact up to float64 rounding (~1e-16/h).
        expectClose(fd, dx, { atol: 1e-9, rtol: 1e-8, label: `fd ${layout}` });
      }
    }
  });
});
