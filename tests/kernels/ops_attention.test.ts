// Fused attention_forward / attention_backward (GPU), each kernel set the adapter can run ('rows', 'wg', 'tile':
// all three everywhere they fit, forced in turn), against their float64 twins: odd T (not a
// multiple of the 16-key step or the 64-row block), head dims 8/16/64/128 (wider than a 64-thread workgroup)/256 (the widest 'rows' takes)/odd (5), GQA 4/2, 3/1, 9/3, left padding longer than
// a tile (whole tiles with no visible key), fully masked rows (left-pad query rows see no key), holes
// in the mask, a near one-hot softmax, a long row (T = 1,100), decode steps (Tq = 1 over a KV cache
// with TkvMax > Tk), a chunk Tq < Tk, T = 1; determinism (two runs bit-identical); the workgroup
// storage check; which set each adapter class gets; and the twin's backward against central finite
// differences of the twin's forward.
//
// Tolerances come from how f32 errors propagate (u = 2⁻²⁴; sums of n terms err like 4u√n · Σ|terms|):
// - a score s_j = scale·q·k_j errs by at most E = 4u√D · scale · max_j Σ_d |q_d k_jd| (row max);
// - a probability p_j = exp(s_j − m)/l then errs relatively by 2E (its score and the normaliser),
//   plus a few ulps of exp and the division, plus 4u√Tk from the sum, plus a rescale by exp(m − m')
//   per key step (online softmax): ε = 2E + 16u + 8u√Tk + 8u·tiles;
// - out_d = Σ_j p_j v_jd errs by ε · Σ_j p_j |v_jd|; lse by E + 8u(|lse| + 1) + 4u√Tk + 8u·tiles.
// Backward (given the same f32 out and lse): p_j = exp(s_j − lse) errs relatively by ε_i = E + 8u;
// dP_j = dout·v_j errs by u√D·A_j with A_j = Σ_d|dout_d v_jd|, delta = dout·out by u(√D + 1)·Σ p A,
// so g_j = scale·p_j·(dP_j − delta) errs by ≲ (u(√D + √T + 3) + ε_i)·G_j with
// G_j = scale·p_j·(A_j + Σ_j' p_j' A_j'); dq = Σ_j g_j k_j, dk = Σ g q then err by
// ≲ Σ (u(√D + 2√T + 3) + ε_i)·G|k| (resp. G|q|), and dv = Σ p·dout by Σ (4u√(group·T) + ε_i)·p|dout|.
// Each bound gets ×4 headroom (the √n growth of random-sign roundings is an estimate, not a bound).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { asAdapterClass, spyDispatches, testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { expectClose } from '../helpers/close.ts';
import { dot, fdGradient } from '../helpers/fd.ts';
import { attention_backward as attBackRef, attention_forward as attRef } from '../../src/oracle/attention.ts';
import type { AttentionBackwardShape, AttentionShape } from '../../src/kernels/types.ts';
import { ROWS_MAX_D, attentionBackwardScratchBytes, attentionKernels, attention_backward, attention_forward, type AttentionKernel } from '../../src/kernels/attention.ts';
import { workgroupCap, type Gpu } from '../../src/gpu/context.ts';

const U = 2 ** -24;
const STEP = 16; // keys per online-softmax step of 'rows' (BK in shaders/attention_forward.wgsl); 'tile' takes 32: fewer rescales, so the bound holds
type TestGpu = Awaited<ReturnType<typeof testGpu>>;

/** Row 0 sees everything, row 1 is left-padded (half the row), row 2 is fully masked, row 3 has holes. */
function makeMask(rng: Rng, B: number, Tk: number): Int32Array {
  const mask = new Int32Array(B * Tk).fill(1);
  const pad = Math.max(Math.min(3, Tk - 1), Math.floor(Tk / 2));
  for (let b = 1; b < B; b++) {
    for (let j = 0; j < Tk; j++) {
      const kind = b % 4;
      if (kind === 1) mask[b * Tk + j] = j < pad ? 0 : 1;
      if (kind === 2) mask[b * Tk + j] = 0;
      if (kind === 3) mask[b * Tk + j] = rng.next() < 0.3 ? 0 : 1;
    }
  }
  return mask;
}

