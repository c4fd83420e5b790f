// embedding_forward / embedding_backward (GPU) against their float64 twins: odd sizes, repeated ids (long
// chains in the deterministic scatter-add), out-of-range ids and positions (clamped, never read out of
// bounds), GPT-2 learned positions, accumulation into a tied gradient, row windows past a lowered
// binding limit; and the twin's backward against central finite differences of its forward.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { expectClose } from '../helpers/close.ts';
import { dot, fdGradient } from '../helpers/fd.ts';
import { embedding_backward as embBackRef, embedding_forward as embRef } from '../../src/oracle/embedding.ts';
import { embedding_backward, embedding_forward } from '../../src/kernels/embedding.ts';

const U = 2 ** -24;

function inputs(rng: Rng, N: number, V: number, P: number, distinct: number) {
  // Ids drawn from a few values (repeats), plus out-of-range ids and positions at the ends.
  const pool = Array.from({ length: distinct }, () => rng.int(0, V - 1));
  const ids = Int32Array.from({ length: N }, () => pool[rng.int(0, distinct - 1)]);
  ids[0] = -3;
  ids[N - 1] = V + 5;
  const positionIds = Int32Array.from({ length: N }, (_, n) => n % P);
  positionIds[1] = -1;
  positionIds[2] = P + 7;
  return { ids, positionIds };
}

describe('embedding_forward', () => {
  for (const bindingLimit of [undefined, 2048]) {
    it(`gathers wte (+ wpe) rows, clamping bad ids${bindingLimit ? ', in row windows' : ''}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(31);
      const [N, C, V, P] = [77, 37, 53, 19];
      const { ids, positionIds } = inputs(rng, N, V, P, 60);
      const wte = rng.f32(V * C, 3);
      const wpe = rng.f32(P * C);
      for (const withWpe of [false, true]) {
        const out = gpu.createBuffer('out', N * C * 4);
        const rec = gpu.recorder('embedding test');
        embedding_forward(rec, {
          out,
          ids: gpu.upload('ids', ids),
          wte: gpu.upload('wte', wte),
          wpe: withWpe ? gpu.upload('wpe', wpe) : undefined,
          positionIds: withWpe ? gpu.upload('pos', positionIds) : undefined,
          N,
          C,
          V,
          P: withWpe ? P : undefined,
          bindingLimit,
        });
        if (bindingLimit) expect(rec.kernels.length).toBeGreaterThan(1);
        await rec.submit();
        const got = await gpu.readF32(out, N * C);
        const want = embRef(ids, wte, withWpe ? wpe : null, withWpe ? positionIds : null, N, C, V, P);
        // A gather is exact; adding wpe rounds once in f32 (relative error ≤ u = 2⁻²⁴).
        expectClose(got, want, { atol: 0, rtol: withWpe ? 1.01 * U : 0, label: `embedding forward wpe=${withWpe}` });
      }
    });
  }
});

describe('embedding_backward', () => {
  for (const bindingLimit of [undefined, 2048]) {
    it(`scatter-adds dout into dwte and dwpe, overwrite and accumulate${bindingLimit ? ', in row windows' : ''}`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(32);
      let worst = 0;
      for (const [N, C, V, P, distinct] of [[301, 37, 53, 19, 7], [5, 3, 11, 2, 5], [1, 9, 4, 1, 1]]) {
        const { ids, positionIds } = inputs(rng, N, V, P, distinct);
        const dout = rng.f32(N * C);
        const want = embBackRef(dout, ids, positionIds, N, C, V, P);
        const S = embBackRef(Float64Array.from(dout, Math.abs), ids, positionIds, N, C, V, P);
        for (const accumulate of [false, true]) {
          const prevWte = rng.f32(V * C);
          const prevWpe = rng.f32(P * C);
          const dwte = gpu.upload('dwte', prevWte);
          const dwpe = gpu.upload('dwpe', prevWpe);
          const rec = gpu.recorder('embedding backward test');
          embedding_backward(rec, {
            dwte,
            dwpe,
            dout: gpu.upload('dout', dout),
            ids: gpu.upload('ids', ids),
            positionIds: gpu.upload('pos', positionIds),
            N,
            C,
            V,
            P,
            accumulate,
            bindingLimit,
          });
          if (bindingLimit && V > 12) expect(rec.kernels.filter((k) => k === 'embedding_backward:dwte').length).toBeGreaterThan(1);
          await rec.submit();
          for (const [buf, exp, s, prev, name] of [
            [dwte, want.dwte, S.dwte, prevWte, 'dwte'],
            [dwpe, want.dwpe, S.dwpe, prevWpe, 'dwpe'],
          ] as Array<[GPUBuffer, Float64Array, Float64Array, Float32Array, string]>) {
            const e = accumulate ? exp.map((v, i) => v + prev[i]) : exp;
            const got = await gpu.readF32(buf, e.length);
            // A sequential f32 sum of up to N rows (+ the previous value): each addition rounds by at most
            // u times the running sum, bounded by S = Σ|terms|; errors grow like √N, ×4 headroom.
            const r = expectClose(got, e, {
              atol: 0,
              rtol: 0,
              atolAt: (i) => 4 * U * Math.sqrt(N + 1) * (s[i] + (accumulate ? Math.abs(prev[i]) : 0)) + 1e-30,
              label: `${name} N=${N} acc=${accumulate}`,
            });
            worst = Math.max(worst, r.worst);
          }
        }
      }
      console.log(`embedding_backward${bindingLimit ? ' split' : ''}: worst ${worst.toFixed(3)} of tolerance`);
    });
  }

  it('float64 twin: backward matches central finite differences of the forward', () => {
    const rng = new Rng(33);
    const [N, C, V, P] = [9, 4, 6, 5];
    const { ids, positionIds } = inputs(rng, N, V, P, 3);
    const wte = Float64Array.from(rng.f32(V * C));
    const wpe = Float64Array.from(rng.f32(P * C));
    const g = rng.f32(N * C); // L = Σ g ⊙ out
    const L = () => dot(g, embRef(ids, wte, wpe, positionIds, N, C, V, P));
    const grads = embBackRef(g, ids, positionIds, N, C, V, P);
    const h = 1e-5;
    for (const [x, dx] of [[wte, grads.dwte], [wpe, grads.dwpe]] as Array<[Float64Array, Float64Array]>) {
      const fd = fdGradient(L, x, h);
      // L is linear in the tables: central differences are exact up to float64 rounding.
      expectClose(fd, dx, { atol: 1e-9, rtol: 1e-8, label: 'fd embedding' });
    }
  });
});
