// Charts: rewards and advantages per sample grouped by prompt (zero-std groups marked), per-token curves
// along the selected completion, the loss (policy term + β·KL, and every aggregation before and after
// the step, as numbers), grad norms per parameter group, and log-probs before / after the step. A chart
// appears once its data exists (an imported batch has rewards/advantages and old/ref log-probs; the
// rest comes from a step).
import { useDeferredValue, useMemo } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, Line, LineChart, ReferenceArea, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { groupLabel } from '../store/vocabulary.ts';
import { useStudio } from '../store/index.ts';
import { groupStats } from '../store/derived.ts';
import { AGGREGATIONS } from '../store/vocabulary.ts';
import { aggregationTitle } from './explain.ts';
import { heatAccessor } from './grid/heat.ts';
import { Section, fmt } from './fields.tsx';

const AXIS = { stroke: '#7d8590', fontSize: 10 };
const TOOLTIP = { contentStyle: { background: '#161b22', border: '1px solid #30363d', fontSize: 11 }, formatter: (v: unknown) => (typeof v === 'number' ? fmt(v) : String(v)) };

function ChartBox({ title, children, testId, height = 150 }: { title: string; children: React.ReactElement; testId?: string; height?: number }) {
  return (
    <div className="chart" data-testid={testId}>
      <div className="chart-title">{title}</div>
      <ResponsiveContainer width="100%" height={height}>
        {children}
      </ResponsiveContainer>
    </div>
  );
}

/** Axis titles by x key: every chart says what its x axis counts. */
const X_TITLES: Record<string, string> = { t: 'completion position t', sample: 'sample (rows of a group are adjacent)' };

const NO_LINES = () => [];

/**
 * Grid, axes, tooltip and legend of the per-sample and per-token charts (x from `xKey`, n points). The x
 * ticks are every ⌈n / 12⌉-th point, given as a number: left to choose, recharts measures the label of
 * every point in the DOM (seconds for a 2,048-token completion); horizontal grid lines only, for the same reason
 * (the grid's default generator measures every x label even when vertical lines are off).
 */
function frame(xKey: string, n: number): React.ReactElement[] {
  return [
    <CartesianGrid key="grid" stroke="#21262d" vertical={false} verticalCoordinatesGenerator={NO_LINES} />,
    <XAxis key="x" dataKey={xKey} tick={AXIS} height={30} interval={Math.max(0, Math.ceil(n / 12) - 1)} label={{ value: X_TITLES[xKey] ?? xKey, position: 'insideBottom', offset: -2, fill: '#7d8590', fontSize: 10 }} />,
    <YAxis key="y" tick={AXIS} />,
    <Tooltip key="tooltip" {...TOOLTIP} />,
    <Legend key="legend" verticalAlign="top" height={18} wrapperStyle={{ fontSize: 10 }} />,
  ];
}

/**
 * A completion longer than this is drawn as the mean of each run of positions: recharts lays out every
 * point of every line in one synchronous render (a 2,048-token row held the page ~70 ms after an import).
 * The grid's heat overlays keep every token's exact value.
 */
const MAX_POINTS = 512;

/** `rows` (one per position t) as the means of runs of `per` positions, at each run's first t. */
function binned(rows: Record<string, number | undefined>[], per: number): Record<string, number | undefined>[] {
  if (per <= 1) return rows;
  const keys = Object.keys(rows[0] ?? {}).filter((k) => k !== 't');
  return Array.from({ length: Math.ceil(rows.length / per) }, (_, k) => {
    const run = rows.slice(k * per, (k + 1) * per);
    const out: Record<string, number | undefined> = { t: k * per };
    for (const key of keys) {
      const v = run.map((r) => r[key]).filter((x): x is number => x !== undefined);
      out[key] = v.length ? v.reduce((a, b) => a + b, 0) / v.length : undefined;
    }
    return out;
  });
}

/** One line per [key, colour] along the completion's token positions t (binned past MAX_POINTS). */
function TokenLines({ title, testId, rows: all, lines, dots = false }: { title: string; testId: string; rows: Record<string, number | undefined>[]; lines: readonly (readonly [string, string])[]; dots?: boolean }) {
  const per = Math.ceil(all.length / MAX_POINTS);
  const rows = useMemo(() => binned(all, per), [all, per]);
  return (
    <ChartBox title={per > 1 ? `${title} (mean of each ${per} positions)` : title} testId={testId}>
      <LineChart data={rows}>
        {frame('t', rows.length)}
        {lines.map(([k, color]) => (
          <Line key={k} dataKey={k} stroke={color} dot={dots && per === 1} isAnimationActive={false} />
        ))}
      </LineChart>
    </ChartBox>
  );
}

