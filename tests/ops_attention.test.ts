// attention_forward / attention_backward (GPU) against their float64 twins: odd T, head dims 8/16/64, GQA
// 4/2, 3/1, 9/3, left padding, a fully masked row (left-pad query rows see no key), holes in the mask,
// a near one-hot softmax, decode steps (Tq = 1 over a KV cache with TkvMax > Tk), a chunk Tq < Tk,
// T = 1, batch windows past a lowered binding limit; and the twin's backward against central finite
// differences of the twin's forward.
//
// Tolerances come from how f32 errors propagate (u = 2⁻²⁴; sums of n terms err like 4u√n · Σ|terms|):
// - a score s_j = scale·q·k_j errs by at most E = 4u√D · scale · max_j Σ_d |q_d k_jd| (row max);
// - a probability p_j = exp(s_j − max)/Σ then errs relatively by 2E (its score and the normaliser),
//   plus a few ulps of exp and the division, plus 4u√Tk from the sum: ε = 2E + 16u + 8u√Tk;
// - out_d = Σ_j p_j v_jd errs by ε · Σ_j p_j |v_jd|; lse by E + 8u(|lse| + 1) + 4u√Tk.
// Backward (given the same f32 att): datt_j = dout·v_j errs by u√D·A_j with A_j = Σ_d|dout_d v_jd|,
// so g_j = scale·att_j·(datt_j − Σ att·datt) errs by ≲ u(√D + √T + 3)·G_j with
// G_j = scale·att_j·(A_j + Σ_j' att_j' A_j'); dq = Σ_j g_j k_j, dk = Σ g q then err by
// ≲ u(√D + 2√T + 3)·Σ G|k| (resp. Σ G|q|), and dv = Σ att·dout by 4u√(group·T)·Σ att|dout|.
// Each bound gets ×4 headroom (the √n growth of random-sign roundings is an estimate, not a bound).
import { describe, expect, it } from 'vitest';
import { testGpu } from './helpers/gpu.ts';
import { Rng } from '../src/model/rng.ts';
import { expectClose } from './helpers/close.ts';
import { dot, fdGradient } from './helpers/fd.ts';
import { attention_backward as attBackRef, attention_forward as attRef } from '../src/ref/attention.ts';
import type { AttentionBackwardShape, AttentionShape } from '../src/kernels/types.ts';
import { attention_backward, attention_forward } from '../src/kernels/attention.ts';

const U = 2 ** -24;

