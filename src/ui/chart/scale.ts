// The arithmetic of the canvas charts (SeriesChart.tsx), pure so it is tested on its own: "nice" axis
// ticks, and the per-pixel-column extents that let one canvas draw a series of any length exactly at
// screen resolution (M4: the first, min, max and last value of the points that fall on each column draw
// the same picture as every point, so a one-token spike stays visible where a mean of bins hid it).

/** A value of series at index i, or undefined where it has none (a gap in the line). */
export type Values = (i: number) => number | undefined;

/**
 * About `count` ticks inside [lo, hi] at a step of 1, 2 or 5 × 10^k (integers only with `integer`): the
 * smallest such step ≥ (hi − lo) / count, or a smaller one while that leaves fewer than two ticks inside.
 */
export function niceTicks(lo: number, hi: number, count: number, integer = false): number[] {
  if (!(hi >= lo) || !Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (hi === lo) return [lo];
  const raw = (hi - lo) / Math.max(1, count);
  const mags = [1, 2, 5];
  let e = Math.floor(Math.log10(raw));
  let m = mags.findIndex((x) => x * 10 ** e >= raw);
  if (m < 0) [e, m] = [e + 1, 0];
  const at = (step: number) => {
    const out: number[] = [];
    for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) out.push(Number((k * step).toPrecision(15)));
    return out;
  };
  // Steps under 1e-7 of the ends' magnitude would not be evenly spaced in doubles (a tick near 2 is off by up to an
  // ulp, 2e-16: a 1e-6 share of a 2e-10 step) nor print apart: the ends stand in. Ticks keep 15 significant digits
  // (0.1·3 is 0.3, not 0.30000000000000004); 12 rounded a 2e-10 step's ticks by 2.5% of it.
  const tiny = Math.max(Math.abs(lo), Math.abs(hi)) * 1e-7;
  for (;;) {
    const step = mags[m] * 10 ** e;
    if (step <= tiny) return [lo, hi];
    const ticks = at(step);
    const smaller = m > 0 ? mags[m - 1] * 10 ** e : 5 * 10 ** (e - 1);
    if (ticks.length >= 2 || (integer && smaller < 1)) return integer && step < 1 ? at(1) : ticks;
    [e, m] = m > 0 ? [e, m - 1] : [e - 1, 2];
  }
}

/** The finite range of every series over [0, n) (null when no series has a finite value). */
export function valueRange(series: readonly Values[], n: number): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const get of series)
    for (let i = 0; i < n; i++) {
      const v = get(i);
      if (v !== undefined && Number.isFinite(v)) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
  return lo <= hi ? [lo, hi] : null;
}

/**
 * Indices [0, n) split over `cols` pixel columns (column k holds [⌊k·n/cols⌋, ⌊(k+1)·n/cols⌋)): per column
 * the first, min, max and last finite value (NaN where the column has none), as (cols, 4). Non-finite
 * values are gaps, as the lines draw them.
 */
export function columnExtents(get: Values, n: number, cols: number): Float64Array {
  const out = new Float64Array(cols * 4).fill(NaN);
  for (let k = 0; k < cols; k++) {
    const i0 = Math.floor((k * n) / cols);
    const i1 = Math.floor(((k + 1) * n) / cols);
    for (let i = i0; i < i1; i++) {
      const v = get(i);
      if (v === undefined || !Number.isFinite(v)) continue;
      const o = k * 4;
      if (Number.isNaN(out[o])) out[o] = out[o + 1] = out[o + 2] = v;
      else {
        if (v < out[o + 1]) out[o + 1] = v;
        if (v > out[o + 2]) out[o + 2] = v;
      }
      out[o + 3] = v;
    }
  }
  return out;
}