function forwardInputs(rng: Rng, s: AttentionShape) {
  const q = rng.f32(s.B * s.Tq * s.Hq * s.D);
  const k = rng.f32(s.B * s.TkvMax * s.Hkv * s.D);
  const v = rng.f32(s.B * s.TkvMax * s.Hkv * s.D);
  for (let d = 0; d < s.D; d++) q[d] *= 40; // query 0, head 0: a near one-hot softmax
  return { q, k, v, mask: makeMask(rng, s.B, s.Tk) };
}

/** E per (b, h, i) row: the worst f32 error of a visible score. */
function scoreError(q: Float32Array, k: Float32Array, mask: Int32Array, s: AttentionShape): Float64Array {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D, scale } = s;
  const E = new Float64Array(B * Hq * Tq);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / (Hq / Hkv));
      for (let i = 0; i < Tq; i++) {
        let m = 0;
        for (let j = 0; j <= Tk - Tq + i; j++) {
          if (!mask[b * Tk + j]) continue;
          let a = 0;
          for (let d = 0; d < D; d++) a += Math.abs(q[((b * Tq + i) * Hq + h) * D + d] * k[((b * TkvMax + j) * Hkv + kvh) * D + d]);
          m = Math.max(m, a);
        }
        E[(b * Hq + h) * Tq + i] = 4 * U * Math.sqrt(D) * scale * m;
      }
    }
  }
  return E;
}

async function runForward(gpu: TestGpu, x: ReturnType<typeof forwardInputs>, s: AttentionShape, kernel: AttentionKernel) {
  const { B, Tq, Hq, D } = s;
  const out = gpu.createBuffer('out', B * Tq * Hq * D * 4);
  const lse = gpu.createBuffer('lse', B * Hq * Tq * 4);
  const rec = gpu.recorder('attention test');
  attention_forward(rec, { out, q: gpu.upload('q', x.q), k: gpu.upload('k', x.k), v: gpu.upload('v', x.v), attentionMask: gpu.upload('mask', x.mask), lse, ...s, kernel });
  await rec.submit();
  return { out: await gpu.readF32(out, B * Tq * Hq * D), lse: await gpu.readF32(lse, B * Hq * Tq) };
}

async function forwardCase(gpu: TestGpu, rng: Rng, s: AttentionShape, kernel: AttentionKernel): Promise<number> {
  const x = forwardInputs(rng, s);
  const { B, Tq, Tk, Hq, D } = s;
  const got = await runForward(gpu, x, s, kernel);
  const want = attRef(x.q, x.k, x.v, x.mask, s);
  const absOut = attRef(x.q, x.k, Float64Array.from(x.v, Math.abs), x.mask, s).out;
  const E = scoreError(x.q, x.k, x.mask, s);
  const tiles = Math.ceil(Tk / STEP);
  const eps = (row: number) => 2 * E[row] + 16 * U + 8 * U * Math.sqrt(Tk) + 8 * U * tiles;
  const label = `${kernel} B${B} Tq${Tq} Tk${Tk} Hq${Hq}/${s.Hkv} D${D}`;
  const rOut = expectClose(got.out, want.out, {
    atol: 0,
    rtol: 0,
    atolAt: (x) => {
      const [bi, h] = [Math.floor(x / D / Hq), Math.floor(x / D) % Hq];
      return 4 * eps((Math.floor(bi / Tq) * Hq + h) * Tq + (bi % Tq)) * absOut[x] + 1e-30;
    },
    label: `out ${label}`,
  });
  const rLse = expectClose(got.lse, want.lse, {
    atol: 0,
    rtol: 0,
    atolAt: (x) => 4 * (E[x] + 8 * U * (Math.abs(want.lse[x]) + 1) + 4 * U * Math.sqrt(Tk) + 8 * U * tiles),
    label: `lse ${label}`,
  });
  // The fully masked batch row 2 exists, so rows with no visible key (out exactly 0, lse −inf) were compared.
  if (B > 2) expect(want.lse.some((l) => l === -Infinity)).toBe(true);
  return Math.max(rOut.worst, rLse.worst);
}

