// embedding_forward with a packed bf16 table (WTE_BF16), and
// matmul_forward / matmul_backward (dinp) with a packed bf16 weight (B_BF16 in the GEMMs, W_BF16 in the few-row
// kernel; shaders/common/bf16.wgsl) against the float64 twin (src/oracle/matmul.ts) on the weight's exact f32
// values (bf16ToF32), with every GEMM kernel the adapter runs (gemmKernels: subgroup, tiled and direct on
// lavapipe): odd shapes, both layouts, odd element counts (a half-filled last word), bias, accumulation,
// binding-window splits (the windows start at odd bf16 elements); and the few-row kernel (a LoRA base's decode
// step) at up to 16 rows, the GPU class's default there. A bf16 weight is frozen: asking for its dweight is refused. Tolerance as tests/kernels/ops_matmul.test.ts: the weight
// values are exact, so only the f32 accumulation errs (4·u·√K·Σ|x·w|).
import { describe, expect, it } from 'vitest';
import type { Gpu } from '../../src/gpu/context.ts';
import { bf16ToF32, f32ToBf16 } from '../../src/io/safetensors.ts';
import { embedding_forward } from '../../src/kernels/embedding.ts';
import { gemmKernels, matmul_backward, matmul_forward, type MatmulKernel } from '../../src/kernels/matmul.ts';
import { embedding_forward as embRef } from '../../src/oracle/embedding.ts';
import { Rng } from '../../src/model/rng.ts';
import { matmul_backward as mmBackRef, matmul_forward as mmRef, type WeightLayout } from '../../src/oracle/matmul.ts';
import { expectClose } from '../helpers/close.ts';
import { asAdapterClass, testGpu } from '../helpers/gpu.ts';

const U = 2 ** -24;
const abs = (a: ArrayLike<number>) => Float64Array.from(a, Math.abs);

/** Random bf16 bits (round to nearest even of N(0, scale²) f32 samples). */
function bf16(rng: Rng, n: number, scale: number): Uint16Array {
  return f32ToBf16(rng.f32(n, scale));
}

async function forwardCase(gpu: Gpu, rng: Rng, M: number, K: number, N: number, layout: WeightLayout, opts: { bias?: boolean; accumulate?: boolean; bindingLimit?: number; kernel?: MatmulKernel }) {
  const inp = rng.f32(M * K);
  const bits = bf16(rng, N * K, 0.5);
  const weight = bf16ToF32(bits);
  const bias = opts.bias ? rng.f32(N) : null;
  const prev = rng.f32(M * N);
  const out = gpu.upload('out', prev);
  const rec = gpu.recorder('bf16 matmul');
  matmul_forward(rec, {
    out, inp: gpu.upload('inp', inp), weight: gpu.upload('weight', bits), bias: bias ? gpu.upload('bias', bias) : undefined,
    M, K, N, weightLayout: layout, weightDtype: 'bf16', accumulate: opts.accumulate, bindingLimit: opts.bindingLimit, kernel: opts.kernel,
  });
  const kernels = [...rec.kernels];
  await rec.submit();
  const want = mmRef(inp, weight, bias, M, K, N, layout);
  const S = mmRef(abs(inp), abs(weight), bias ? abs(bias) : null, M, K, N, layout);
  if (opts.accumulate) for (let i = 0; i < want.length; i++) [want[i], S[i]] = [want[i] + prev[i], S[i] + Math.abs(prev[i])];
  const label = `bf16 forward ${M}x${K}x${N} ${layout} ${JSON.stringify(opts)}`;
  expectClose(await gpu.readF32(out, M * N), want, { atol: 0, rtol: 0, atolAt: (i) => 4 * U * Math.sqrt(K) * S[i] + 1e-30, label });
  return kernels;
}

