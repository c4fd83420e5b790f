// logprob_gather_forward / logprob_gather_backward (GPU) against their float64 twins (src/oracle/logprob_gather.ts):
// odd N and V (not multiples of the workgroup), ±1e4 logits, -inf entries (also as the target), fully
// masked rows, temperature 1 and 0.7, f16 storage, in-place backward, and V = 151936 with enough rows
// that the [N, V] buffer is split across dispatches.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { expectClose, maxAbs } from '../helpers/close.ts';
import { fdGradient } from '../helpers/fd.ts';
import type { Gpu } from '../../src/gpu/context.ts';
import { f16ToF32 } from '../../src/io/safetensors.ts';
import { logprob_gather_backward, logprob_gather_forward, type LogitsDtype } from '../../src/kernels/logprob_gather.ts';
import * as ref from '../../src/oracle/logprob_gather.ts';
import { bindingLimit, rowsPerWindow, rowWindow } from '../../src/kernels/windows.ts';

// Tolerances (the golden README's, for the same float32 computation):
// - logp, lse, entropy: rtol 1e-5, atol 1e-6·zmax per row. z = logits / T is rounded to f32 before
//   anything else, so z[id] − lse carries a few ulps of the row's largest |z|; the online sums add
//   ~1e-7·(elements per thread) relative at worst.
// - dlogits: rtol 1e-4, atol 1e-5·max|dlogits|: softmax from exp((z − max) − log Σ) has ~1e-6 relative
//   error; the atol covers the 1 − p cancellation of the target entry.
const LOGP_TOL = { rtol: 1e-5, atol: 1e-6 };

interface Case {
  N: number;
  V: number;
  logits: Float32Array; // (N, V) the values the GPU sees (f16-rounded when stored as f16)
  stored: Float32Array | Uint16Array; // what is uploaded
  ids: Int32Array;
  mask: Int32Array;
}

/** Random logits with the hard rows: ±1e4, -inf (one row with its target at -inf, one -inf for its first half), a fully masked row. */
function makeCase(rng: Rng, N: number, V: number, dtype: LogitsDtype): Case {
  const ids = Int32Array.from({ length: N }, () => rng.int(0, V - 1));
  const mask = Int32Array.from({ length: N }, (_, n) => (n % 5 === 3 ? 0 : 1));
  let stored: Float32Array | Uint16Array;
  if (dtype === 'f32') {
    const x = rng.f32(N * V, 3);
    for (let v = 0; v < V; v += 7) {
      x[0 * V + v] = v % 2 ? 1e4 : -1e4; // row 0: extremes (ties at +1e4)
      if (N > 1) x[1 * V + v] = -Infinity; // row 1: -inf entries, target among them
    }
    if (N > 1) ids[1] = 0;
    // row 2: its first half is -inf, so every thread's first elements are -inf before any real one
    if (N > 2) x.fill(-Infinity, 2 * V, 2 * V + Math.floor(V / 2));
    stored = x;
  } else {
    // f16 bits: sign, exponent 2^-6..2^2, random mantissa; extremes ±1e4 (0x70E2 = 10000 exactly) and -inf.
    const h = Uint16Array.from({ length: N * V }, () => (rng.int(0, 1) << 15) | (rng.int(9, 17) << 10) | rng.int(0, 1023));
    for (let v = 0; v < V; v += 7) {
      h[v] = v % 2 ? 0x70e2 : 0xf0e2;
      if (N > 1) h[V + v] = 0xfc00;
    }
    if (N > 1) ids[1] = 0;
    stored = h;
  }
  const logits = stored instanceof Uint16Array ? f16ToF32(stored) : stored;
  return { N, V, logits, stored, ids, mask };
}

function zmaxRows(c: Case, T: number): (i: number) => number {
  const z = new Float64Array(c.N).fill(1);
  for (let n = 0; n < c.N; n++) for (let v = 0; v < c.V; v++) if (Number.isFinite(c.logits[n * c.V + v])) z[n] = Math.max(z[n], Math.abs(c.logits[n * c.V + v] / T));
  return (i) => 1e-6 * z[i];
}