const shape = (B: number, Tq: number, Tk: number, TkvMax: number, Hq: number, Hkv: number, D: number): AttentionShape => ({
  B, Tq, Tk, TkvMax, Hq, Hkv, D, scale: 1 / Math.sqrt(D),
});
/** The backward's shape of a full-sequence forward shape (Tq = Tk = T). */
const backShape = (s: AttentionShape): AttentionBackwardShape => ({ B: s.B, T: s.Tq, Hq: s.Hq, Hkv: s.Hkv, D: s.D, scale: s.scale });

/**
 * 'rows' reads its rows as vec4s into per-thread accumulators of ROWS_MAX_D: a head_dim that is not a multiple of 4,
 * or past it, is the other sets' (FULL's D = 5).
 */
const takes = (kernel: AttentionKernel, s: { D: number }) => kernel !== 'rows' || (s.D % 4 === 0 && s.D <= ROWS_MAX_D);
const ROWS_REFUSED = (kernel: string, D: number) => `${kernel}: the 'rows' set reads rows of head_dim D as vec4s into accumulators of ${ROWS_MAX_D} and needs D a multiple of 4 up to ${ROWS_MAX_D}, got ${D}`;

// D = ROWS_MAX_D (256): the widest head_dim the 'rows' set's per-thread accumulators hold (every element in use).
const FULL = [shape(4, 13, 13, 13, 4, 2, 8), shape(3, 37, 37, 37, 3, 1, 16), shape(3, 19, 19, 19, 9, 3, 64), shape(3, 1, 1, 1, 4, 2, 8), shape(4, 150, 150, 150, 4, 2, 16), shape(3, 70, 70, 70, 3, 3, 5), shape(3, 21, 21, 21, 4, 2, 128), shape(3, 11, 11, 11, 2, 1, 256)];

