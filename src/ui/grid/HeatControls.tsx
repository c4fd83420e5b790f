// The heat scale's controls beside the heat menu: range (auto = percentile-clipped for signed metrics, min–max
// otherwise; percentile; min–max; a fixed lo / hi the user types), the percentile clip, symmetric around the
// centre, and log scale for positive metrics. Native selects, inputs and toggle buttons only, so Tab, the
// arrow keys and Enter reach and change every one of them (the e2e walks them without a mouse).
import { useEffect, useState } from 'react';
import { useStudio } from '../../store/index.ts';
import { scaleOf } from '../../store/layout.ts';
import type { HeatMetric } from '../../store/session.ts';
import { RANGE_MODES, type RangeMode } from '../../view/heat_scale.ts';
import { fmt } from '../fields.tsx';
import { CATEGORICAL, metricKind, type HeatSource } from './heat.ts';

const RANGE_TEXT: Record<RangeMode, string> = { auto: 'auto', percentile: 'percentile', minmax: 'min–max', fixed: 'fixed' };
const CLIPS = [0.1, 1, 2, 5, 10];

/** A number typed into a text box, committed on Enter or when it loses focus (a partial "-" or "1e" is not a value yet). */
function NumberBox({ value, onCommit, label, testId }: { value: number; onCommit(v: number): void; label: string; testId: string }) {
  const [text, setText] = useState(fmt(value, 4));
  useEffect(() => setText(fmt(value, 4)), [value]);
  const commit = () => {
    const v = Number(text);
    if (text.trim() !== '' && Number.isFinite(v)) onCommit(v);
    else setText(fmt(value, 4));
  };
  return (
    <input
      className="heat-num"
      aria-label={label}
      data-testid={testId}
      value={text}
      onChange={(e) => setText(e.target.value)}
      onBlur={commit}
      onKeyDown={(e) => e.key === 'Enter' && commit()}
    />
  );
}

export function HeatControls({ metric, src }: { metric: HeatMetric; src: HeatSource }) {
  const settings = useStudio((s) => scaleOf(s, metric));
  const set = useStudio((s) => s.setHeatScale);
  if (CATEGORICAL.has(metric)) return null;
  const kind = metricKind(metric);
  const symmetric = settings.symmetric ?? kind.center !== null;
  return (
    <span className="heat-controls" data-testid="heat-controls">
      <label>
        scale{' '}
        <select
          value={settings.range}
          data-testid="heat-range"
          onChange={(e) => {
            const range = e.target.value as RangeMode;
            // Fixed starts from the range on screen, so the user edits what they see.
            set(metric, range === 'fixed' && settings.range !== 'fixed' ? { range, lo: src.scale.lo, hi: src.scale.hi } : { range });
          }}
        >
          {RANGE_MODES.map((m) => (
            <option key={m} value={m}>
              {RANGE_TEXT[m]}
            </option>
          ))}
        </select>
      </label>
      {src.scale.mode === 'percentile' && (
        <select value={settings.clip} aria-label="percentile clip" data-testid="heat-clip" onChange={(e) => set(metric, { clip: Number(e.target.value) })}>
          {CLIPS.map((p) => (
            <option key={p} value={p}>
              p{p}–p{100 - p}
            </option>
          ))}
        </select>
      )}
      {settings.range === 'fixed' && (
        <>
          <NumberBox value={settings.lo} label="heat range low end" testId="heat-lo" onCommit={(lo) => set(metric, { lo })} />
          <NumberBox value={settings.hi} label="heat range high end" testId="heat-hi" onCommit={(hi) => set(metric, { hi })} />
        </>
      )}
      <button
        className="toggle"
        aria-pressed={symmetric}
        data-testid="heat-symmetric"
        title={`symmetric around ${kind.center ?? (settings.log ? 1 : 0)}`}
        onClick={() => set(metric, { symmetric: !symmetric })}
      >
        ± sym
      </button>
      {kind.positive && (
        <button className="toggle" aria-pressed={settings.log} data-testid="heat-log" title="log scale (values ≤ 0 take the low end)" onClick={() => set(metric, { log: !settings.log })}>
          log
        </button>
      )}
    </span>
  );
}
