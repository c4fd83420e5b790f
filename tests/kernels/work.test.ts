// The work launchers declare per dispatch (Dispatch.work: src/gpu/stats.ts), which `npm run bench` divides by
// time to give every kernel, stage and decode its fraction of the FMA or copy probe. Checked against counts made
// here from the shapes alone: a GEMM is 2·M·N·K FLOPs however it is cut (every kernel the adapter runs, the
// few-row kernel, binding windows along M, N and K, split K with its colsum pass, which adds no FLOPs), its
// backward 2·2·M·N·K, its bytes A and B read once and C written (read too when accumulated into; a split writes a
// partial C per slice, which colsum reads); attention's pairs are counted by enumerating (query, key) with the causal rule, 2·D FLOPs
// per pair per product (forward 2 products, backward 3 + 4: its dq and dkdv passes recompute the scores);
// AdamW moves 28 bytes per element (param, grad, m, v read; param, m, v written) across windows and slots; an
// in-place add 12. Nothing is run for its numbers: only recorded and submitted, so the counters are read after
// a valid submit.
import { describe, expect, it } from 'vitest';
import type { Gpu, Recorder } from '../../src/gpu/context.ts';
import { attentionKernels, attention_backward, attention_forward } from '../../src/kernels/attention.ts';
import { gemmKernels, matmul_backward, matmul_forward } from '../../src/kernels/matmul.ts';
import { adamw_step } from '../../src/kernels/optimizer.ts';
import { residual_accumulate, residual_forward } from '../../src/kernels/residual.ts';
import { asAdapterClass, testGpu } from '../helpers/gpu.ts';

/** The declared work and the dispatches of what `record` records, after its submit checked out. */
async function declared(gpu: Gpu, record: (rec: Recorder) => void): Promise<{ flops: number; bytes: number; dispatches: number }> {
  const [f0, b0] = [gpu.stats.flops, gpu.stats.bytesMoved];
  const rec = gpu.recorder('work');
  record(rec);
  const dispatches = rec.kernels.length;
  await rec.finish();
  return { flops: gpu.stats.flops - f0, bytes: gpu.stats.bytesMoved - b0, dispatches };
}

const zeros = (gpu: Gpu, label: string, n: number) => gpu.createBuffer(label, 4 * n);

/** (query, key) pairs where query i of the last Tq of Tk positions sees key k: k ≤ Tk − Tq + i. */
function pairsByEnumeration(Tq: number, Tk: number): number {
  let n = 0;
  for (let i = 0; i < Tq; i++) for (let k = 0; k < Tk; k++) if (k <= Tk - Tq + i) n++;
  return n;
}