describe('attention_forward (fused)', () => {
  /** Runs `each` once per kernel set the adapter has and logs the worst error of each. */
  async function everyKernel(name: string, each: (gpu: TestGpu, kernel: AttentionKernel) => Promise<number>): Promise<void> {
    const gpu = await testGpu();
    for (const kernel of attentionKernels(gpu)) console.log(`${name} ${kernel}: worst ${(await each(gpu, kernel)).toFixed(3)} of tolerance`);
  }

  it('full sequences: odd T, GQA, odd D, left padding past a tile, fully masked and holed rows', async () => {
    await everyKernel('attention_forward full', async (gpu, kernel) => {
      const rng = new Rng(51);
      let worst = 0;
      for (const s of FULL.filter((s) => takes(kernel, s))) worst = Math.max(worst, await forwardCase(gpu, rng, s, kernel));
      return worst;
    });
  });

  it('a long row (T = 1,100: 69 online-softmax steps, 18 row blocks)', async () => {
    await everyKernel('attention_forward T=1100', (gpu, kernel) => forwardCase(gpu, new Rng(54), shape(2, 1100, 1100, 1100, 2, 1, 16), kernel));
  });

  it('decode steps (Tq = 1 over a longer KV cache) and a chunk (Tq < Tk)', async () => {
    await everyKernel('attention_forward decode/chunk', async (gpu, kernel) => {
      const rng = new Rng(52);
      let worst = 0;
      for (const s of [shape(4, 1, 11, 16, 4, 2, 16), shape(3, 1, 130, 131, 9, 3, 64), shape(4, 3, 10, 10, 3, 1, 8), shape(3, 70, 100, 100, 3, 1, 8)]) {
        worst = Math.max(worst, await forwardCase(gpu, rng, s, kernel));
      }
      return worst;
    });
  });

  it("'rows' takes a head_dim that is a multiple of 4 up to ROWS_MAX_D = 256 (it reads rows as vec4s into accumulators of that many): forced with D = 5 or 260 it is refused in one line, forward and backward; where it is the default (SwiftShader; lavapipe's decode steps) D = 5 and 260 run 'wg', D = 8 'rows'", async () => {
    const gpu = await testGpu();
    const shaders = async (view: TestGpu, s: AttentionShape) => {
      const rec = view.recorder('sets');
      const seen = spyDispatches(rec, (d) => d.shader);
      const x = forwardInputs(new Rng(55), s);
      const [out, lse, dq] = [view.createBuffer('out', x.q.length * 4), view.createBuffer('lse', s.B * s.Hq * s.Tq * 4), view.createBuffer('dq', x.q.length * 4)];
      const [dk, dv] = [view.createBuffer('dk', x.k.length * 4), view.createBuffer('dv', x.v.length * 4)];
      const [q, k, v, attentionMask] = [view.upload('q', x.q), view.upload('k', x.k), view.upload('v', x.v), view.upload('mask', x.mask)];
      attention_forward(rec, { out, q, k, v, attentionMask, lse, ...s });
      if (s.Tq === s.Tk) attention_backward(rec, { dq, dk, dv, dout: out, q, k, v, out, lse, attentionMask, ...backShape(s) });
      await rec.submit();
      return seen;
    };
    const swift = asAdapterClass(gpu, 'swiftshader');
    expect(await shaders(swift, shape(2, 9, 9, 9, 4, 2, 5))).toEqual(['attention_wg_forward', 'attention_wg_backward_dq', 'attention_wg_backward_dkdv']);
    expect(await shaders(swift, shape(2, 9, 9, 9, 4, 2, 8))).toEqual(['attention_forward', 'attention_backward_dq', 'attention_backward_dkdv']);
    expect(await shaders(swift, shape(2, 9, 9, 9, 4, 2, ROWS_MAX_D + 4))).toEqual(['attention_wg_forward', 'attention_wg_backward_dq', 'attention_wg_backward_dkdv']);
    const lavapipe = asAdapterClass(gpu, 'cpu');
    expect(await shaders(lavapipe, shape(2, 1, 9, 9, 4, 2, 5))).toEqual(['attention_wg_forward']); // a decode step: 'tile' hands it on
    expect(await shaders(lavapipe, shape(2, 1, 9, 9, 4, 2, 8))).toEqual(['attention_forward']);
    for (const D of [5, 6, 7, ROWS_MAX_D + 4]) {
      const s = shape(1, 3, 3, 3, 1, 1, D);
      const buf = gpu.createBuffer('x', 3 * D * 4);
      const rec = gpu.recorder('rows refused');
      expect(() => attention_forward(rec, { out: buf, q: buf, k: buf, v: buf, attentionMask: buf, lse: buf, ...s, kernel: 'rows' })).toThrow(ROWS_REFUSED('attention_forward', D));
      expect(() => attention_backward(rec, { dq: buf, dk: buf, dv: buf, dout: buf, q: buf, k: buf, v: buf, out: buf, lse: buf, attentionMask: buf, ...backShape(s), kernel: 'rows' })).toThrow(ROWS_REFUSED('attention_backward', D));
      expect(rec.kernels).toEqual([]);
      await rec.submit();
    }
    // The 'wg' set that SwiftShader runs for D = 5 is checked against the float64 twin by the tests above (FULL).
    expect(await forwardCase(swift, new Rng(56), shape(3, 13, 13, 13, 4, 2, 5), 'wg')).toBeLessThanOrEqual(1);
  });

  it("the launcher's widest 'rows' head_dim is the one its shaders' accumulators hold (D4_MAX vec4s)", () => {
    const wgsl = readFileSync(new URL('../../shaders/common/attention_rows.wgsl', import.meta.url), 'utf8');
    const m = /const D4_MAX = (\d+)u;/.exec(wgsl);
    expect(m).not.toBeNull();
    expect(4 * Number(m![1])).toBe(ROWS_MAX_D);
    expect(FULL.some((s) => s.D === ROWS_MAX_D)).toBe(true);
  });

  it("refuses a head_dim whose workgroup rows do not fit the device with the 'wg' set ('rows' keeps no rows in workgroup memory: it refuses D past 256)", async () => {
    const gpu = await testGpu();
    const D = gpu.limits.maxComputeWorkgroupStorageSize / 4; // two rows of D floats: twice the limit
    const s = shape(1, 1, 1, 1, 1, 1, D);
    const buf = gpu.createBuffer('x', D * 4);
    const rec = gpu.recorder('too wide');
    // 'tile' stages fixed-size tiles and chunks D: its workgroup storage does not grow with the head_dim.
    const kernel = 'wg';
    expect(() => attention_forward(rec, { out: buf, q: buf, k: buf, v: buf, attentionMask: buf, lse: buf, ...s, kernel })).toThrow(/attention_forward: head_dim \d+ needs \d+ bytes of workgroup storage, the device allows \d+/);
    expect(() => attention_backward(rec, { dq: buf, dk: buf, dv: buf, dout: buf, q: buf, k: buf, v: buf, out: buf, lse: buf, attentionMask: buf, ...backShape(s), kernel })).toThrow(/attention_backward: head_dim \d+ needs \d+ bytes/);
    expect(() => attention_forward(rec, { out: buf, q: buf, k: buf, v: buf, attentionMask: buf, lse: buf, ...s, kernel: 'rows' })).toThrow(ROWS_REFUSED('attention_forward', D));
    expect(rec.kernels).toEqual([]);
  });

  it('runs the tile set on GPUs and lavapipe, one thread per row on SwiftShader (which caps workgroups)', () => {
    const fake = (adapter: Partial<Gpu['adapter']>, storage = 32768) =>
      ({ adapter: { vendor: '', architecture: '', device: '', description: '', isFallback: false, ...adapter }, limits: { maxComputeWorkgroupStorageSize: storage } }) as unknown as Gpu;
    expect(attentionKernels(fake({ vendor: 'mesa', architecture: 'software', description: 'llvmpipe: Mesa 25.0.7 (LLVM 15.0.6)', isFallback: true }))).toEqual(['tile', 'rows', 'wg']);
    expect(attentionKernels(fake({ vendor: 'google', architecture: 'swiftshader' }))).toEqual(['rows', 'wg', 'tile']);
    expect(attentionKernels(fake({ vendor: 'nvidia', architecture: 'hopper' }))).toEqual(['tile', 'wg', 'rows']);
    expect(attentionKernels(fake({ vendor: 'apple', architecture: 'metal-3' }))).toEqual(['tile', 'wg', 'rows']);
    // A device at WebGPU's default 16 KiB of workgroup memory cannot hold the tile set's 32 KiB array: 'wg' leads there.
    expect(attentionKernels(fake({ vendor: 'nvidia', architecture: 'hopper' }, 16384))).toEqual(['wg', 'rows']);
    expect(attentionKernels(fake({ vendor: 'mesa', architecture: 'software', description: 'llvmpipe', isFallback: true }, 16384))).toEqual(['rows', 'wg']);
    // SwiftShader's compile time grows with the workgroup: its launchers cap it at 16 invocations.
    expect(workgroupCap(fake({ vendor: 'google', architecture: 'swiftshader' }).adapter)).toBe(16);
    expect(workgroupCap(fake({ vendor: 'mesa', architecture: 'software', description: 'llvmpipe', isFallback: true }).adapter)).toBe(Infinity);
    expect(workgroupCap(fake({ vendor: 'nvidia', architecture: 'hopper' }).adapter)).toBe(Infinity);
  });
});

