// GELU (tanh approximation), the SiLU-gated activation and the residual add, forward and backward, GPU
// against the float64 twins in src/oracle/ on odd sizes with extreme values (±0, 1e-30, the sigmoid tails,
// ±1e4, ±3e38); the twins' backward passes are checked against central finite differences first.
// Also the window split that lets every elementwise kernel run on tensors larger than one binding.
//
// Tolerances. The inputs are exact f32; f32 evaluation of u (GELU: sqrt(2/pi)(x + 0.044715x^3); SiLU:
// g) carries a few ulp of relative error, which the sigmoid's tail amplifies by |2u| (|u| < 40 wherever
// the result is above 1e-30), and WGSL's exp is accurate to 3 + 2|arg| ulp: together under 1.5e-5
// relative, so rtol 2e-5. Below 1e-30 (far tails) the absolute error is what matters: atol 1e-30.
// The derivatives cross zero (GELU near x = -0.75, SiLU near g = -1.28), where they are a difference
// of O(1) terms: there the error is relative to the terms, so atol = 2e-5 x the sum of the terms'
// magnitudes, computed from the float64 twin's pieces.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { tally } from '../helpers/tally.ts';
import * as geluRef from '../../src/oracle/gelu.ts';
import * as siluRef from '../../src/oracle/silu_gate.ts';
import * as residualRef from '../../src/oracle/residual.ts';
import { gelu_backward, gelu_forward } from '../../src/kernels/gelu.ts';
import { silu_gate_backward, silu_gate_forward } from '../../src/kernels/silu_gate.ts';
import { residual_accumulate, residual_forward } from '../../src/kernels/residual.ts';
import { windows } from '../../src/kernels/elementwise.ts';

const check = tally('ops_activation');
// 1, 7·33, 301·97, 301·896: odd, and none a multiple of the 256-thread workgroup.
const SIZES = [1, 231, 29_197, 269_696];
const EXTREMES = [0, -0, 1e-30, -1e-30, 1e-8, -1e-8, 0.5, -0.75, -1.28, 5, -5, 9, -9, 20, -20, 25, -25, 1e4, -1e4];

function inputs(rng: Rng, n: number, scale: number, extremes: number[]): Float32Array {
  const x = rng.f32(n, scale);
  x.set(extremes.slice(0, n));
  return x;
}

function fdCheck(name: string, f: (x: Float64Array) => Float64Array, x: Float64Array, analytic: Float64Array) {
  // Elementwise functions: d out_i / d x_i by central differences, h = 1e-6·max(1, |x|) (float64:
  // truncation ~h^2·f''' and rounding ~1e-16/h, both under 1e-9 relative to O(1) derivatives).
  const num = Float64Array.from(x, (v, i) => {
    const h = 1e-6 * Math.max(1, Math.abs(v));
    const at = (xi: number) => f(Float64Array.from(x, (w, k) => (k === i ? xi : w)))[i];
    return (at(v + h) - at(v - h)) / (2 * h);
  });
  check(analytic, num, { rtol: 1e-6, atol: 1e-8, label: name, key: 'twin FD' });
}

describe('float64 twins vs finite differences', () => {
  const x = Float64Array.from([...EXTREMES.filter((v) => Math.abs(v) < 100), ...new Rng(3).f32(50, 3)]);
  const ones = new Float64Array(x.length).fill(1);
  it('gelu_backward', () => fdCheck('gelu', geluRef.gelu_forward, x, geluRef.gelu_backward(x, ones)));
  it('silu_gate_backward', () => {
    const up = Float64Array.from(new Rng(4).f32(x.length, 2));
    const { dgate, dup } = siluRef.silu_gate_backward(ones, x, up);
    // d/dgate and d/dup of out_i = silu(gate_i)·up_i, one element at a time.
    fdCheck('silu_gate dgate', (g) => g.map((v, k) => siluRef.silu_gate_forward([v], [up[k]])[0]), x, dgate);
    fdCheck('silu_gate dup', (u) => u.map((v, k) => siluRef.silu_gate_forward([x[k]], [v])[0]), up, dup);
  });
});