async function runForward(gpu: Gpu, c: Case, dtype: LogitsDtype, T: number, o: { wg?: number; skipMasked?: boolean } = {}) {
  const N = c.N;
  const logits = gpu.upload('logits', c.stored);
  const ids = gpu.upload('ids', c.ids);
  const mask = gpu.upload('mask', c.mask);
  const logp = gpu.createBuffer('logp', N * 4);
  const lse = gpu.createBuffer('lse', N * 8);
  const entropy = gpu.createBuffer('entropy', N * 4);
  const rec = gpu.recorder('gather test');
  logprob_gather_forward(rec, { logits, dtype, ids, mask, logp, lse, entropy, N, V: c.V, temperature: T, ...o });
  await rec.submit();
  return { logits, ids, mask, lse, entropyBuf: entropy, logp: await gpu.readF32(logp, N), lseOut: await gpu.readF32(lse, 2 * N), entropy: await gpu.readF32(entropy, N) };
}

function checkForward(c: Case, T: number, got: { logp: Float32Array; lseOut: Float32Array; entropy: Float32Array }, skipMasked: boolean, label: string) {
  const want = ref.logprob_gather_forward(c.logits, c.ids, skipMasked ? c.mask : null, c.N, c.V, T);
  const atolAt = zmaxRows(c, T);
  expectClose(got.logp, want.logp, { ...LOGP_TOL, atolAt, label: `${label} logp` });
  expectClose(got.entropy, want.entropy, { ...LOGP_TOL, atolAt, label: `${label} entropy` });
  const sum = (a: ArrayLike<number>) => Float64Array.from({ length: c.N }, (_, n) => a[2 * n] + a[2 * n + 1]);
  expectClose(sum(got.lseOut), sum(want.lse), { ...LOGP_TOL, atolAt, label: `${label} lse` });
  return want;
}

describe('logprob_gather_forward', () => {
  const variants: Array<{ dtype: LogitsDtype; N: number; V: number; T: number; wg?: number }> = [
    { dtype: 'f32', N: 37, V: 1001, T: 1 },
    { dtype: 'f32', N: 23, V: 2999, T: 0.7, wg: 64 },
    { dtype: 'f32', N: 6, V: 3, T: 0.7 }, // V far below the workgroup: most threads see nothing
    { dtype: 'f16', N: 29, V: 1003, T: 0.7 }, // odd V: rows start in the middle of a u32 word
    { dtype: 'f16', N: 11, V: 4097, T: 1, wg: 128 },
  ];
  for (const { dtype, N, V, T, wg } of variants) {
    it(`${dtype} N=${N} V=${V} T=${T} WG=${wg ?? 256} matches the float64 reference`, async () => {
      const gpu = await testGpu();
      const c = makeCase(new Rng(N * 1000 + V), N, V, dtype);
      const got = await runForward(gpu, c, dtype, T, { wg });
      checkForward(c, T, got, true, `${dtype} ${N}x${V}`);
      // Skipped (masked) rows are exact zeros; the -inf target gives -inf, not NaN.
      for (let n = 0; n < N; n++) if (!c.mask[n]) expect([got.logp[n], got.entropy[n], got.lseOut[2 * n]]).toEqual([0, 0, 0]);
      expect(got.logp[1]).toBe(-Infinity);
      expect(Number.isFinite(got.entropy[1])).toBe(true);
    });
  }

  it('scores masked rows too when skipMasked is false', async () => {
    const gpu = await testGpu();
    const c = makeCase(new Rng(5), 9, 515, 'f32');
    const got = await runForward(gpu, c, 'f32', 1, { skipMasked: false });
    checkForward(c, 1, got, false, 'scored');
    expect(got.logp[3]).toBeLessThan(0); // row 3 is masked and was scored
  });

  it('rejects undersized buffers and a bad temperature, naming the kernel and the field', async () => {
    const gpu = await testGpu();
    const [N, V] = [5, 7];
    const buf = (bytes: number) => gpu.createBuffer('b', bytes);
    const args = { logits: buf(N * V * 4), ids: buf(N * 4), mask: buf(N * 4), logp: buf(N * 4), lse: buf(N * 8), entropy: buf(N * 4), N, V, temperature: 1 };
    expect(() => logprob_gather_forward(gpu.recorder('x'), { ...args, logits: buf(N * V * 2) })).toThrow('logprob_gather_forward: logits holds 72 bytes, needs 140 (35 elements)');
    expect(() => logprob_gather_forward(gpu.recorder('x'), { ...args, lse: buf(N * 4) })).toThrow('logprob_gather_forward: lse holds 20 bytes, needs 40 (10 elements)');
    expect(() => logprob_gather_forward(gpu.recorder('x'), { ...args, temperature: 0 })).toThrow(/logprob_gather_forward: temperature must be a positive number, got 0/);
    // f16 logits need 2 bytes per element: the same buffer that is short for f32 holds them.
    const rec = gpu.recorder('f16 size');
    logprob_gather_forward(rec, { ...args, logits: buf(N * V * 2), dtype: 'f16' });
    await rec.submit();
    const back = { ...args, dlogp: buf(N * 4), dlogits: buf(N * V * 4) };
    expect(() => logprob_gather_backward(gpu.recorder('x'), { ...back, dlogits: buf(16) })).toThrow('logprob_gather_backward: dlogits holds 16 bytes, needs 140 (35 elements)');
  });
});