/** Per-element error bounds of the backward (see the header), before the ×4 headroom. */
function backwardBounds(dout: Float32Array, x: ReturnType<typeof forwardInputs>, lse: Float32Array, E: Float64Array, s: AttentionBackwardShape) {
  const { B, T, Hq, Hkv, D, scale } = s;
  const { q, k, v, mask } = x;
  const edq = new Float64Array(B * T * Hq * D);
  const edk = new Float64Array(B * T * Hkv * D);
  const edv = new Float64Array(B * T * Hkv * D);
  const group = Hq / Hkv;
  const c = U * (Math.sqrt(D) + 2 * Math.sqrt(T) + 3);
  const cv = 4 * U * Math.sqrt(group * T);
  const A = new Float64Array(T);
  const P = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / group);
      for (let i = 0; i < T; i++) {
        const row = (b * Hq + h) * T + i;
        if (lse[row] === -Infinity) continue;
        const ei = E[row] + 8 * U;
        const qo = ((b * T + i) * Hq + h) * D;
        let rA = 0;
        for (let j = 0; j <= i; j++) {
          P[j] = 0;
          if (!mask[b * T + j]) continue;
          const ko = ((b * T + j) * Hkv + kvh) * D;
          let sc = 0;
          let a = 0;
          for (let d = 0; d < D; d++) {
            sc += q[qo + d] * k[ko + d];
            a += Math.abs(dout[qo + d] * v[ko + d]);
          }
          P[j] = Math.exp(scale * sc - lse[row]);
          A[j] = a;
          rA += P[j] * a;
        }
        for (let j = 0; j <= i; j++) {
          if (P[j] === 0) continue;
          const G = scale * P[j] * (A[j] + rA) * (c + ei);
          const ko = ((b * T + j) * Hkv + kvh) * D;
          for (let d = 0; d < D; d++) {
            edq[qo + d] += G * Math.abs(k[ko + d]);
            edk[ko + d] += G * Math.abs(q[qo + d]);
            edv[ko + d] += P[j] * (cv + ei) * Math.abs(dout[qo + d]);
          }
        }
      }
    }
  }
  return { edq, edk, edv };
}