describe('declared work (Dispatch.work)', () => {
  it('a GEMM is 2·M·N·K FLOPs with every kernel, cut into binding windows or K slices; its backward twice that', async () => {
    const gpu = await testGpu();
    const [M, K, N] = [37, 203, 29];
    const [inp, weight, out, dout, dinp, dweight] = [zeros(gpu, 'inp', M * K), zeros(gpu, 'w', N * K), zeros(gpu, 'out', M * N), zeros(gpu, 'dout', M * N), zeros(gpu, 'dinp', M * K), zeros(gpu, 'dw', N * K)];
    for (const kernel of gemmKernels(gpu)) {
      const w = await declared(gpu, (rec) => matmul_forward(rec, { out, inp, weight, M, K, N, weightLayout: 'out_in', kernel }));
      expect(w.flops, kernel).toBe(2 * M * N * K);
      // 16 KiB windows: A's rows, B's rows (N) and, for the transposed side, K are cut: several dispatches, the same FLOPs.
      const cut = await declared(gpu, (rec) => matmul_forward(rec, { out, inp, weight, M, K, N, weightLayout: 'in_out', kernel, bindingLimit: 16384 }));
      expect(cut.dispatches, kernel).toBeGreaterThan(1);
      expect(cut.flops, kernel).toBe(2 * M * N * K);
      const back = await declared(gpu, (rec) => matmul_backward(rec, { dinp, dweight, dout, inp, weight, M, K, N, weightLayout: 'out_in', accumulate: false, kernel }));
      expect(back.flops, kernel).toBe(2 * 2 * M * N * K);
    }
    // Split K: a narrow block over a long K takes slices and a colsum pass; the product's FLOPs once.
    const [m, k, n] = [9, 1500, 13];
    const [a, b, c] = [zeros(gpu, 'a', m * k), zeros(gpu, 'b', n * k), zeros(gpu, 'c', m * n)];
    const split = await declared(gpu, (rec) => matmul_forward(rec, { out: c, inp: a, weight: b, M: m, K: k, N: n, weightLayout: 'out_in', kernel: 'tiled' }));
    expect(split.dispatches).toBe(2);
    expect(split.flops).toBe(2 * m * n * k);
    // Bytes: A and B read once, C written once (read too when accumulated into), B's bf16 elements 2 bytes each.
    const tiledBytes = async (o: { accumulate?: boolean; bf16?: boolean; slices?: number }) =>
      (await declared(gpu, (rec) => matmul_forward(rec, { out, inp, weight, M, K, N, weightLayout: 'out_in', kernel: 'tiled', accumulate: o.accumulate, weightDtype: o.bf16 ? 'bf16' : 'f32', slices: o.slices }))).bytes;
    const [aBytes, bBytes, cBytes] = [4 * M * K, 4 * N * K, 4 * M * N];
    expect(await tiledBytes({})).toBe(aBytes + bBytes + cBytes);
    expect(await tiledBytes({ accumulate: true })).toBe(aBytes + bBytes + 2 * cBytes);
    expect(await tiledBytes({ bf16: true })).toBe(aBytes + bBytes / 2 + cBytes);
    // 3 slices: each writes a partial C; colsum reads the three and reads and writes C (accumulating).
    expect(await tiledBytes({ accumulate: true, slices: 3 })).toBe(aBytes + bBytes + 3 * cBytes + 3 * cBytes + 2 * cBytes);
    // The few-row kernel (a GPU's decode product): one read of W.
    const rows = await declared(asAdapterClass(gpu, 'gpu'), (rec) => matmul_forward(rec, { out: c, inp: a, weight: b, M: m, K: k, N: n, weightLayout: 'out_in', kernel: 'rows' }));
    expect(rows.flops).toBe(2 * m * n * k);
    expect(rows.bytes).toBe(4 * (m * k + n * k + m * n));
    for (const buf of [inp, weight, out, dout, dinp, dweight, a, b, c]) buf.destroy();
  });

  it("attention counts the causal pairs: 2 products over them forward, 7 backward, with every kernel set", async () => {
    const gpu = await testGpu();
    const [B, Hq, Hkv, D] = [2, 4, 2, 16];
    for (const kernel of attentionKernels(gpu)) {
      for (const [Tq, Tk] of [[3, 7], [5, 5], [1, 9]]) {
        const TkvMax = Tk + 2; // a cache with room left: its unused rows are not traffic
        const [q, out] = [zeros(gpu, 'q', B * Tq * Hq * D), zeros(gpu, 'out', B * Tq * Hq * D)];
        const [k, v] = [zeros(gpu, 'k', B * TkvMax * Hkv * D), zeros(gpu, 'v', B * TkvMax * Hkv * D)];
        const mask = gpu.upload('mask', new Int32Array(B * Tk).fill(1));
        const lse = zeros(gpu, 'lse', B * Hq * Tq);
        const fwd = await declared(gpu, (rec) => attention_forward(rec, { out, q, k, v, attentionMask: mask, lse, B, Tq, Tk, TkvMax, Hq, Hkv, D, scale: 0.25, kernel }));
        expect(fwd.flops, `${kernel} ${Tq}/${Tk}`).toBe(2 * 2 * D * B * Hq * pairsByEnumeration(Tq, Tk));
        // q and out, the visible rows of k and v, the mask and lse: a cache's spare rows (TkvMax) are no traffic.
        const elems = { q: B * Tq * Hq * D, out: B * Tq * Hq * D, k: B * Tk * Hkv * D, v: B * Tk * Hkv * D, mask: B * Tk, lse: B * Hq * Tq };
        expect(fwd.bytes, `${kernel} ${Tq}/${Tk}`).toBe(4 * Object.values(elems).reduce((a, b) => a + b, 0));
        for (const buf of [q, out, k, v, mask, lse]) buf.destroy();
      }
      const T = 6;
      const [q, out, dout, dq] = ['q', 'out', 'dout', 'dq'].map((l) => zeros(gpu, l, B * T * Hq * D));
      const [k, v, dk, dv] = ['k', 'v', 'dk', 'dv'].map((l) => zeros(gpu, l, B * T * Hkv * D));
      const mask = gpu.upload('mask', new Int32Array(B * T).fill(1));
      const lse = zeros(gpu, 'lse', B * Hq * T);
      const bwd = await declared(gpu, (rec) => attention_backward(rec, { dq, dk, dv, dout, q, k, v, out, lse, attentionMask: mask, B, T, Hq, Hkv, D, scale: 0.25, kernel }));
      expect(bwd.flops, kernel).toBe((3 + 4) * 2 * D * B * Hq * pairsByEnumeration(T, T));
      for (const buf of [q, out, dout, dq, k, v, dk, dv, mask, lse]) buf.destroy();
    }
  });

  it('AdamW moves 28 bytes per element across windows and slots; an in-place add 12, an add 12', async () => {
    const gpu = await testGpu();
    const sizes = [1000, 37, 5000];
    const tensors = sizes.map((n) => ({ param: zeros(gpu, 'p', n), grad: zeros(gpu, 'g', n), m: zeros(gpu, 'm', n), v: zeros(gpu, 'v', n), n, weightDecay: 0.01 }));
    const clip = gpu.upload('clip', new Float32Array([1, 1, 0]));
    const out = zeros(gpu, 'out', sizes.length);
    const total = sizes.reduce((s, n) => s + n, 0);
    const slots: (1 | 3)[] = gpu.limits.maxStorageBuffersPerShaderStage >= 15 ? [1, 3] : [1];
    for (const s of slots) {
      const w = await declared(gpu, (rec) => adamw_step(rec, { tensors, clip, out, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: 1, slots: s, limit: 4096 }));
      expect(w.dispatches, `slots ${s}`).toBeGreaterThan(sizes.length / s); // 4 KiB windows: 1,024 elements at most each
      expect(w.bytes, `slots ${s}`).toBe(28 * total);
    }
    const n = 333;
    const [a, b, c] = [zeros(gpu, 'a', n), zeros(gpu, 'b', n), zeros(gpu, 'c', n)];
    expect((await declared(gpu, (rec) => residual_accumulate(rec, { dst: a, src: b, n }))).bytes).toBe(12 * n);
    expect((await declared(gpu, (rec) => residual_forward(rec, { out: c, a, b, n }))).bytes).toBe(12 * n);
    for (const t of tensors) for (const buf of [t.param, t.grad, t.m, t.v]) buf.destroy();
    for (const buf of [clip, out, a, b, c]) buf.destroy();
  });
});