/** Row 0 sees everything, row 1 is left-padded, row 2 is fully masked, row 3 has holes. */
function makeMask(rng: Rng, B: number, Tk: number): Int32Array {
  const mask = new Int32Array(B * Tk).fill(1);
  for (let b = 1; b < B; b++) {
    for (let j = 0; j < Tk; j++) {
      const kind = b % 4;
      if (kind === 1) mask[b * Tk + j] = j < Math.min(3, Tk - 1) ? 0 : 1;
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

async function forwardCase(gpu: Awaited<ReturnType<typeof testGpu>>, rng: Rng, s: AttentionShape, bindingLimit?: number): Promise<number> {
  const { q, k, v, mask } = forwardInputs(rng, s);
  const { B, Tq, Tk, Hq, D } = s;
  const out = gpu.createBuffer('out', B * Tq * Hq * D * 4);
  const att = gpu.createBuffer('att', B * Hq * Tq * Tk * 4);
  const lse = gpu.createBuffer('lse', B * Hq * Tq * 4);
  const rec = gpu.recorder('attention test');
  attention_forward(rec, {
    out,
    q: gpu.upload('q', q),
    k: gpu.upload('k', k),
    v: gpu.upload('v', v),
    attentionMask: gpu.upload('mask', mask),
    att,
    lse,
    ...s,
    bindingLimit,
  });
  if (bindingLimit) expect(rec.kernels.length).toBeGreaterThan(1);
  await rec.submit();
  const want = attRef(q, k, v, mask, s);
  const absOut = attRef(q, k, Float64Array.from(v, Math.abs), mask, s).out;
  const E = scoreError(q, k, mask, s);
  const eps = (row: number) => 2 * E[row] + 16 * U + 8 * U * Math.sqrt(Tk);
  const label = `B${B} Tq${Tq} Tk${Tk} Hq${Hq}/${s.Hkv} D${D}`;
  const rOut = expectClose(await gpu.readF32(out, want.out.length), want.out, {
    atol: 0,
    rtol: 0,
    atolAt: (x) => {
      const [bi, h] = [Math.floor(x / D / Hq), Math.floor(x / D) % Hq];
      return 4 * eps((Math.floor(bi / Tq) * Hq + h) * Tq + (bi % Tq)) * absOut[x] + 1e-30;
    },
    label: `out ${label}`,
  });
  const rAtt = expectClose(await gpu.readF32(att, want.att.length), want.att, {
    atol: 0,
    rtol: 0,
    atolAt: (x) => 4 * eps(Math.floor(x / Tk)) * want.att[x] + 1e-30,
    label: `att ${label}`,
  });
  const rLse = expectClose(await gpu.readF32(lse, want.lse.length), want.lse, {
    atol: 0,
    rtol: 0,
    atolAt: (x) => 4 * (E[x] + 8 * U * (Math.abs(want.lse[x]) + 1) + 4 * U * Math.sqrt(Tk)),
    label: `lse ${label}`,
  });
  return Math.max(rOut.worst, rAtt.worst, rLse.worst);
}

const shape = (B: number, Tq: number, Tk: number, TkvMax: number, Hq: number, Hkv: number, D: number): AttentionShape => ({
  B, Tq, Tk, TkvMax, Hq, Hkv, D, scale: 1 / Math.sqrt(D),
});
/** The backward's shape of a full-sequence forward shape (Tq = Tk = T). */
const backShape = (s: AttentionShape): AttentionBackwardShape => ({ B: s.B, T: s.Tq, Hq: s.Hq, Hkv: s.Hkv, D: s.D, scale: s.scale });

describe('attention_forward', () => {
  it('full sequences: odd T, GQA, left padding, fully masked and holed rows', async () => {
    const gpu = await testGpu();
    const rng = new Rng(51);
    let worst = 0;
    // T = 150 spans three 64-row tiles: the GEMMs' causal tile skipping really happens.
    for (const s of [shape(4, 13, 13, 13, 4, 2, 8), shape(3, 37, 37, 37, 3, 1, 16), shape(2, 19, 19, 19, 9, 3, 64), shape(3, 1, 1, 1, 4, 2, 8), shape(3, 150, 150, 150, 4, 2, 16)]) {
      worst = Math.max(worst, await forwardCase(gpu, rng, s));
    }
    console.log(`attention_forward full: worst ${worst.toFixed(3)} of tolerance`);
  });

  it('decode steps (Tq = 1 over a longer KV cache) and a chunk (Tq < Tk)', async () => {
    const gpu = await testGpu();
    const rng = new Rng(52);
    let worst = 0;
    for (const s of [shape(4, 1, 11, 16, 4, 2, 16), shape(3, 1, 30, 31, 9, 3, 64), shape(4, 3, 10, 10, 3, 1, 8), shape(3, 70, 100, 100, 3, 1, 8)]) {
      worst = Math.max(worst, await forwardCase(gpu, rng, s));
    }
    console.log(`attention_forward decode/chunk: worst ${worst.toFixed(3)} of tolerance`);
  });

  it('batch windows past a lowered binding limit', async () => {
    const gpu = await testGpu();
    const s = shape(3, 13, 13, 13, 4, 2, 8);
    await forwardCase(gpu, new Rng(53), s, s.Hq * s.Tq * s.Tk * 4 + 256); // one batch per window
  });
});

/** Σ|terms| magnitudes of the backward's sums (see the header), per output element. */
function backwardMagnitudes(dout: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, att: Float32Array, s: AttentionBackwardShape) {
  const { B, T, Hq, Hkv, D, scale } = s;
  const mdq = new Float64Array(B * T * Hq * D);
  const mdk = new Float64Array(B * T * Hkv * D);
  const group = Hq / Hkv;
  const A = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / group);
      for (let i = 0; i < T; i++) {
        const qo = ((b * T + i) * Hq + h) * D;
        const ao = ((b * Hq + h) * T + i) * T;
        let rA = 0;
        for (let j = 0; j < T; j++) {
          let a = 0;
          for (let d = 0; d < D; d++) a += Math.abs(dout[qo + d] * v[((b * T + j) * Hkv + kvh) * D + d]);
          A[j] = a;
          rA += att[ao + j] * a;
        }
        for (let j = 0; j < T; j++) {
          const G = scale * att[ao + j] * (A[j] + rA);
          const ko = ((b * T + j) * Hkv + kvh) * D;
          for (let d = 0; d < D; d++) {
            mdq[qo + d] += G * Math.abs(k[ko + d]);
            mdk[ko + d] += G * Math.abs(q[qo + d]);
          }
        }
      }
    }
  }
  const mdv = attBackRef(Float64Array.from(dout, Math.abs), q, k, v, att, s).dv; // Σ att·|dout| (att ≥ 0)
  return { mdq, mdk, mdv };
}