describe('logprob_gather_backward', () => {
  const variants: Array<{ dtype: LogitsDtype; N: number; V: number; T: number; inPlace?: boolean }> = [
    { dtype: 'f32', N: 37, V: 1001, T: 1 },
    { dtype: 'f32', N: 23, V: 2999, T: 0.7 },
    { dtype: 'f32', N: 17, V: 777, T: 0.7, inPlace: true },
    { dtype: 'f16', N: 29, V: 1003, T: 0.7 },
  ];
  for (const { dtype, N, V, T, inPlace } of variants) {
    it(`${dtype} N=${N} V=${V} T=${T}${inPlace ? ' in place' : ''} matches the float64 reference`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(N + V);
      const c = makeCase(rng, N, V, dtype);
      const fwd = await runForward(gpu, c, dtype, T);
      const dlogp = rng.f32(N);
      const out = inPlace ? 'in-place' : gpu.createBuffer('dlogits', N * V * 4);
      const rec = gpu.recorder('gather backward test');
      logprob_gather_backward(rec, { logits: fwd.logits, dtype, ids: fwd.ids, mask: fwd.mask, lse: fwd.lse, dlogp: gpu.upload('dlogp', dlogp), dlogits: out, N, V, temperature: T });
      await rec.submit();
      const got = await gpu.readF32(out === 'in-place' ? fwd.logits : out, N * V);
      const want = ref.logprob_gather_backward(c.logits, c.ids, c.mask, ref.logprob_gather_forward(c.logits, c.ids, c.mask, N, V, T).lse, dlogp, N, V, T);
      const g = maxAbs(want);
      expectClose(got, want, { rtol: 1e-4, atol: 1e-5 * g, label: `dlogits ${dtype} ${N}x${V}` });
      for (let n = 0; n < N; n++) if (!c.mask[n]) expect(got.subarray(n * V, (n + 1) * V).every((x) => Object.is(x, 0))).toBe(true);
    });
  }
});

