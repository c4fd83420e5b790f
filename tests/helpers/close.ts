// Tolerance check used by every numeric test: |actual - expected| <= atol + rtol*|expected| elementwise,
// reporting the worst element (index, both values, fraction of the tolerance used) when it fails.
import { expect } from 'vitest';

export interface CloseOptions {
  atol: number;
  rtol: number;
  /** Only elements where mask[i] is truthy are compared. */
  mask?: ArrayLike<number | boolean>;
  /** Per-element atol (e.g. scaled by a row's largest logit); overrides atol where given. */
  atolAt?: (i: number) => number;
  label?: string;
}

export interface CloseReport {
  worst: number; // largest |diff| / tolerance seen (<= 1 passes)
  worstIndex: number;
  maxAbs: number;
  compared: number;
}

export function closeReport(actual: ArrayLike<number>, expected: ArrayLike<number>, o: CloseOptions): CloseReport {
  let worst = 0;
  let worstIndex = -1;
  let maxAbs = 0;
  let compared = 0;
  for (let i = 0; i < expected.length; i++) {
    if (o.mask && !o.mask[i]) continue;
    compared++;
    const a = actual[i];
    const e = expected[i];
    if (Object.is(a, e) || (a === e)) continue; // covers equal infinities
    const diff = Math.abs(a - e);
    const tol = (o.atolAt ? o.atolAt(i) : o.atol) + o.rtol * Math.abs(e);
    const frac = Number.isFinite(diff) ? diff / tol : Infinity;
    if (!(frac <= worst)) {
      worst = Number.isNaN(frac) ? Infinity : frac;
      worstIndex = i;
    }
    if (Number.isFinite(diff)) maxAbs = Math.max(maxAbs, diff);
    else maxAbs = Infinity;
  }
  return { worst, worstIndex, maxAbs, compared };
}

export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, o: CloseOptions): CloseReport {
  expect(actual.length, `${o.label ?? 'array'}: length`).toBe(expected.length);
  const r = closeReport(actual, expected, o);
  const at = r.worstIndex;
  expect(
    r.worst,
    `${o.label ?? 'array'}: worst element ${at}: actual ${actual[at]} vs expected ${expected[at]} uses ${r.worst.toFixed(3)} of the tolerance (atol ${o.atol}, rtol ${o.rtol}); max |diff| ${r.maxAbs}`,
  ).toBeLessThanOrEqual(1);
  expect(r.compared, `${o.label ?? 'array'}: compared nothing`).toBeGreaterThan(0);
  return r;
}

/** max |a[i]| over [lo, hi): the magnitude tolerances are scaled by. */
export function maxAbs(a: ArrayLike<number>, lo = 0, hi = a.length): number {
  let m = 0;
  for (let i = lo; i < hi; i++) m = Math.max(m, Math.abs(a[i]));
  return m;
}