async function runBackward(gpu: TestGpu, x: ReturnType<typeof forwardInputs>, dout: Float32Array, out: Float32Array, lse: Float32Array, bs: AttentionBackwardShape, kernel: AttentionKernel) {
  const dq = gpu.createBuffer('dq', x.q.length * 4);
  const dk = gpu.createBuffer('dk', x.k.length * 4);
  const dv = gpu.createBuffer('dv', x.v.length * 4);
  const rec = gpu.recorder('attention backward test');
  attention_backward(rec, {
    dq, dk, dv,
    dout: gpu.upload('dout', dout),
    q: gpu.upload('q', x.q),
    k: gpu.upload('k', x.k),
    v: gpu.upload('v', x.v),
    out: gpu.upload('out', out),
    lse: gpu.upload('lse', lse),
    attentionMask: gpu.upload('mask', x.mask),
    ...bs,
    kernel,
  });
  await rec.submit();
  return { dq: await gpu.readF32(dq, x.q.length), dk: await gpu.readF32(dk, x.k.length), dv: await gpu.readF32(dv, x.v.length) };
}

async function backwardCase(gpu: TestGpu, rng: Rng, s: AttentionShape, kernel: AttentionKernel, twice = false): Promise<number> {
  const x = forwardInputs(rng, s);
  const fwd = attRef(x.q, x.k, x.v, x.mask, s);
  const out = Float32Array.from(fwd.out); // the backward's inputs, as the GPU forward saves them
  const lse = Float32Array.from(fwd.lse);
  const dout = rng.f32(out.length);
  const bs = backShape(s);
  const got = await runBackward(gpu, x, dout, out, lse, bs, kernel);
  if (twice) {
    const again = await runBackward(gpu, x, dout, out, lse, bs, kernel);
    for (const f of ['dq', 'dk', 'dv'] as const) expect(Buffer.from(again[f].buffer).equals(Buffer.from(got[f].buffer)), `${f} deterministic`).toBe(true);
  }
  const want = attBackRef(dout, x.q, x.k, x.v, out, lse, x.mask, bs);
  const e = backwardBounds(dout, x, lse, scoreError(x.q, x.k, x.mask, s), bs);
  const label = `${kernel} B${bs.B} T${bs.T} Hq${bs.Hq}/${bs.Hkv} D${bs.D}`;
  let worst = 0;
  for (const [name, bound] of [['dq', e.edq], ['dk', e.edk], ['dv', e.edv]] as const) {
    const r = expectClose(got[name], want[name], { atol: 0, rtol: 0, atolAt: (i) => 4 * bound[i] + 1e-30, label: `${name} ${label}` });
    worst = Math.max(worst, r.worst);
  }
  return worst;
}