describe('gelu (GPU vs float64 twin)', () => {
  for (const n of SIZES) {
    it(`n=${n}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(n);
      const inp = inputs(rng, n, 3, [...EXTREMES, 3e38, -3e38]);
      const dout = rng.f32(n);
      const inpB = gpu.upload('inp', inp);
      const out = gpu.createBuffer('out', n * 4);
      const dinp = gpu.upload('dinp', new Float32Array(n).fill(NaN));
      const rec = gpu.recorder('gelu test');
      gelu_forward(rec, { out, inp: inpB, n });
      gelu_backward(rec, { dinp, inp: inpB, dout: gpu.upload('dout', dout), n });
      await rec.submit();
      check(await gpu.readF32(out, n), geluRef.gelu_forward(inp), { rtol: 2e-5, atol: 1e-30, label: `gelu_forward n=${n}`, key: 'gelu_forward' });
      const scale = Float64Array.from(inp, (x, i) => Math.abs(dout[i]) * geluRef.gelu_grad_terms(x).reduce((t, v) => t + Math.abs(v), 0));
      check(await gpu.readF32(dinp, n), geluRef.gelu_backward(inp, dout), { rtol: 2e-5, atol: 1e-30, atolAt: (i) => 2e-5 * scale[i] + 1e-30, label: `gelu_backward n=${n}`, key: 'gelu_backward' });
    });
  }
});

describe('silu_gate (GPU vs float64 twin)', () => {
  for (const n of SIZES) {
    it(`n=${n}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(n + 1);
      const gate = inputs(rng, n, 3, [...EXTREMES, 1e30, -1e30]);
      const up = rng.f32(n, 2);
      const dout = rng.f32(n);
      const [gateB, upB] = [gpu.upload('gate', gate), gpu.upload('up', up)];
      const out = gpu.createBuffer('out', n * 4);
      const dgate = gpu.upload('dgate', new Float32Array(n).fill(NaN));
      const dup = gpu.upload('dup', new Float32Array(n).fill(NaN));
      const rec = gpu.recorder('silu_gate test');
      silu_gate_forward(rec, { out, gate: gateB, up: upB, n });
      silu_gate_backward(rec, { dgate, dup, dout: gpu.upload('dout', dout), gate: gateB, up: upB, n });
      await rec.submit();
      check(await gpu.readF32(out, n), siluRef.silu_gate_forward(gate, up), { rtol: 2e-5, atol: 1e-30, label: `silu_gate_forward n=${n}`, key: 'silu_gate_forward' });
      const want = siluRef.silu_gate_backward(dout, gate, up);
      check(await gpu.readF32(dup, n), want.dup, { rtol: 2e-5, atol: 1e-30, label: `dup n=${n}`, key: 'silu_gate_backward dup' });
      const scale = Float64Array.from(gate, (g, i) => {
        const s = 1 / (1 + Math.exp(-g));
        return Math.abs(dout[i] * up[i]) * s * (1 + Math.abs(g) * (1 - s));
      });
      check(await gpu.readF32(dgate, n), want.dgate, { rtol: 2e-5, atol: 1e-30, atolAt: (i) => 2e-5 * scale[i] + 1e-30, label: `dgate n=${n}`, key: 'silu_gate_backward dgate' });
    });
  }
});

describe('residual', () => {
  for (const n of SIZES) {
    it(`n=${n}: out = a + b, in place on a and on b, dst += src`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(n + 2);
      const a = inputs(rng, n, 1, [1e30, -1e-30, 3e38, 0]);
      const b = inputs(rng, n, 1e-3, [1, 1e-30, -3e38, -0]);
      const want = residualRef.residual_forward(a, b);
      const out = gpu.createBuffer('out', n * 4);
      const [aB, bB, aIn, bIn] = [gpu.upload('a', a), gpu.upload('b', b), gpu.upload('a in place', a), gpu.upload('b in place', b)];
      const rec = gpu.recorder('residual test');
      residual_forward(rec, { out, a: aB, b: bB, n });
      residual_forward(rec, { out: aIn, a: aIn, b: bB, n });
      residual_forward(rec, { out: bIn, a: aB, b: bIn, n });
      await rec.submit();
      // One f32 rounding of the exact sum; WGSL allows either neighbour of the exact result: 1 ulp = 2^-23 relative.
      for (const [buf, what] of [[out, 'out'], [aIn, 'out === a'], [bIn, 'out === b']] as const) {
        check(await gpu.readF32(buf, n), want, { rtol: 1.2e-7, atol: 0, label: `residual_forward ${what} n=${n}`, key: 'residual_forward' });
      }
      const dst = gpu.upload('dst', b);
      const rec2 = gpu.recorder('residual_accumulate test');
      residual_accumulate(rec2, { dst, src: aB, n });
      await rec2.submit();
      check(await gpu.readF32(dst, n), residualRef.residual_accumulate(b, a), { rtol: 1.2e-7, atol: 0, label: `residual_accumulate n=${n}`, key: 'residual_accumulate' });
    });
  }
});

describe('windows (elementwise kernels past one binding)', () => {
  it('a buffer too small for n is an error naming the kernel and the field', async () => {
    const gpu = await testGpu();
    const small = gpu.createBuffer('small', 16);
    const big = gpu.createBuffer('big', 400);
    expect(() => gelu_forward(gpu.recorder('x'), { out: small, inp: big, n: 100 })).toThrow('gelu_forward: out holds 16 bytes, needs 400 (100 elements)');
  });

  it('covers [0, n) with aligned windows within the binding limit', () => {
    for (const [n, maxBytes, align] of [[1000, 1024, 256], [1024, 1024, 256], [70_001, 4096, 16], [5, 134_217_728, 256], [300, 1000, 256]]) {
      const ws = windows(n, maxBytes, align);
      let next = 0;
      for (const w of ws) {
        expect(w.elemStart).toBe(next);
        expect((w.elemStart * 4) % align).toBe(0);
        expect(w.count * 4).toBeLessThanOrEqual(maxBytes);
        expect(w.count).toBeGreaterThan(0);
        next += w.count;
      }
      expect(next).toBe(n);
      expect(ws.length).toBe(Math.ceil(n / ((Math.floor(maxBytes / align) * align) / 4)));
    }
    expect(windows(0, 1024, 256)).toEqual([]);
    expect(() => windows(-1, 1024, 256)).toThrow(/non-negative/);
  });
});