describe('matmul with a packed bf16 weight', () => {
  const shapes: Array<[number, number, number]> = [[37, 53, 29], [1, 67, 5], [3, 31, 7], [130, 97, 201], [13, 29, 70]];
  for (const layout of ['out_in', 'in_out'] as WeightLayout[]) {
    it(`${layout} forward: odd shapes, bias, accumulate, every GEMM kernel`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(layout === 'out_in' ? 41 : 42);
      for (const kernel of gemmKernels(gpu)) {
        for (const [M, K, N] of shapes) {
          await forwardCase(gpu, rng, M, K, N, layout, { bias: true, kernel });
          await forwardCase(gpu, rng, M, K, N, layout, { accumulate: true, kernel });
        }
      }
    });

    it(`${layout} forward: split into binding windows that start mid-word, every GEMM kernel`, async () => {
      const gpu = await testGpu();
      // 8 KiB windows over a 201×97 bf16 weight (39 KB): several, at odd element offsets.
      for (const kernel of gemmKernels(gpu)) {
        const kernels = await forwardCase(gpu, new Rng(43), 130, 97, 201, layout, { bias: true, bindingLimit: 8 * 1024, kernel });
        expect(kernels.length).toBeGreaterThan(4);
      }
    });

    it(`${layout} backward: dinp through the bf16 weight (plain and accumulated, split), every GEMM kernel; no dweight`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(44);
      for (const kernel of gemmKernels(gpu)) {
        for (const [M, K, N, limit] of [[37, 53, 29, undefined], [130, 97, 201, 8 * 1024]] as const) {
          const dout = rng.f32(M * N);
          const bits = bf16(rng, N * K, 0.5);
          const weight = bf16ToF32(bits);
          const prev = rng.f32(M * K);
          for (const acc of [false, true]) {
            const dinp = gpu.upload('dinp', prev);
            const rec = gpu.recorder('bf16 dinp');
            const w = gpu.upload('weight', bits);
            matmul_backward(rec, { dinp, dout: gpu.upload('dout', dout), inp: gpu.zeros(16), weight: w, M, K, N, weightLayout: layout, weightDtype: 'bf16', accumulate: true, accumulateDinp: acc, bindingLimit: limit, kernel });
            await rec.submit();
            const want = mmBackRef(dout, new Float64Array(M * K), weight, M, K, N, layout).dinp;
            const S = mmBackRef(abs(dout), new Float64Array(M * K), abs(weight), M, K, N, layout).dinp;
            if (acc) for (let i = 0; i < want.length; i++) [want[i], S[i]] = [want[i] + prev[i], S[i] + Math.abs(prev[i])];
            expectClose(await gpu.readF32(dinp, M * K), want, { atol: 0, rtol: 0, atolAt: (i) => 4 * U * Math.sqrt(N) * S[i] + 1e-30, label: `bf16 dinp ${M}x${K}x${N} ${layout} acc=${acc} ${kernel}` });
            expect(() => matmul_backward(gpu.recorder('x'), { dweight: gpu.zeros(N * K * 4), dout: dinp, inp: dinp, weight: w, M, K, N, weightLayout: layout, weightDtype: 'bf16', accumulate: true })).toThrow(/bf16 weight is frozen/);
          }
        }
      }
    });
  }

  it("out_in with M <= 16 (a LoRA base's decode step): the few-row kernel on bf16 weights, odd K and N (a half-filled last word), bias; the default on GPUs", async () => {
    const gpu = await testGpu();
    const rng = new Rng(46);
    for (const M of [1, 3, 16]) {
      for (const [K, N] of [[37, 29], [577, 31], [64, 1537]] as const) {
        for (const bias of [true, false]) expect(await forwardCase(gpu, rng, M, K, N, 'out_in', { bias, kernel: 'rows' })).toEqual(['matmul_rows_forward']);
      }
    }
    // The launcher's own choice on a GPU-class adapter: the few-row kernel for a bf16 weight too (not when accumulating).
    const view = asAdapterClass(gpu, 'gpu');
    expect(await forwardCase(view, rng, 5, 37, 29, 'out_in', { bias: true })).toEqual(['matmul_rows_forward']);
    expect(await forwardCase(view, rng, 5, 37, 29, 'out_in', { accumulate: true })).not.toContain('matmul_rows_forward');
  });

  it('refuses a bf16 weight buffer too small for its shape, counting 2 bytes per element', async () => {
    const gpu = await testGpu();
    const rec = gpu.recorder('x');
    const args = { out: gpu.createBuffer('o', 4 * 8 * 4), inp: gpu.createBuffer('i', 4 * 9 * 4), M: 4, K: 9, N: 8, weightLayout: 'out_in' as const, weightDtype: 'bf16' as const };
    expect(() => matmul_forward(rec, { ...args, weight: gpu.createBuffer('w', 16) })).toThrow('matmul_forward: weight holds 16 bytes, needs 144 (72 elements)');
  });
});

describe('embedding_forward with a packed bf16 table', () => {
  it('odd C (rows start mid-word), GPT-2 positions, row windows: exactly the twin on the widened values', async () => {
    const gpu = await testGpu();
    const rng = new Rng(45);
    for (const [N, C, V, limit] of [[13, 7, 37, undefined], [29, 33, 501, 4096]] as const) {
      const bits = bf16(rng, V * C, 1);
      const P = 11;
      const wpe = rng.f32(P * C);
      const ids = Int32Array.from({ length: N }, () => rng.int(0, V - 1));
      ids[0] = V - 1;
      const pos = Int32Array.from({ length: N }, () => rng.int(0, P - 1));
      for (const withPos of [false, true]) {
        const out = gpu.createBuffer('out', N * C * 4);
        const rec = gpu.recorder('bf16 embedding');
        embedding_forward(rec, {
          out, ids: gpu.upload('ids', ids), wte: gpu.upload('wte', bits), wteDtype: 'bf16', N, C, V, bindingLimit: limit,
          ...(withPos ? { wpe: gpu.upload('wpe', wpe), positionIds: gpu.upload('pos', pos), P } : {}),
        });
        if (limit) expect(rec.kernels.length).toBeGreaterThan(1);
        await rec.submit();
        // A gather (+ one f32 add): exact up to the add's rounding.
        const want = embRef(ids, bf16ToF32(bits), withPos ? wpe : null, withPos ? pos : null, N, C, V, withPos ? P : 0);
        expectClose(await gpu.readF32(out, N * C), want, { rtol: withPos ? 2 ** -23 : 0, atol: 0, label: `bf16 embedding N=${N} C=${C} V=${V} pos=${withPos}` });
      }
    }
  });
});
