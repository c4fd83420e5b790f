// The canvas charts' arithmetic (src/ui/chart/scale.ts) against brute force: per-pixel-column extents
// of series of any length (with gaps and non-finite values), "nice" ticks and the value range.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { columnExtents, niceTicks, valueRange } from '../../src/ui/chart/scale.ts';

const value = fc.oneof(
  { weight: 8, arbitrary: fc.double({ min: -1e6, max: 1e6, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(undefined, NaN, Infinity, -Infinity, 0, -0, 1e-300) },
);

describe('columnExtents', () => {
  it('gives each column the first, min, max and last finite value of its indices, and the columns cover every index once', () => {
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 700 }), fc.integer({ min: 1, max: 300 }), (vals, colsWanted) => {
        const n = vals.length;
        const cols = Math.min(colsWanted, n);
        const ext = columnExtents((i) => vals[i], n, cols);
        expect(ext.length).toBe(cols * 4);
        let covered = 0;
        for (let k = 0; k < cols; k++) {
          // Brute force over the column's indices [⌊k·n/cols⌋, ⌊(k+1)·n/cols⌋).
          const mine = vals.filter((_, i) => i >= Math.floor((k * n) / cols) && i < Math.floor(((k + 1) * n) / cols));
          covered += mine.length;
          const finite = mine.filter((v): v is number => v !== undefined && Number.isFinite(v));
          const got = Array.from(ext.subarray(k * 4, k * 4 + 4));
          // A chart draws −0 where 0 is: toEqual tells them apart (Object.is), and a column of [0, −0] has either as its min.
          const plain = (xs: number[]) => xs.map((x) => (x === 0 ? 0 : x));
          if (!finite.length) expect(got.every(Number.isNaN)).toBe(true);
          else expect(plain(got)).toEqual(plain([finite[0], Math.min(...finite), Math.max(...finite), finite[finite.length - 1]]));
        }
        expect(covered).toBe(n);
      }),
      { examples: [[[0, -0], 1]] },
    );
  });

  it('keeps a single spike among a million points', () => {
    const n = 1_000_003;
    const ext = columnExtents((i) => (i === 777_777 ? 50 : -1), n, 997);
    const k = Math.floor((777_777 * 997) / n);
    expect(ext[k * 4 + 2]).toBe(50);
    expect(Math.max(...Array.from({ length: 997 }, (_, c) => (c === k ? -Infinity : ext[c * 4 + 2])))).toBe(-1);
  });
});

describe('niceTicks', () => {
  it('are evenly spaced at 1, 2 or 5 × 10^k, inside [lo, hi], about as many as asked', () => {
    fc.assert(
      fc.property(fc.double({ min: -1e9, max: 1e9, noNaN: true }), fc.double({ min: 1e-9, max: 1e9, noNaN: true }), fc.integer({ min: 1, max: 20 }), (lo, width, count) => {
        const hi = lo + width;
        fc.pre(hi > lo && (hi - lo) / Math.max(Math.abs(lo), Math.abs(hi)) > 1e-9);
        const t = niceTicks(lo, hi, count);
        expect(t.length).toBeGreaterThanOrEqual(2);
        const nice = (d: number) => {
          const mant = d / 10 ** Math.floor(Math.log10(d) + 1e-12);
          return [1, 2, 5, 10].some((m) => Math.abs(mant - m) < 1e-6 * m);
        };
        if (t.length === 2 && t[0] === lo && t[1] === hi && !nice(hi - lo)) {
          // The ends stand in only where every nice step is under 1e-7 of their magnitude (niceTicks' `tiny`).
          expect(hi - lo).toBeLessThanOrEqual(2.5e-7 * Math.max(count, 2) * Math.max(Math.abs(lo), Math.abs(hi)));
          return;
        }
        // About `count`; where the step for it leaves fewer than 2 ticks (a range under 2 steps), the next nice step down
        // (≥ 1/2.5 of it) gives at most 5: [0.55, 1.45] asked for 1 has 0.6 … 1.4.
        expect(t.length).toBeLessThanOrEqual(Math.max(2 * count + 2, 5));
        const step = (hi - lo) / count;
        for (const v of t) {
          expect(v).toBeGreaterThanOrEqual(lo - Math.abs(step) * 1e-6);
          expect(v).toBeLessThanOrEqual(hi + Math.abs(step) * 1e-6);
        }
        if (t.length >= 2) {
          const d = t[1] - t[0];
          expect(nice(d)).toBe(true);
          for (let i = 2; i < t.length; i++) expect(Math.abs(t[i] - t[i - 1] - d)).toBeLessThanOrEqual(d * 1e-6 + Math.abs(t[i]) * 1e-12);
        }
      }),
      // Steps near 1e-10 of the ends' magnitude (ticks to 12 digits were off by 2.5% of one), and near 1e-7.
      // [0.55, 0.9, 1]: one tick asked, five given (its step down to 0.2).
      { examples: [[1.9703322804000003, 1.9703322307051967e-9, 10], [1.9683792118000003, 1.9683791263602757e-9, 10], [3.25, 3.3e-6, 20], [-7.5e8, 1.51e3, 13], [0.55, 0.9, 1]] },
    );
  });

  it('are integers for an index axis, never a step below 1', () => {
    expect(niceTicks(0, 3, 10, true)).toEqual([0, 1, 2, 3]);
    expect(niceTicks(0, 2047, 8, true)).toEqual([0, 500, 1000, 1500, 2000]);
    expect(niceTicks(0, 0, 5, true)).toEqual([0]);
    expect(niceTicks(0, 1, 1, true)).toEqual([0, 1]);
    expect(niceTicks(0.2, 0.9, 1)).toEqual([0.2, 0.4, 0.6, 0.8]);
  });

  it('end, with distinct values, on a range at the last digits of its ends', () => {
    expect(niceTicks(1e9, 1e9 + 2.4e-7, 4)).toEqual([1e9, 1e9 + 2.4e-7]);
  });

  it('give nothing for an empty or non-finite range', () => {
    expect(niceTicks(1, 0, 4)).toEqual([]);
    expect(niceTicks(0, Infinity, 4)).toEqual([]);
    expect(niceTicks(NaN, 1, 4)).toEqual([]);
  });
});

describe('valueRange', () => {
  it('is the min and max of the finite values of every series, or null', () => {
    expect(valueRange([(i) => [3, NaN, -2][i], (i) => [undefined, Infinity, 7][i]], 3)).toEqual([-2, 7]);
    expect(valueRange([() => NaN, () => undefined], 5)).toBeNull();
    expect(valueRange([], 5)).toBeNull();
  });
});
