// The charts whose size grows with the batch (a value per sample, a value per completion token), drawn on
// one canvas. recharts built an SVG element per point and laid them out in synchronous renders: after a
// 1,024-row × 2,560-token import a 2,048-point curve and 256 bins held the page ~380 ms in one task. Here
// a chart is one canvas draw in ~1 ms whatever its length, and it shows every point: where several x fall
// on one pixel column the column draws their first, min, max and last value (scale.ts), so a one-token KL
// spike stays visible. The tooltip reads the exact value at the x under the pointer. The legend and the
// axis ticks are DOM (a few elements), readable by tests and screen readers alike. The summary charts of
// a few dozen points use recharts (SummaryChart.tsx); both paint with the one theme of view/chart_theme.ts.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { CHART_FONT, CHART_THEME } from '../../view/chart_theme.ts';
import { fmt } from '../fields.tsx';
import { columnExtents, niceTicks, valueRange, type Values } from './scale.ts';

export interface Series {
  key: string;
  color: string;
  get: Values;
}

/** Inclusive index ranges shaded behind the series (e.g. the samples of a zero-std group). */
export interface Span {
  x0: number;
  x1: number;
}

export interface SeriesChartProps {
  title: string;
  testId: string;
  /** The x values are the indices 0 … n − 1 of what `xKey` names (t, sample). */
  n: number;
  xKey: string;
  xTitle: string;
  /** Memoize: a new array redraws the chart. */
  series: readonly Series[];
  spans?: readonly Span[];
  spanLabel?: string;
  /** A line at y = 0 (and 0 inside the y range). */
  zeroLine?: boolean;
  /** Dots on the points while each has room (≥ 6 px). */
  dots?: boolean;
  height?: number;
}

/** Plot margins inside the canvas, in CSS pixels: y tick labels on the left, x ticks and title below. */
const M = { left: 46, right: 8, top: 6, bottom: 28 };
const { grid: GRID, axis: AXIS } = CHART_THEME;

interface Geometry {
  width: number;
  plotW: number;
  plotH: number;
  lo: number;
  hi: number;
  xOf(i: number): number;
  yOf(v: number): number;
}

function geometry(width: number, height: number, n: number, range: [number, number]): Geometry {
  const plotW = Math.max(1, width - M.left - M.right);
  const plotH = Math.max(1, height - M.top - M.bottom);
  let [lo, hi] = range;
  if (lo === hi) [lo, hi] = lo === 0 ? [-1, 1] : [lo - Math.abs(lo) * 0.1, hi + Math.abs(hi) * 0.1];
  const pad = (hi - lo) * 0.05;
  [lo, hi] = [lo - pad, hi + pad];
  return {
    width,
    plotW,
    plotH,
    lo,
    hi,
    // Index i sits at the centre of its band (and of its pixel column on a long line).
    xOf: (i) => M.left + ((i + 0.5) * plotW) / n,
    yOf: (v) => M.top + ((hi - v) / (hi - lo)) * plotH,
  };
}

function drawLine(g: CanvasRenderingContext2D, geo: Geometry, n: number, get: Values, color: string, dots: boolean): void {
  g.strokeStyle = color;
  g.fillStyle = color;
  g.lineWidth = 1.25;
  g.beginPath();
  const cols = Math.floor(geo.plotW);
  let open = false;
  const to = (x: number, v: number) => {
    const y = geo.yOf(v);
    if (open) g.lineTo(x, y);
    else g.moveTo(x, y);
    open = true;
  };
  if (n <= cols) {
    for (let i = 0; i < n; i++) {
      const v = get(i);
      if (v === undefined || !Number.isFinite(v)) open = false;
      else to(geo.xOf(i), v);
    }
  } else {
    // More points than pixel columns: each column's first → min → max → last draws what every point would.
    const ext = columnExtents(get, n, cols);
    for (let k = 0; k < cols; k++) {
      const o = k * 4;
      if (Number.isNaN(ext[o])) {
        open = false;
        continue;
      }
      const x = M.left + ((k + 0.5) * geo.plotW) / cols;
      to(x, ext[o]);
      to(x, ext[o + 1]);
      to(x, ext[o + 2]);
      to(x, ext[o + 3]);
    }
  }
  g.stroke();
  if (dots && geo.plotW / n >= 6)
    for (let i = 0; i < n; i++) {
      const v = get(i);
      if (v === undefined || !Number.isFinite(v)) continue;
      g.beginPath();
      g.arc(geo.xOf(i), geo.yOf(v), 2, 0, 2 * Math.PI);
      g.fill();
    }
}

