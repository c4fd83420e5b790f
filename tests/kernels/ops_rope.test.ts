// rope_forward / rope_backward (GPU) against their float64 twins (one tensor, and queries with keys in one
// dispatch): head dims 8..128, theta 1e4 and 1e6,
// positions up to 4096 (where an f32 angle p·inv_freq would already be off by ~2e-4 rad), the pad
// position 1, 0 and a negative position; and the twin's backward against finite differences.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { closeReport, expectClose } from '../helpers/close.ts';
import { dot, fdGradient } from '../helpers/fd.ts';
import { rope_backward as ropeBackRef, rope_forward as ropeRef } from '../../src/oracle/rope.ts';
import { rope_backward, rope_forward } from '../../src/kernels/rope.ts';

// Per element: the shader's angle is within ~2e-7 rad of the exact one (fixed-point range reduction, see
// the shader), f32 cos/sin add a few ulps, and x1·c − x2·s rounds twice: |err| ≲ 5e-7·(|x1| + |x2|).
// 2e-6·(|x1| + |x2|) leaves ×4 headroom and still rejects an f32 angle computed as p·inv_freq (checked below).
function tolerance(x: Float32Array, D: number) {
  const half = D / 2;
  return (j: number) => {
    const i = j % D;
    const pair = i < half ? j + half : j - half;
    return 2e-6 * (Math.abs(x[j]) + Math.abs(x[pair])) + 1e-30;
  };
}

function positions(rng: Rng, N: number): Int32Array {
  const pos = Int32Array.from({ length: N }, () => rng.int(0, 4096));
  pos[0] = 0;
  pos[1] = 1; // HF generate's pad position
  pos[2] = 4096;
  pos[3] = 4095;
  pos[4] = -7;
  return pos;
}

describe('rope', () => {
  for (const theta of [1e4, 1e6]) {
    it(`forward and backward match the float64 twin, theta ${theta}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(theta === 1e4 ? 41 : 42);
      let worst = 0;
      for (const [N, H, D] of [[37, 3, 8], [19, 2, 16], [23, 3, 64], [9, 2, 128]]) {
        const pos = positions(rng, N);
        const x = rng.f32(N * H * D);
        x[5] = 1e4;
        const posBuf = gpu.upload('pos', pos);
        for (const dir of ['forward', 'backward'] as const) {
          const buf = gpu.upload('x', x);
          const rec = gpu.recorder('rope test');
          if (dir === 'forward') rope_forward(rec, { x: buf, positionIds: posBuf, N, H, D, theta });
          else rope_backward(rec, { dx: buf, positionIds: posBuf, N, H, D, theta });
          await rec.submit();
          const got = await gpu.readF32(buf, N * H * D);
          const want = (dir === 'forward' ? ropeRef : ropeBackRef)(x, pos, N, H, D, theta);
          const r = expectClose(got, want, { atol: 0, rtol: 0, atolAt: tolerance(x, D), label: `rope ${dir} N=${N} H=${H} D=${D}` });
          worst = Math.max(worst, r.worst);
        }
      }
      console.log(`rope theta ${theta}: worst ${worst.toFixed(3)} of tolerance`);
    });
  }

  it('rotates the queries and the keys in one dispatch (GQA: Hk < H): each as the twin, bitwise as two dispatches', async () => {
    const gpu = await testGpu();
    const rng = new Rng(44);
    for (const [N, H, Hk, D] of [[37, 3, 1, 8], [21, 14, 2, 64], [9, 2, 2, 128]]) {
      const pos = positions(rng, N);
      const [q, k] = [rng.f32(N * H * D), rng.f32(N * Hk * D)];
      const posBuf = gpu.upload('pos', pos);
      const shape = { positionIds: posBuf, N, D, theta: 1e6 };
      for (const dir of ['forward', 'backward'] as const) {
        const [q1, k1, q2, k2] = [gpu.upload('q', q), gpu.upload('k', k), gpu.upload('q', q), gpu.upload('k', k)];
        const one = gpu.recorder('rope q and k');
        if (dir === 'forward') rope_forward(one, { ...shape, x: q1, H, k: k1, Hk });
        else rope_backward(one, { ...shape, dx: q1, H, dk: k1, Hk });
        expect(one.kernels).toHaveLength(1);
        const two = gpu.recorder('rope q, then k');
        if (dir === 'forward') [[q2, H], [k2, Hk]].forEach(([x, h]) => rope_forward(two, { ...shape, x: x as GPUBuffer, H: h as number }));
        else [[q2, H], [k2, Hk]].forEach(([x, h]) => rope_backward(two, { ...shape, dx: x as GPUBuffer, H: h as number }));
        await one.submit();
        await two.submit();
        const [gq, gk] = [await gpu.readF32(q1, N * H * D), await gpu.readF32(k1, N * Hk * D)];
        expect(gq).toEqual(await gpu.readF32(q2, N * H * D));
        expect(gk).toEqual(await gpu.readF32(k2, N * Hk * D));
        const twin = dir === 'forward' ? ropeRef : ropeBackRef;
        expectClose(gq, twin(q, pos, N, H, D, 1e6), { atol: 0, rtol: 0, atolAt: tolerance(q, D), label: `rope ${dir} q N=${N} H=${H}` });
        expectClose(gk, twin(k, pos, N, Hk, D, 1e6), { atol: 0, rtol: 0, atolAt: tolerance(k, D), label: `rope ${dir} k N=${N} Hk=${Hk}` });
      }
    }
  });

  it('the tolerance rejects a plain f32 angle (p·inv_freq rounded to f32) at large positions', () => {
    const rng = new Rng(43);
    const [N, H, D, theta] = [64, 1, 8, 1e6];
    const pos = Int32Array.from({ length: N }, () => rng.int(3000, 4096));
    const x = rng.f32(N * H * D);
    const naive = new Float64Array(N * H * D);
    for (let n = 0; n < N; n++) {
      for (let i = 0; i < D / 2; i++) {
        const a = Math.fround(pos[n] * Math.fround(Math.pow(theta, (-2 * i) / D)));
        const [c, s] = [Math.cos(a), Math.sin(a)];
        const j = n * D + i;
        naive[j] = x[j] * c - x[j + D / 2] * s;
        naive[j + D / 2] = x[j + D / 2] * c + x[j] * s;
      }
    }
    const r = closeReport(naive, ropeRef(x, pos, N, H, D, theta), { atol: 0, rtol: 0, atolAt: tolerance(x, D) });
    expect(r.worst).toBeGreaterThan(1);
  });

  it('float64 twin: backward matches central finite differences of the forward', () => {
    const rng = new Rng(44);
    const [N, H, D, theta] = [4, 2, 8, 1e4];
    const pos = positions(rng, N + 1).subarray(0, N);
    const x = Float64Array.from(rng.f32(N * H * D));
    const g = rng.f32(N * H * D); // L = Σ g ⊙ rope(x)
    const L = () => dot(g, ropeRef(x, pos, N, H, D, theta));
    const dx = ropeBackRef(g, pos, N, H, D, theta);
    const h = 1e-5;
    const fd = fdGradient(L, x, h);
    // L is linear in x: central differences are exact up to float64 rounding.
    expectClose(fd, dx, { atol: 1e-9, rtol: 1e-8, label: 'fd rope' });
  });
});