describe('V = 151936 split across dispatches', () => {
  it('forward and in-place backward match the reference on every row', async () => {
    const gpu = await testGpu();
    const V = 151936;
    // Enough rows that (N, V) f32 exceeds maxStorageBufferBindingSize (128 MiB on lavapipe: 220 rows).
    const perBinding = Math.floor((gpu.limits.maxStorageBufferBindingSize - gpu.limits.minStorageBufferOffsetAlignment) / (V * 4));
    const N = Math.min(perBinding + 13, 1000);
    const per = rowsPerWindow(gpu, bindingLimit(gpu), N, V);
    expect(per, 'the test must force a split').toBeLessThan(N);
    const rng = new Rng(151936);
    const logits = new Float32Array(N * V);
    for (let i = 0; i < logits.length; i++) logits[i] = (rng.next() - 0.5) * 16; // cheap uniform logits
    for (let v = 0; v < V; v += 1001) logits[(N - 1) * V + v] = -Infinity;
    const c: Case = { N, V, logits, stored: logits, ids: Int32Array.from({ length: N }, () => rng.int(0, V - 1)), mask: Int32Array.from({ length: N }, (_, n) => (n % 50 === 7 ? 0 : 1)) };
    const T = 0.7;
    const fwd = await runForward(gpu, c, 'f32', T);
    const want = checkForward(c, T, fwd, true, 'split');
    const dlogp = rng.f32(N);
    const rec = gpu.recorder('split backward');
    logprob_gather_backward(rec, { logits: fwd.logits, ids: fwd.ids, mask: fwd.mask, lse: fwd.lse, dlogp: gpu.upload('dlogp', dlogp), dlogits: 'in-place', N, V, temperature: T });
    await rec.submit();
    const got = await gpu.readF32(fwd.logits, N * V);
    fwd.logits.destroy();
    // Compare in blocks of rows around both sides of every split so the reference stays small.
    const rows = new Set<number>([0, 1, N - 2, N - 1]);
    for (let r0 = 0; r0 < N; r0 += per) for (const r of [r0 - 1, r0, Math.min(r0 + per, N) - 1]) if (r >= 0) rows.add(r);
    rows.add(7); // a masked row
    for (const r of rows) {
      const wantRow = ref.logprob_gather_backward(logits.subarray(r * V, (r + 1) * V), [c.ids[r]], [c.mask[r]], want.lse.subarray(2 * r, 2 * r + 2), [dlogp[r]], 1, V, T);
      const g = maxAbs(wantRow);
      const gotRow = got.subarray(r * V, (r + 1) * V);
      if (!c.mask[r]) expect(gotRow.every((x) => Object.is(x, 0)), `masked row ${r}`).toBe(true);
      else expectClose(gotRow, wantRow, { rtol: 1e-4, atol: 1e-5 * g, label: `split dlogits row ${r}` });
    }
  });

  it('f16 with odd V: split windows start mid-row-alignment (elem_base ≠ 0), forward and backward', async () => {
    const gpu = await testGpu();
    // V = 151936 rows are multiples of 256 bytes, so their windows never carry an offset; an odd V does.
    const V = 65537;
    const N = Math.floor(gpu.limits.maxStorageBufferBindingSize / (V * 2)) + 9;
    // The forward cuts the f16 logits by their own windows, the backward at the rows of its f32 dlogits.
    const per16 = rowsPerWindow(gpu, bindingLimit(gpu), N, V, 2);
    const per32 = rowsPerWindow(gpu, bindingLimit(gpu), N, V);
    expect(per16, 'the test must force a split').toBeLessThan(N);
    const starts = (per: number) => Array.from({ length: Math.ceil(N / per) }, (_, i) => i * per);
    const rng = new Rng(65537);
    const h = new Uint16Array(N * V);
    for (let i = 0; i < h.length; i++) h[i] = (i & 1 ? 0x8000 : 0) | ((9 + (i % 9)) << 10) | ((i * 2654435761) >>> 22); // cheap spread of f16 values
    const c: Case = { N, V, logits: f16ToF32(h), stored: h, ids: Int32Array.from({ length: N }, () => rng.int(0, V - 1)), mask: Int32Array.from({ length: N }, (_, n) => (n % 97 === 5 ? 0 : 1)) };
    const T = 0.7;
    const fwd = await runForward(gpu, c, 'f16', T);
    const bases = starts(per16).map((r0) => rowWindow(gpu, fwd.logits, r0, Math.min(per16, N - r0), V, 2).base);
    expect(bases.some((b) => b % 2 === 1), 'a window must start in the middle of a u32 word').toBe(true);
    const want = checkForward(c, T, fwd, true, 'f16 split');
    const dlogp = rng.f32(N);
    const out = gpu.createBuffer('dlogits', N * V * 4);
    const rec = gpu.recorder('f16 split backward');
    logprob_gather_backward(rec, { logits: fwd.logits, dtype: 'f16', ids: fwd.ids, mask: fwd.mask, lse: fwd.lse, dlogp: gpu.upload('dlogp', dlogp), dlogits: out, N, V, temperature: T });
    await rec.submit();
    const rows = new Set<number>([0, 5, N - 1]);
    for (const r0 of [...starts(per16), ...starts(per32)]) for (const r of [r0 - 1, r0]) if (r >= 0) rows.add(r);
    for (const r of rows) {
      const gotRow = await gpu.readF32(out, V, r * V);
      const wantRow = ref.logprob_gather_backward(c.logits.subarray(r * V, (r + 1) * V), [c.ids[r]], [c.mask[r]], want.lse.subarray(2 * r, 2 * r + 2), [dlogp[r]], 1, V, T);
      const g = maxAbs(wantRow);
      if (!c.mask[r]) expect(gotRow.every((x) => Object.is(x, 0)), `masked row ${r}`).toBe(true);
      else expectClose(gotRow, wantRow, { rtol: 1e-4, atol: 1e-5 * g, label: `f16 split dlogits row ${r}` });
    }
    out.destroy();
    fwd.logits.destroy();
  });
});

