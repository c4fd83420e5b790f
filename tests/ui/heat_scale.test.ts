// The heat scale (src/view/heat_scale.ts) on extreme inputs, each expectation worked out by hand: all-equal
// values, NaN and ±inf, values near ±Number.MAX_VALUE, one outlier among small values (which a min–max range
// lets blank every other cell, and p1–p99 clipping does not), fixed and reversed ranges, symmetric ranges
// around 0 and around 1 on a log scale, and a log scale with values ≤ 0. Also: the mask-factor legend's
// colours stand out from the panel (the "completion" swatch, rgb(20, 24, 38), did not).
import { describe, expect, it } from 'vitest';
import { DEFAULT_SCALE, computeScale, quantile, scalePosition, scaleValue, type MetricKind, type ScaleSettings } from '../../src/view/heat_scale.ts';
import { FACTOR_COLORS } from '../../src/ui/grid/heat.ts';
import { contrastRatio } from '../../src/view/colors.ts';
import { MASK_FACTORS } from '../../src/store/vocabulary.ts';

const SEQ: MetricKind = { center: null, positive: false };
const SIGNED: MetricKind = { center: 0, positive: false };
const RATIO: MetricKind = { center: 1, positive: true };
const POSITIVE: MetricKind = { center: null, positive: true };
const with_ = (p: Partial<ScaleSettings>): ScaleSettings => ({ ...DEFAULT_SCALE, ...p });

describe('quantile', () => {
  it('interpolates linearly between order statistics (numpy default)', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4], 0.25)).toBe(1.75);
    expect(quantile([1, 2, 3, 4], 1)).toBe(4);
    expect(quantile([7], 0.99)).toBe(7);
    expect(quantile([], 0.5)).toBeNaN();
  });
});