/**
 * More samples than this are drawn as bins: the mean of each run of samples, as two lines (one SVG path
 * each). recharts renders a React component per bar and re-renders them synchronously once laid out:
 * a bar per sample of 200,000 rows froze the page, and even 512 bars held it for a quarter second.
 */
const MAX_BARS = 256;

function RewardsChart() {
  const batch = useStudio((s) => s.batch);
  const groups = useStudio(groupStats);
  const data = useMemo(() => {
    if (!batch) return null;
    const { rewards, advantages: adv } = batch;
    if (!rewards && !adv) return null;
    const B = batch.completion_ids.length;
    const zero = (groups ?? []).filter((g) => g.zero_std).map((g) => g.group);
    const zeroSet = new Set(zero);
    const per = Math.ceil(B / MAX_BARS);
    if (per > 1) {
      // Mean reward / advantage of each run of `per` samples, at the run's first sample.
      const mean = (a: number[] | undefined, i: number) => (a ? a.slice(i, i + per).reduce((s, v) => s + v, 0) / Math.min(per, B - i) : undefined);
      const rows = Array.from({ length: Math.ceil(B / per) }, (_, k) => ({ sample: k * per, reward: mean(rewards, k * per), advantage: mean(adv, k * per) }));
      return { rows, zero, spans: [], per };
    }
    const rows = batch.completion_ids.map((_, i) => ({ sample: i, reward: rewards?.[i], advantage: adv?.[i], group: groupLabel(batch, i) }));
    // Shade runs of adjacent samples of one flat group (labelled groups need not be adjacent).
    const spans: { x1: number; x2: number; group: number }[] = [];
    for (const r of rows) {
      if (!zeroSet.has(r.group)) continue;
      const last = spans[spans.length - 1];
      if (last && last.x2 === r.sample - 1 && last.group === r.group) last.x2 = r.sample;
      else spans.push({ x1: r.sample, x2: r.sample, group: r.group });
    }
    return { rows, zero, spans, per };
  }, [batch, groups]);
  if (!data) return null;
  const zeroText = data.zero.length > 20 ? `${data.zero.slice(0, 20).join(', ')} … (${data.zero.length} groups)` : data.zero.join(', ');
  return (
    <ChartBox title={`rewards & advantages per sample${data.per > 1 ? ` (mean of each ${data.per} samples)` : ''}${data.zero.length ? ` — zero-std groups: ${zeroText}` : ''}`} testId="chart-rewards">
      {data.per > 1 ? (
        <LineChart data={data.rows}>
          {frame('sample', data.rows.length)}
          <ReferenceLine y={0} stroke="#7d8590" />
          <Line dataKey="reward" stroke="#58a6ff" dot={false} isAnimationActive={false} />
          <Line dataKey="advantage" stroke="#f2cc60" dot={false} isAnimationActive={false} />
        </LineChart>
      ) : (
        <BarChart data={data.rows}>
          {frame('sample', data.rows.length)}
          {data.spans.map((z) => (
            <ReferenceArea key={z.x1} x1={z.x1} x2={z.x2} fill="#f85149" fillOpacity={0.12} label={{ value: 'zero std', fill: '#f85149', fontSize: 10 }} />
          ))}
          <ReferenceLine y={0} stroke="#7d8590" />
          <Bar dataKey="reward" fill="#58a6ff" isAnimationActive={false} />
          <Bar dataKey="advantage" fill="#f2cc60" isAnimationActive={false} />
        </BarChart>
      )}
    </ChartBox>
  );
}

/** The per-token metrics drawn along the selected completion, with their colours. */
const TOKEN_SERIES = [
  ['logp', '#58a6ff'],
  ['old_logp', '#8b949e'],
  ['ref_logp', '#a371f7'],
  ['entropy', '#3fb950'],
  ['kl', '#f85149'],
  ['dlogp', '#f2cc60'],
] as const;

function TokenCurves() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const sel = useStudio((s) => s.selected?.sample ?? s.focus?.sample ?? 0);
  const data = useMemo(() => {
    if (!batch || sel >= batch.completion_ids.length) return null;
    const lines = TOKEN_SERIES.filter(([m]) => heatAccessor(m, batch, run));
    if (lines.length === 0) return null;
    const acc = lines.map(([m]) => [m, heatAccessor(m, batch, run)!] as const);
    return { lines, rows: batch.completion_ids[sel].map((_, j) => Object.fromEntries([['t', j], ...acc.map(([m, a]) => [m, a(sel, j)])])) };
  }, [batch, run, sel]);
  if (!data) return null;
  return <TokenLines title={`per-token along completion of sample ${sel}`} testId="chart-tokens" rows={data.rows} lines={data.lines} />;
}

