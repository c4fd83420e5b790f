// The heat overlays' colour scale, as pure arithmetic: the range a metric's values are shown over (auto,
// percentile-clipped, min–max, or a range the user enters; optionally symmetric around the metric's centre;
// linear or log) and where a value falls on the colour ramp. One module, so the grid, its legend and the
// tests agree; NaN / ±inf never set a range (they are painted magenta elsewhere), and under percentile
// clipping one outlier no longer stretches the range until every other cell looks blank (issue 24).

/** How the range is chosen: auto = percentile for signed (centred) metrics, min–max for the others. */
export const RANGE_MODES = ['auto', 'percentile', 'minmax', 'fixed'] as const;
export type RangeMode = (typeof RANGE_MODES)[number];

export interface ScaleSettings {
  range: RangeMode;
  /** Percentile clipping p: the range is [p-th, (100 − p)-th percentile] (percentile mode, and auto on signed metrics). */
  clip: number;
  /** The range the user entered (fixed mode). */
  lo: number;
  hi: number;
  /** Symmetric around the centre; null: the metric's default (symmetric when it has a centre). */
  symmetric: boolean | null;
  /** Log scale (positive metrics only: values ≤ 0 fall below the range). */
  log: boolean;
}

export const DEFAULT_SCALE: ScaleSettings = { range: 'auto', clip: 1, lo: -1, hi: 1, symmetric: null, log: false };

/** What the scale needs to know about a metric. */
export interface MetricKind {
  /** The value diverging colours split at (0 for differences, 1 for ratios); null: sequential. */
  center: number | null;
  /** Values are > 0 (a log scale is offered). */
  positive: boolean;
  /** A bound the values never pass (log-probs ≤ 0): a min–max range's top end reaches it (the bright end = certain). */
  ceiling?: number;
}

/** The range a heat is shown over; `center` non-null: diverging (lo → blue, centre → grey, hi → red). */
export interface Scale {
  lo: number;
  hi: number;
  center: number | null;
  log: boolean;
  /** The resolved mode and, for percentile, its clip: what the legend says. */
  mode: Exclude<RangeMode, 'auto'>;
  clip: number;
}

/** Linear-interpolated quantile of sorted values, q ∈ [0, 1] (numpy's default, "type 7"). */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const h = (n - 1) * Math.min(1, Math.max(0, q));
  const i = Math.floor(h);
  return i + 1 < n ? sorted[i] + (h - i) * (sorted[i + 1] - sorted[i]) : sorted[n - 1];
}

export const resolvedMode = (s: ScaleSettings, kind: MetricKind): Scale['mode'] => (s.range === 'auto' ? (kind.center !== null ? 'percentile' : 'minmax') : s.range);

/**
 * The scale of `values` (any numbers; non-finite ones, and ≤ 0 ones under log, are left out) for a metric of
 * `kind` under the user's settings. Never returns lo = hi: a constant heat gets a range around its value, so
 * every cell shows the ramp's middle rather than one end.
 */
export function computeScale(values: ArrayLike<number>, kind: MetricKind, s: ScaleSettings): Scale {
  const log = s.log && kind.positive;
  const mode = resolvedMode(s, kind);
  const kept: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v) && (!log || v > 0)) kept.push(v);
  }
  let lo: number;
  let hi: number;
  if (mode === 'fixed') {
    [lo, hi] = s.lo <= s.hi ? [s.lo, s.hi] : [s.hi, s.lo];
    // A log scale cannot start at or below 0: it starts at the smallest value shown instead.
    if (log && !(lo > 0)) lo = kept.reduce((m, v) => Math.min(m, v), hi > 0 ? hi / 10 : 1);
  } else if (kept.length === 0) {
    [lo, hi] = log ? [0.1, 1] : [0, 1];
  } else if (mode === 'percentile') {
    const sorted = Float64Array.from(kept).sort();
    const p = Math.min(49, Math.max(0, s.clip)) / 100;
    [lo, hi] = [quantile(sorted, p), quantile(sorted, 1 - p)];
  } else {
    [lo, hi] = [Infinity, -Infinity];
    for (const v of kept) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
  }
  // Min–max only: a percentile range is the user asking for the values' own spread.
  if (mode === 'minmax' && kind.ceiling !== undefined && !log) hi = Math.max(hi, kind.ceiling);
  const symmetric = s.symmetric ?? kind.center !== null;
  // Symmetric needs a centre: the metric's, else 0 (1 on a log scale, where 0 is not on the axis).
  const center = kind.center ?? (symmetric ? (log ? 1 : 0) : null);
  if (symmetric && center !== null) {
    if (log) {
      const m = Math.max(Math.abs(Math.log(lo / center)), Math.abs(Math.log(hi / center)));
      [lo, hi] = [center * Math.exp(-m), center * Math.exp(m)];
    } else {
      const m = Math.max(Math.abs(lo - center), Math.abs(hi - center));
      [lo, hi] = [center - m, center + m];
    }
  }
  if (!(hi > lo)) {
    // All values equal (or a fixed range of width 0): widen around the value so it maps to the middle.
    const d = log ? 1 + 1e-6 : Math.max(Math.abs(lo) * 1e-6, 1e-12);
    [lo, hi] = log ? [lo / d, hi * d] : [lo - d, hi + d];
  }
  return { lo, hi, center, log, mode, clip: s.clip };
}

/**
 * Where v falls on the colour ramp, in [0, 1]; NaN for a non-finite v. Diverging scales put the centre at 0.5
 * and each side on its own half (so an asymmetric range still splits its colours at the centre).
 */
export function scalePosition(s: Scale, v: number): number {
  if (!Number.isFinite(v)) return NaN;
  const f = s.log ? (x: number) => Math.log(Math.max(x, Number.MIN_VALUE)) : (x: number) => x;
  // Halved before subtracting: a range of ±1e308 has a width past Number.MAX_VALUE.
  const at = (a: number, b: number) => Math.min(1, Math.max(0, (f(v) / 2 - f(a) / 2) / (f(b) / 2 - f(a) / 2 || 1)));
  if (s.center === null || !(s.center > s.lo && s.center < s.hi)) return at(s.lo, s.hi);
  return v < s.center ? 0.5 * at(s.lo, s.center) : 0.5 + 0.5 * at(s.center, s.hi);
}

/** The value at ramp position t (the inverse of scalePosition): the legend's tick values. */
export function scaleValue(s: Scale, t: number): number {
  const f = s.log ? Math.log : (x: number) => x;
  const g = s.log ? Math.exp : (x: number) => x;
  const lerp = (a: number, b: number, u: number) => g(f(a) + u * (f(b) - f(a)));
  if (s.center === null || !(s.center > s.lo && s.center < s.hi)) return lerp(s.lo, s.hi, t);
  return t < 0.5 ? lerp(s.lo, s.center, t * 2) : lerp(s.center, s.hi, (t - 0.5) * 2);
}