function draw(canvas: HTMLCanvasElement, geo: Geometry, height: number, p: SeriesChartProps, yTicks: number[]): void {
  const dpr = globalThis.devicePixelRatio || 1;
  canvas.width = Math.round(geo.width * dpr);
  canvas.height = Math.round(height * dpr);
  const g = canvas.getContext('2d')!;
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, geo.width, height);
  g.fillStyle = GRID;
  for (const v of yTicks) g.fillRect(M.left, Math.round(geo.yOf(v)), geo.plotW, 1);
  if (p.spans?.length) {
    const band = geo.plotW / p.n;
    g.font = CHART_FONT;
    const labelW = p.spanLabel ? g.measureText(p.spanLabel).width + 4 : Infinity;
    for (const s of p.spans) {
      const x = M.left + s.x0 * band;
      const w = (s.x1 - s.x0 + 1) * band;
      g.fillStyle = CHART_THEME.span;
      g.fillRect(x, M.top, w, geo.plotH);
      if (p.spanLabel && w >= labelW) {
        g.fillStyle = CHART_THEME.spanText;
        g.fillText(p.spanLabel, x + 2, M.top + 10);
      }
    }
  }
  if (p.zeroLine) {
    g.fillStyle = AXIS;
    g.fillRect(M.left, Math.round(geo.yOf(0)), geo.plotW, 1);
  }
  for (const s of p.series) drawLine(g, geo, p.n, s.get, s.color, !!p.dots);
  g.fillStyle = AXIS;
  g.fillRect(M.left, M.top + geo.plotH, geo.plotW, 1);
}

export function SeriesChart(p: SeriesChartProps) {
  const { n, series, height = 150, testId } = p;
  const box = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(0);
  const [hover, setHover] = useState<number | null>(null);

  // The width comes from the observer's first report (after the browser's own layout): reading
  // clientWidth here would force a layout inside the commit that mounts the chart.
  useEffect(() => {
    const ro = new ResizeObserver(([e]) => setWidth(e.contentRect.width));
    ro.observe(box.current!);
    return () => ro.disconnect();
  }, []);

  const range = useMemo(() => {
    const r = valueRange(series.map((s) => s.get), n);
    return r && p.zeroLine ? ([Math.min(r[0], 0), Math.max(r[1], 0)] as [number, number]) : r;
  }, [series, n, p.zeroLine]);
  const geo = useMemo(() => (width > 0 && range && n > 0 ? geometry(width, height, n, range) : null), [width, height, n, range]);
  const yTicks = useMemo(() => (geo ? niceTicks(geo.lo, geo.hi, 4) : []), [geo]);
  const xTicks = useMemo(() => (geo ? niceTicks(0, n - 1, Math.max(1, Math.floor(geo.plotW / 70)), true) : []), [geo, n]);

  useLayoutEffect(() => {
    if (geo && canvas.current) draw(canvas.current, geo, height, p, yTicks);
    // p's fields are listed one by one: the props object is new on every render.
  }, [geo, height, yTicks, series, p.spans, p.spanLabel, p.zeroLine, p.dots]);

  const onMove = (e: React.PointerEvent) => {
    if (!geo) return;
    const x = e.clientX - e.currentTarget.getBoundingClientRect().left - M.left;
    setHover(x < 0 || x > geo.plotW ? null : Math.min(n - 1, Math.max(0, Math.floor((x / geo.plotW) * n))));
  };
  // A hover from before the series got shorter (another sample selected) shows nothing until the pointer moves.
  const at = hover !== null && hover < n ? hover : null;
  const tipLeft = geo && at !== null ? geo.xOf(at) : 0;

  return (
    <div className="chart" data-testid={testId}>
      <div className="chart-title">{p.title}</div>
      <div className="chart-legend">
        {series.map((s) => (
          <span key={s.key}>
            <i style={{ background: s.color }} />
            {s.key}
          </span>
        ))}
      </div>
      <div className="chart-plot" ref={box} style={{ height, color: AXIS, fontSize: CHART_THEME.fontSize, fontFamily: CHART_THEME.fontFamily }} onPointerMove={onMove} onPointerLeave={() => setHover(null)}>
        <canvas ref={canvas} role="img" aria-label={p.title} style={{ width: '100%', height }} />
        {!range && <span className="chart-empty muted">no finite values</span>}
        {geo &&
          yTicks.map((v) => (
            <span key={`y${v}`} className="tick y" style={{ top: geo.yOf(v), width: M.left - 4 }}>
              {fmt(v, 3)}
            </span>
          ))}
        {geo &&
          xTicks.map((i) => (
            <span key={`x${i}`} className="tick x" style={{ left: geo.xOf(i), top: M.top + geo.plotH + 3 }}>
              {i}
            </span>
          ))}
        <span className="axis-title" style={{ left: M.left }}>
          {p.xTitle}
        </span>
        {geo && at !== null && (
          <>
            <div className="chart-cursor" style={{ left: tipLeft, top: M.top, height: geo.plotH }} />
            <div className="chart-tip" data-testid={`${testId}-tip`} data-index={at} style={{ background: CHART_THEME.tooltipBg, borderColor: CHART_THEME.tooltipBorder, ...(tipLeft > geo.width / 2 ? { right: geo.width - tipLeft + 8 } : { left: tipLeft + 8 }) }}>
              <div>
                {p.xKey} {at}
              </div>
              {series.map((s) => (
                <div key={s.key} data-key={s.key} data-value={s.get(at) ?? ''} style={{ color: s.color }}>
                  {s.key} {fmt(s.get(at))}
                </div>
              ))}
            </div>
          </>
        )}
      </div>
    </div>
  );
}