describe('computeScale', () => {
  it('gives all-equal values a range around them: they sit mid-ramp, not at one end', () => {
    for (const v of [2, 0, -3]) {
      const s = computeScale([v, v, v], SEQ, with_({ range: 'minmax' }));
      expect(s.lo).toBeLessThan(v);
      expect(s.hi).toBeGreaterThan(v);
      expect(scalePosition(s, v)).toBeCloseTo(0.5, 9);
    }
    // Signed, all 0: the centre colour (an all-zero heat is not saturated blue).
    const zero = computeScale([0, 0], SIGNED, DEFAULT_SCALE);
    expect(zero.hi).toBeGreaterThan(0);
    expect(scalePosition(zero, 0)).toBe(0.5);
    // Signed, all 2: symmetric around 0, so 2 is the top end of [−2, 2].
    const two = computeScale([2, 2], SIGNED, DEFAULT_SCALE);
    expect([two.lo, two.hi, scalePosition(two, 2)]).toEqual([-2, 2, 1]);
  });

  it('leaves NaN and ±inf out of the range; they have no ramp position', () => {
    const s = computeScale([NaN, Infinity, -Infinity, 1, 3], SEQ, with_({ range: 'minmax' }));
    expect([s.lo, s.hi]).toEqual([1, 3]);
    expect(scalePosition(s, NaN)).toBeNaN();
    expect(scalePosition(s, Infinity)).toBeNaN();
    expect(scalePosition(s, -Infinity)).toBeNaN();
    expect(scalePosition(s, 2)).toBe(0.5);
    // Nothing finite at all: a finite default range, no NaN ends.
    const none = computeScale([NaN, Infinity], SEQ, DEFAULT_SCALE);
    expect([none.lo, none.hi]).toEqual([0, 1]);
  });

  it('handles values near ±Number.MAX_VALUE without an infinite width', () => {
    const s = computeScale([-1e308, 0, 1e308], SIGNED, with_({ range: 'minmax' }));
    expect([s.lo, s.hi]).toEqual([-1e308, 1e308]);
    expect(scalePosition(s, 0)).toBe(0.5);
    expect(scalePosition(s, 1e308)).toBe(1);
    expect(scalePosition(s, -5e307)).toBeCloseTo(0.25, 12);
  });

  it('clips one outlier at p1–p99 (auto on a signed metric): the other values use the whole ramp again', () => {
    // 100 values evenly from −0.1 to 0.1, and one 1000. Sorted, n = 101: p1 is element 1 (h = 100 · 0.01),
    // p99 element 99 = 0.1; symmetric around 0 → [−0.1, 0.1].
    const values = [...Array.from({ length: 100 }, (_, i) => -0.1 + (0.2 * i) / 99), 1000];
    const minmax = computeScale(values, SIGNED, with_({ range: 'minmax' }));
    // Min–max: the range is ±1000 and 0.1 lands 0.00005 from the middle: blank.
    expect(scalePosition(minmax, 0.1) - 0.5).toBeLessThan(1e-4);
    const auto = computeScale(values, SIGNED, DEFAULT_SCALE);
    expect(auto.mode).toBe('percentile');
    expect(auto.lo).toBeCloseTo(-0.1, 12);
    expect(auto.hi).toBeCloseTo(0.1, 12);
    expect(scalePosition(auto, 0.1)).toBeCloseTo(1, 9);
    expect(scalePosition(auto, -0.1)).toBeCloseTo(0, 9);
    expect(scalePosition(auto, 0.05)).toBeCloseTo(0.75, 9);
    expect(scalePosition(auto, 1000)).toBe(1); // clamped to the end colour
    // Auto is min–max on a sequential metric.
    expect(computeScale(values, SEQ, DEFAULT_SCALE).mode).toBe('minmax');
    // p5–p95 by hand: h = 100 · 0.05 = 5 → element 5; h = 95 → element 95.
    const p5 = computeScale(values, SEQ, with_({ range: 'percentile', clip: 5 }));
    expect(p5.lo).toBeCloseTo(-0.1 + (0.2 * 5) / 99, 12);
    expect(p5.hi).toBeCloseTo(-0.1 + (0.2 * 95) / 99, 12);
  });

  it('takes a fixed range as entered (reversed ends swapped) and clamps values outside it', () => {
    const s = computeScale([5, 6, 7], SEQ, with_({ range: 'fixed', lo: 2, hi: -2 }));
    expect([s.lo, s.hi, s.mode]).toEqual([-2, 2, 'fixed']);
    expect(scalePosition(s, 1)).toBe(0.75);
    expect(scalePosition(s, 7)).toBe(1);
    expect(scalePosition(s, -9)).toBe(0);
  });

  it('makes a range symmetric around 0 on request, and splits a diverging ramp at the centre when it is not', () => {
    const sym = computeScale([-1, 3], SEQ, with_({ range: 'minmax', symmetric: true }));
    expect([sym.lo, sym.hi, sym.center]).toEqual([-3, 3, 0]);
    const asym = computeScale([-1, 3], SIGNED, with_({ range: 'minmax', symmetric: false }));
    expect([asym.lo, asym.hi]).toEqual([-1, 3]);
    expect(scalePosition(asym, -1)).toBe(0);
    expect(scalePosition(asym, 0)).toBe(0.5);
    expect(scalePosition(asym, 1.5)).toBe(0.75);
    expect(scalePosition(asym, -0.5)).toBe(0.25);
  });

  it('log scale: decades evenly spaced, values ≤ 0 left out of the range and at its low end; symmetric around 1 in ratio', () => {
    const s = computeScale([0, -1, 0.01, 0.1, 1, 10, 100], POSITIVE, with_({ range: 'minmax', log: true }));
    expect(s.log).toBe(true);
    expect(s.lo).toBeCloseTo(0.01, 12);
    expect(s.hi).toBeCloseTo(100, 12);
    expect(scalePosition(s, 1)).toBeCloseTo(0.5, 12);
    expect(scalePosition(s, 10)).toBeCloseTo(0.75, 12);
    expect(scalePosition(s, 0)).toBe(0);
    expect(scaleValue(s, 0.25)).toBeCloseTo(0.1, 12);
    // A ratio from 0.5 to 1.5, log-symmetric around 1: ln 2 > ln 1.5 sets both ends, [0.5, 2].
    const r = computeScale([0.5, 1.5], RATIO, with_({ range: 'minmax', log: true }));
    expect(r.lo).toBeCloseTo(0.5, 12);
    expect(r.hi).toBeCloseTo(2, 12);
    expect(scalePosition(r, 1)).toBeCloseTo(0.5, 12);
    expect(scalePosition(r, 2)).toBeCloseTo(1, 12);
    // Log is ignored on a metric that can be negative.
    expect(computeScale([-1, 1], SIGNED, with_({ log: true })).log).toBe(false);
  });

  it('extends a min–max log-prob range to its ceiling 0, but not a percentile one', () => {
    const kind: MetricKind = { center: null, positive: false, ceiling: 0 };
    expect(computeScale([-4, -2], kind, with_({ range: 'minmax' })).hi).toBe(0);
    expect(computeScale([-4, -2], kind, with_({ range: 'percentile', clip: 0 })).hi).toBe(-2);
  });

  it('inverts: scaleValue(scalePosition(v)) = v inside the range', () => {
    const s = computeScale([-2, 5], SIGNED, with_({ range: 'minmax', symmetric: false }));
    for (const v of [-2, -1.3, 0, 0.7, 5]) expect(scaleValue(s, scalePosition(s, v))).toBeCloseTo(v, 12);
  });
});

describe('mask-factor colours', () => {
  const hex = (rgb: string) => '#' + rgb.match(/\d+/g)!.map((x) => Number(x).toString(16).padStart(2, '0')).join('');
  it('has one colour per factor, and each factor that removes a token stands out from the panel (≥ 3:1, WCAG non-text)', () => {
    expect(FACTOR_COLORS.length).toBe(MASK_FACTORS.length);
    MASK_FACTORS.forEach((f, k) => {
      if (k === 0) return; // "kept": the neutral cell
      expect(contrastRatio(hex(FACTOR_COLORS[k]), '#161b22'), f).toBeGreaterThanOrEqual(3);
    });
  });
});