describe('attention_backward (fused)', () => {
  it('dq, dk, dv match the float64 twin: odd T, GQA, odd D, padding, masked rows; deterministic', async () => {
    const gpu = await testGpu();
    for (const kernel of attentionKernels(gpu)) {
      const rng = new Rng(61);
      let worst = 0;
      for (const [n, s] of FULL.entries()) if (takes(kernel, s)) worst = Math.max(worst, await backwardCase(gpu, rng, s, kernel, n === 4));
      console.log(`attention_backward ${kernel}: worst ${worst.toFixed(3)} of tolerance`);
    }
  });

  it('a long row (T = 1,100)', async () => {
    const gpu = await testGpu();
    for (const kernel of attentionKernels(gpu)) {
      const worst = await backwardCase(gpu, new Rng(64), shape(2, 1100, 1100, 1100, 2, 1, 16), kernel);
      console.log(`attention_backward T=1100 ${kernel}: worst ${worst.toFixed(3)} of tolerance`);
    }
  });

  it("several row blocks and d-chunks at once ('tile': T = 2·64 + 1, D = 96: a half-full second chunk)", async () => {
    const gpu = await testGpu();
    for (const kernel of attentionKernels(gpu)) {
      const worst = await backwardCase(gpu, new Rng(65), shape(3, 129, 129, 129, 6, 2, 96), kernel, true);
      console.log(`attention_backward T=129 D=96 ${kernel}: worst ${worst.toFixed(3)} of tolerance`);
    }
  });

  it("'tile' dkdv with its query heads split unevenly over workgroups (5 heads per kv head: runs of 3 and 2), partials summed in order", async () => {
    const gpu = await testGpu();
    // B·Hkv·blocks = 4·128 = 512 workgroups before the split: each kv head's 5 query heads go to 2 workgroups (3 + 2),
    // whose dk / dv partials (2 × 2 × B·T·Hkv·D floats beside delta's B·Hq·T) colsum adds.
    const s = shape(4, 9, 9, 9, 640, 128, 8);
    expect(attentionBackwardScratchBytes(backShape(s))).toBe(4 * (4 * 640 * 9 + 2 * 2 * (4 * 9 * 128 * 8)));
    const worst = await backwardCase(gpu, new Rng(66), s, 'tile', true);
    console.log(`attention_backward uneven head split tile: worst ${worst.toFixed(3)} of tolerance`);
  });

  it('float64 twin: backward matches central finite differences of the forward', () => {
    const rng = new Rng(63);
    const s = shape(3, 5, 5, 5, 4, 2, 4);
    const q = Float64Array.from(rng.f32(s.B * s.Tq * s.Hq * s.D));
    const k = Float64Array.from(rng.f32(s.B * s.Tk * s.Hkv * s.D));
    const v = Float64Array.from(rng.f32(s.B * s.Tk * s.Hkv * s.D));
    const mask = makeMask(rng, s.B, s.Tk); // left-padded and fully masked rows included
    const g = rng.f32(q.length); // L = Σ g ⊙ out
    const L = () => dot(g, attRef(q, k, v, mask, s).out);
    const f = attRef(q, k, v, mask, s);
    const grads = attBackRef(g, q, k, v, f.out, f.lse, mask, backShape(s));
    const h = 1e-5;
    for (const [x, dx, name] of [[q, grads.dq, 'dq'], [k, grads.dk, 'dk'], [v, grads.dv, 'dv']] as Array<[Float64Array, Float64Array, string]>) {
      const fd = fdGradient(L, x, h);
      // Central differences: truncation O(h²·|L'''|) ≈ 1e-10, rounding ≈ 1e-16·|L|/h ≈ 1e-11.
      expectClose(fd, dx, { atol: 1e-8, rtol: 1e-6, label: `fd attention ${name}` });
    }
  });
});