describe('attention_backward', () => {
  for (const split of [false, true]) {
    it(`dq, dk, dv match the float64 twin${split ? ' (batch windows)' : ''}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(split ? 62 : 61);
      let worst = 0;
      const cases = split
        ? [shape(3, 13, 13, 13, 4, 2, 8)]
        : [shape(4, 13, 13, 13, 4, 2, 8), shape(3, 37, 37, 37, 3, 1, 16), shape(2, 19, 19, 19, 9, 3, 64), shape(3, 1, 1, 1, 4, 2, 8), shape(3, 150, 150, 150, 4, 2, 16)];
      for (const s of cases) {
        const { q, k, v, mask } = forwardInputs(rng, s);
        const att = Float32Array.from(attRef(q, k, v, mask, s).att); // the backward's input, as the GPU forward saves it
        const dout = rng.f32(s.B * s.Tq * s.Hq * s.D);
        const bs = backShape(s);
        const dq = gpu.createBuffer('dq', q.length * 4);
        const dk = gpu.createBuffer('dk', k.length * 4);
        const dv = gpu.createBuffer('dv', v.length * 4);
        const rec = gpu.recorder('attention backward test');
        attention_backward(rec, {
          dq,
          dk,
          dv,
          dout: gpu.upload('dout', dout),
          q: gpu.upload('q', q),
          k: gpu.upload('k', k),
          v: gpu.upload('v', v),
          att: gpu.upload('att', att),
          attentionMask: gpu.upload('mask', mask),
          ...bs,
          bindingLimit: split ? s.Hq * s.Tq * s.Tk * 4 + 256 : undefined,
        });
        if (split) expect(rec.kernels.length).toBeGreaterThan(2);
        await rec.submit();
        const want = attBackRef(dout, q, k, v, att, bs);
        const m = backwardMagnitudes(dout, q, k, v, att, bs);
        const { D, T } = bs;
        const label = `B${bs.B} T${T} Hq${bs.Hq}/${bs.Hkv} D${D}`;
        const fqk = 4 * U * (Math.sqrt(D) + 2 * Math.sqrt(T) + 3);
        const fv = 4 * 4 * U * Math.sqrt((bs.Hq / bs.Hkv) * T);
        for (const [buf, exp, mag, f, name] of [
          [dq, want.dq, m.mdq, fqk, 'dq'],
          [dk, want.dk, m.mdk, fqk, 'dk'],
          [dv, want.dv, m.mdv, fv, 'dv'],
        ] as Array<[GPUBuffer, Float64Array, Float64Array, number, string]>) {
          const r = expectClose(await gpu.readF32(buf, exp.length), exp, { atol: 0, rtol: 0, atolAt: (x) => f * mag[x] + 1e-30, label: `${name} ${label}` });
          worst = Math.max(worst, r.worst);
        }
      }
      console.log(`attention_backward${split ? ' split' : ''}: worst ${worst.toFixed(3)} of tolerance`);
    });
  }

  it('float64 twin: backward matches central finite differences of the forward', () => {
    const rng = new Rng(63);
    const s = shape(3, 5, 5, 5, 4, 2, 4);
    const q = Float64Array.from(rng.f32(s.B * s.Tq * s.Hq * s.D));
    const k = Float64Array.from(rng.f32(s.B * s.Tk * s.Hkv * s.D));
    const v = Float64Array.from(rng.f32(s.B * s.Tk * s.Hkv * s.D));
    const mask = makeMask(rng, s.B, s.Tk); // left-padded and fully masked rows included
    const g = rng.f32(q.length); // L = Σ g ⊙ out
    const L = () => dot(g, attRef(q, k, v, mask, s).out);
    const grads = attBackRef(g, q, k, v, attRef(q, k, v, mask, s).att, backShape(s));
    const h = 1e-5;
    for (const [x, dx, name] of [[q, grads.dq, 'dq'], [k, grads.dk, 'dk'], [v, grads.dv, 'dv']] as Array<[Float64Array, Float64Array, string]>) {
      const fd = fdGradient(L, x, h);
      // Central differences: truncation O(h²·|L'''|) ≈ 1e-10, rounding ≈ 1e-16·|L|/h ≈ 1e-11.
      expectClose(fd, dx, { atol: 1e-8, rtol: 1e-6, label: `fd attention ${name}` });
    }
  });
});