/** The loss under every aggregation, before the step and after it (re-evaluated on the same batch). */
function LossTable() {
  const loss = useStudio((s) => s.run.loss);
  const after = useStudio((s) => s.run.re_evaluate);
  // The aggregation the update ran with, not the form's: changing the form afterwards must not relabel these numbers.
  const lossType = useStudio((s) => s.runSettings?.loss.loss_type ?? s.loss.loss_type);
  if (!loss) return null;
  const c = loss.clip_counts;
  return (
    <div className="loss-values" data-testid="loss-values">
      <div className="chart-title" data-testid="loss-headline" title={aggregationTitle(lossType)}>
        {/* Under a trainer preset the headline loss (and the gradient) is that trainer's objective; the table below stays the studio's aggregations. */}
        {loss.objective
          ? `loss (${loss.objective.trainer} objective) ${loss.objective_error ?? fmt(loss.loss)}`
          : `loss (${lossType}) ${fmt(loss.loss)} = policy ${fmt(loss.policy_term)} + β·KL ${fmt(loss.kl_term)}`}
      </div>
      <table className="dense">
        <thead>
          <tr>
            <th>aggregation</th>
            <th>loss</th>
            <th>after step</th>
            <th>Δ</th>
          </tr>
        </thead>
        <tbody>
          {AGGREGATIONS.map((a) => {
            const v = loss.losses[a];
            const w = after?.losses_after[a];
            return (
              <tr key={a} className={a === lossType ? 'chosen' : ''} data-agg={a} title={`${aggregationTitle(a)}${a === lossType ? '\n(drives the gradient in this update)' : ''}`}>
                <td>{a}</td>
                <td className="num" data-testid="loss-value">{fmt(v, 3)}</td>
                <td className="num">{fmt(w, 3)}</td>
                <td className="num">{w === undefined ? '—' : fmt(w - v, 3)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <div className="small muted">
        <span data-testid="mean-kl" data-value={loss.mean_kl}>mean KL {fmt(loss.mean_kl)}</span> before the step · clipped low {c.low}, high {c.high}, δ {c.delta_binding} of {c.tokens} tokens
      </div>
    </div>
  );
}

function GradNorms() {
  const backward = useStudio((s) => s.run.backward);
  const step = useStudio((s) => s.run.step);
  if (!backward) return null;
  const rows = Object.entries(backward.group_grad_norms).map(([group, norm]) => ({ group, norm }));
  return (
    <ChartBox title={`grad norm per parameter group (total ${fmt(backward.grad_norm)}${step ? `, clip coef ${fmt(step.clip_coef)}` : ''})`} testId="chart-grads" height={Math.max(150, 16 * rows.length + 40)}>
      {/* Horizontal bars: one line per group name, so the names never overlap (rotated x labels did). */}
      <BarChart data={rows} layout="vertical" margin={{ left: 4, right: 8 }}>
        <XAxis type="number" tick={AXIS} label={{ value: '‖grad‖₂', position: 'insideBottom', offset: -2, fill: '#7d8590', fontSize: 10 }} height={30} />
        <YAxis type="category" dataKey="group" tick={{ ...AXIS, fontSize: 9 }} interval={0} width={120} />
        <Tooltip {...TOOLTIP} />
        <Bar dataKey="norm" fill="#3fb950" isAnimationActive={false} />
      </BarChart>
    </ChartBox>
  );
}

function BeforeAfter() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const sel = useStudio((s) => s.selected?.sample ?? 0);
  const pre = heatAccessor('logp', batch, run);
  const post = run.re_evaluate && run.assemble ? run.re_evaluate.post_per_token_logps : null;
  if (!batch || !pre || !post || sel >= batch.completion_ids.length) return null;
  const C = run.assemble!.padded.C;
  const rows = batch.completion_ids[sel].map((_, j) => ({ t: j, before: pre(sel, j), after: post[sel * C + j] }));
  return (
    <TokenLines
      title={`log-probs before / after the step, sample ${sel} (A = ${fmt(batch.advantages?.[sel])})`}
      testId="chart-before-after"
      rows={rows}
      lines={[['before', '#8b949e'], ['after', '#f2cc60']]}
      dots
    />
  );
}

/**
 * Renders the SVG charts in a deferred render after a new batch: React slices that render between frames,
 * so the grid of a big import shows at once and the page keeps answering while hundreds of bars and a
 * 2,048-point curve are built (in the first, urgent render they would hold the page for their whole cost).
 */
function Deferred({ children }: { children: React.ReactNode }) {
  const batch = useStudio((s) => s.batch);
  return useDeferredValue(batch) === batch ? children : null;
}

export function Charts() {
  const batch = useStudio((s) => s.batch);
  return (
    <Section title="Charts">
      {!batch && <div className="muted">charts appear with a batch</div>}
      <Deferred>
        <RewardsChart />
      </Deferred>
      <LossTable />
      <GradNorms />
      <Deferred>
        <BeforeAfter />
        <TokenCurves />
      </Deferred>
    </Section>
  );
}
