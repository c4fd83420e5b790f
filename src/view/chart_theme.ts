// The charts' one theme: colours, fonts and axis style shared by the recharts summary charts
// (src/ui/chart/SummaryChart.tsx) and the canvas renderer of the dense per-token series
// (src/ui/chart/SeriesChart.tsx), so a reward is the same blue and a tick the same grey in both. Pure
// constants beside the grid's colours (colors.ts): no React, no DOM, so the saved report may read it too.

/** The page's dark palette (styles.css :root), as the charts paint it. */
export const CHART_THEME = {
  /** Horizontal grid lines. */
  grid: '#21262d',
  /** Axis lines, ticks and tick labels. */
  axis: '#7d8590',
  /** Titles and legend text. */
  text: '#8b949e',
  /** The tooltip's box. */
  tooltipBg: '#161b22',
  tooltipBorder: '#30363d',
  tooltipText: '#e6edf3',
  /** A shaded span (a zero-std group) and its label. */
  span: 'rgba(248,81,73,0.12)',
  spanText: '#f85149',
  /** Signed bars: the colour of a value above / below zero (the mismatch plots' d > 0 / d < 0). */
  positive: '#ff5050',
  negative: '#4682ff',
  fontFamily: "system-ui, 'DejaVu Sans', sans-serif",
  fontSize: 10,
} as const;

/** The canvas font string of the theme (tick labels, span labels). */
export const CHART_FONT = `${CHART_THEME.fontSize}px ${CHART_THEME.fontFamily}`;

/**
 * One colour per quantity, wherever it is drawn (page and saved report): per-sample and per-group rewards /
 * advantages, the per-token metrics, before / after, the loss, KL and clipped tokens of each pass and the
 * stage timings.
 */
export const SERIES_COLORS = {
  reward: '#58a6ff',
  advantage: '#f2cc60',
  logp: '#58a6ff',
  old_logp: '#8b949e',
  ref_logp: '#a371f7',
  entropy: '#3fb950',
  kl: '#f85149',
  dlogp: '#f2cc60',
  before: '#8b949e',
  after: '#f2cc60',
  loss: '#58a6ff',
  clipped: '#f2cc60',
  ms: '#3fb950',
} as const;