describe('logprob_gather_backward with an entropy term', () => {
  it('the float64 twin equals central differences of Σ g·logp + Σ ge·H (temperature 0.7)', () => {
    const rng = new Rng(7);
    const N = 3;
    const V = 11;
    const T = 0.7;
    const x = Float64Array.from(rng.f32(N * V, 2));
    const ids = [2, 10, 0];
    const mask = [1, 1, 0];
    const g = [0.3, -1.1, 0.5];
    const ge = [-0.7, 0.4, 2];
    const objective = (): number => {
      const f = ref.logprob_gather_forward(x, ids, mask, N, V, T);
      let s = 0;
      for (let n = 0; n < N; n++) if (mask[n]) s += g[n] * f.logp[n] + ge[n] * f.entropy[n];
      return s;
    };
    const f = ref.logprob_gather_forward(x, ids, mask, N, V, T);
    const got = ref.logprob_gather_backward(x, ids, mask, f.lse, g, N, V, T, { dentropy: ge, entropy: f.entropy });
    const want = fdGradient(objective, x, 1e-5);
    expectClose(got, want, { rtol: 1e-6, atol: 1e-8, label: 'entropy twin vs finite differences' });
  });

  const variants: Array<{ dtype: LogitsDtype; N: number; V: number; T: number; inPlace?: boolean }> = [
    { dtype: 'f32', N: 19, V: 1001, T: 1 },
    { dtype: 'f32', N: 13, V: 2999, T: 0.7, inPlace: true },
    { dtype: 'f16', N: 11, V: 517, T: 0.9 },
  ];
  for (const { dtype, N, V, T, inPlace } of variants) {
    it(`${dtype} N=${N} V=${V} T=${T}${inPlace ? ' in place' : ''}: dlogp and dentropy together match the float64 reference`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(3 * N + V);
      const c = makeCase(rng, N, V, dtype);
      const fwd = await runForward(gpu, c, dtype, T);
      const dlogp = rng.f32(N);
      const dentropy = rng.f32(N, 3);
      const want0 = ref.logprob_gather_forward(c.logits, c.ids, c.mask, N, V, T);
      const out = inPlace ? 'in-place' : gpu.createBuffer('dlogits', N * V * 4);
      const rec = gpu.recorder('gather backward entropy test');
      logprob_gather_backward(rec, {
        logits: fwd.logits, dtype, ids: fwd.ids, mask: fwd.mask, lse: fwd.lse, dlogp: gpu.upload('dlogp', dlogp), dlogits: out, N, V, temperature: T,
        dentropy: { dentropy: gpu.upload('dentropy', dentropy), entropy: fwd.entropyBuf },
      });
      await rec.submit();
      const got = await gpu.readF32(out === 'in-place' ? fwd.logits : out, N * V);
      const want = ref.logprob_gather_backward(c.logits, c.ids, c.mask, want0.lse, dlogp, N, V, T, { dentropy, entropy: want0.entropy });
      expect(want.every(Number.isFinite)).toBe(true);
      expectClose(got, want, { rtol: 1e-4, atol: 1e-5 * maxAbs(want), label: `dlogits+entropy ${dtype} ${N}x${V}` });
      for (let n = 0; n < N; n++) if (!c.mask[n]) expect(got.subarray(n * V, (n + 1) * V).every((v) => Object.is(v, 0))).toBe(true);
    });
  }
});
