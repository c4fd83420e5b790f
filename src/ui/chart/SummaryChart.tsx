// The summary charts' one recharts wrapper: a few dozen bars or points (rewards and advantages per sample of
// a small batch, per group before / after the step, stage timings, the mismatch histograms, per-pass loss
// sparklines), where recharts' axes, legend, tooltip and responsive container serve the reader and its
// SVG-per-point costs nothing. The dense per-token series (thousands of points) stay on the canvas of
// SeriesChart.tsx; both paint with the theme of src/view/chart_theme.ts.
import type { ReactNode } from 'react';
import { Bar, CartesianGrid, ComposedChart, Legend, Line, ReferenceArea, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { CHART_THEME as T } from '../../view/chart_theme.ts';
import { fmt } from '../fields.tsx';

export interface SummarySeries {
  /** The field of each row this series draws (and its legend / tooltip name unless `name`). */
  key: string;
  name?: string;
  color: string;
  kind?: 'bar' | 'line';
}

/** A shaded range of x (e.g. the samples of a zero-std group), inclusive. */
export interface Band {
  x1: number | string;
  x2: number | string;
  label?: string;
}

/** One datum: its x under `xKey`, its values under the series' keys; `fill` colours a single bar series per row. */
export type SummaryRow = Record<string, unknown> & { fill?: string };

export interface SummaryChartProps {
  title: ReactNode;
  testId: string;
  data: readonly SummaryRow[];
  xKey: string;
  xTitle: string;
  series: readonly SummarySeries[];
  /** 'vertical': the categories run down the y axis and bars grow to the right (long names: stage labels). */
  layout?: 'horizontal' | 'vertical';
  height?: number;
  /** A line at value 0. */
  zeroLine?: boolean;
  bands?: readonly Band[];
  /** The tooltip's heading for a row (default: "<xKey> <x>"). */
  label?: (row: SummaryRow) => string;
  /** A sparkline: no legend, no axis title, few ticks. */
  compact?: boolean;
}

const TICK = { fill: T.axis, fontSize: T.fontSize, fontFamily: T.fontFamily };
const numberTick = (v: unknown) => (typeof v === 'number' ? fmt(v, 3) : String(v));

export function SummaryChart(p: SummaryChartProps) {
  const { data, xKey, series, compact = false, layout = 'horizontal' } = p;
  const vertical = layout === 'vertical';
  const height = p.height ?? (compact ? 70 : 150);
  // The category axis (x, or y when vertical) names the rows; the value axis is numeric.
  const category = { dataKey: xKey, type: 'category' as const, tick: TICK, stroke: T.axis, interval: 'preserveStartEnd' as const, minTickGap: 4 };
  const value = { type: 'number' as const, tick: TICK, stroke: T.axis, tickFormatter: numberTick, tickCount: compact ? 3 : 5 };
  const axisTitle = compact ? undefined : { value: p.xTitle, fill: T.text, fontSize: T.fontSize, ...(vertical ? { angle: -90, position: 'insideLeft' as const } : { position: 'insideBottom' as const, offset: -2 }) };
  const byX = new Map(data.map((r) => [r[xKey], r]));
  return (
    <div className="chart summary-chart" data-testid={p.testId}>
      <div className="chart-title">{p.title}</div>
      <ResponsiveContainer width="100%" height={height}>
        <ComposedChart data={data as SummaryRow[]} layout={layout} margin={{ top: 2, right: 8, bottom: compact ? 0 : 6, left: 0 }} barCategoryGap="15%" barGap={1}>
          <CartesianGrid stroke={T.grid} vertical={vertical} horizontal={!vertical} />
          {vertical ? <XAxis {...value} /> : <XAxis {...category} height={compact ? 16 : 30} label={axisTitle} />}
          {vertical ? <YAxis {...category} width={96} label={axisTitle} /> : <YAxis {...value} width={compact ? 40 : 46} />}
          {p.bands?.map((b, i) => (
            <ReferenceArea key={i} {...(vertical ? { y1: b.x1, y2: b.x2 } : { x1: b.x1, x2: b.x2 })} fill={T.span} fillOpacity={1} label={b.label ? { value: b.label, fill: T.spanText, fontSize: T.fontSize, position: 'insideTopLeft' } : undefined} />
          ))}
          {p.zeroLine && (vertical ? <ReferenceLine x={0} stroke={T.axis} /> : <ReferenceLine y={0} stroke={T.axis} />)}
          <Tooltip
            isAnimationActive={false}
            cursor={{ fill: '#e6edf312', stroke: '#e6edf355' }}
            contentStyle={{ background: T.tooltipBg, border: `1px solid ${T.tooltipBorder}`, fontSize: 11, color: T.tooltipText, padding: '2px 6px' }}
            labelFormatter={(x) => {
              const row = byX.get(x);
              return row && p.label ? p.label(row) : `${xKey} ${String(x)}`;
            }}
            formatter={(v) => (typeof v === 'number' ? fmt(v) : String(v))}
          />
          {/* itemSorter null: the legend lists the series in their order (recharts sorts by name by default). */}
          {!compact && series.length > 1 && <Legend verticalAlign="top" height={16} iconSize={8} itemSorter={null} wrapperStyle={{ fontSize: T.fontSize, color: T.text }} />}
          {series.map((s) =>
            s.kind === 'line' ? (
              <Line key={s.key} className={`series-${s.key}`} dataKey={s.key} name={s.name ?? s.key} stroke={s.color} dot={{ r: 2, fill: s.color }} isAnimationActive={false} />
            ) : (
              <Bar key={s.key} className={`series-${s.key}`} dataKey={s.key} name={s.name ?? s.key} fill={s.color} isAnimationActive={false} />
            ),
          )}
        </ComposedChart>
      </ResponsiveContainer>
    </div>
  );
}
