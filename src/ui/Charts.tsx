// Charts: rewards and advantages per sample grouped by prompt (zero-std groups marked), per-token curves
// along the selected completion, the loss (policy term + β·KL, and every aggregation before and after
// the step, as numbers; with μ > 1 each pass over the batch, its loss / KL / clipping as sparklines, and the
// pass the heat follows), grad norms per parameter group, log-probs before / after the step and the time each
// stage took. A chart appears once its data exists (an imported batch has rewards/advantages and old/ref
// log-probs; the rest comes from a step; the stage timings once Run to end stops). Summary charts of a few dozen points are recharts (SummaryChart);
// series that grow with the batch or the completion stay on the canvas (SeriesChart).
import { useMemo } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useStudio } from '../store/index.ts';
import { doneStageTimes, groupStats } from '../store/derived.ts';
import { AGGREGATIONS, STAGES, STAGE_LABELS, groupLabel, lossTypeOf } from '../store/vocabulary.ts';
import { SERIES_COLORS } from '../view/chart_theme.ts';
import { aggregationTitle } from './explain.ts';
import type { LossType } from '../kernels/types.ts';
import { heatAccessor } from './grid/heat.ts';
import { SeriesChart, type Series, type Span } from './chart/SeriesChart.tsx';
import { SummaryChart, type SummaryRow } from './chart/SummaryChart.tsx';
import { Section, fmt } from './fields.tsx';

/**
 * Up to this many samples the rewards chart is a recharts bar chart, a pair of bars per sample (recharts
 * renders a component per bar: 512 held the page a quarter second); past it, two lines on the canvas.
 */
const MAX_BARS = 128;

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
    // Shade runs of adjacent samples of one flat group (labelled groups need not be adjacent).
    const spans: (Span & { group: number })[] = [];
    if (zeroSet.size)
      for (let i = 0; i < B; i++) {
        const group = groupLabel(batch, i);
        if (!zeroSet.has(group)) continue;
        const last = spans[spans.length - 1];
        if (last && last.x1 === i - 1 && last.group === group) last.x1 = i;
        else spans.push({ x0: i, x1: i, group });
      }
    const series: Series[] = [];
    if (rewards) series.push({ key: 'reward', color: SERIES_COLORS.reward, get: (i) => rewards[i] });
    if (adv) series.push({ key: 'advantage', color: SERIES_COLORS.advantage, get: (i) => adv[i] });
    const rows: SummaryRow[] | null = B <= MAX_BARS ? Array.from({ length: B }, (_, i) => ({ sample: i, group: groupLabel(batch, i), reward: rewards?.[i], advantage: adv?.[i] })) : null;
    return { B, zero, spans, series, rows };
  }, [batch, groups]);
  if (!data) return null;
  const zeroText = data.zero.length > 20 ? `${data.zero.slice(0, 20).join(', ')} … (${data.zero.length} groups)` : data.zero.join(', ');
  const title = `rewards & advantages per sample${data.zero.length ? ` — zero-std groups: ${zeroText}` : ''}`;
  const xTitle = 'sample (rows of a group are adjacent)';
  if (data.rows)
    return (
      <SummaryChart
        title={title}
        testId="chart-rewards"
        data={data.rows}
        xKey="sample"
        xTitle={xTitle}
        series={data.series.map((s) => ({ key: s.key, color: s.color }))}
        bands={data.spans.map((s) => ({ x1: s.x0, x2: s.x1, label: 'zero std' }))}
        label={(r) => `sample ${String(r.sample)} · group ${String(r.group)}`}
        zeroLine
      />
    );
  return <SeriesChart title={title} testId="chart-rewards" n={data.B} xKey="sample" xTitle={xTitle} series={data.series} spans={data.spans} spanLabel="zero std" zeroLine />;
}

/** The per-token metrics drawn along the selected completion, with their colours. */
const TOKEN_SERIES = (['logp', 'old_logp', 'ref_logp', 'entropy', 'kl', 'dlogp'] as const).map((key) => [key, SERIES_COLORS[key]] as const);

function TokenCurves() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const sel = useStudio((s) => s.selected?.sample ?? s.focus?.sample ?? 0);
  const series = useMemo(() => {
    if (!batch || sel >= batch.completion_ids.length) return [];
    return TOKEN_SERIES.flatMap(([key, color]): Series[] => {
      const a = heatAccessor(key, batch, run);
      return a ? [{ key, color, get: (j) => a(sel, j) }] : [];
    });
  }, [batch, run, sel]);
  if (!series.length) return null;
  return <SeriesChart title={`per-token along completion of sample ${sel}`} testId="chart-tokens" n={batch!.completion_ids[sel].length} xKey="t" xTitle="completion position t" series={series} />;
}

/** The rest of a trainer's loss beyond its policy and KL terms (its entropy term), shown where it is more than float32 rounding of the loss. */
const entropyPart = (rest: number, loss: number) => (Math.abs(rest) > 1e-6 * Math.abs(loss) + 1e-9 ? ` + entropy ${fmt(rest)}` : '');

/**
 * The loss under every aggregation, before the step and after it (re-evaluated on the same batch). Under a trainer
 * objective the rows are that trainer's own aggregations (TRL's loss types, verl's loss_agg_mode, OpenRLHF's one:
 * StageData['loss'].losses), the one the update ran with marked; a studio name the trainer has no aggregation for
 * (NaN there) is not a row.
 */
function LossTable() {
  const loss = useStudio((s) => s.run.loss);
  const after = useStudio((s) => s.run.re_evaluate);
  // The aggregation the update ran with, not the form's: changing the form afterwards must not relabel these numbers.
  const lossType = useStudio(lossTypeOf);
  const rows = useMemo(() => (loss?.objective ? Object.keys(loss.losses).filter((a) => !Number.isNaN(loss.losses[a])) : [...AGGREGATIONS]), [loss]);
  if (!loss) return null;
  const c = loss.clip_counts;
  const chosen = loss.objective ? loss.aggregation : lossType;
  const titleOf = (a: string) => ((AGGREGATIONS as readonly string[]).includes(a) && !loss.objective ? aggregationTitle(a as LossType) : `${loss.objective?.trainer ?? ''} ${a}`);
  return (
    <div className="loss-values" data-testid="loss-values">
      <div className="chart-title" data-testid="loss-headline" title={titleOf(chosen)}>
        {/* Under a trainer preset the loss, its split, the gradient and every row below are that trainer's objective's. */}
        {loss.objective
          ? `loss (${loss.objective.trainer} objective, ${chosen}) ${loss.objective_error ?? `${fmt(loss.loss)} = policy ${fmt(loss.policy_term)} + KL ${fmt(loss.kl_term)}${entropyPart(loss.loss - loss.policy_term - loss.kl_term, loss.loss)}`}`
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
          {rows.map((a) => {
            const v = loss.losses[a];
            const w = after?.losses_after[a];
            return (
              <tr key={a} className={a === chosen ? 'chosen' : ''} data-agg={a} title={`${titleOf(a)}${a === chosen ? '\n(drives the gradient in this update)' : ''}`}>
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
      {!loss.per_token_kl && (
        <div className="small muted" data-testid="kl-zero-note">
          β = 0: no KL term and no reference model (TRL's default); set β to see the KL to the reference.
        </div>
      )}
      {loss.mean_kl === 0 && (
        <div className="small muted" data-testid="kl-zero-note">
          KL is 0 here: the policy is the reference on this batch (the first pass of the page's first update — same weights), so β·KL adds nothing and its gradient is 0. It moves from the second pass (μ &gt; 1) or the next update.
        </div>
      )}
      <Passes />
    </div>
  );
}

/** Max |ratio − 1| over the loss's tokens: how far a pass moved off the old policy. */
function ratioSpread(ratio: Float32Array, mask: ArrayLike<number> | undefined): number {
  let m = 0;
  for (let i = 0; i < ratio.length; i++) if (!mask || mask[i]) m = Math.max(m, Math.abs(ratio[i] - 1));
  return m;
}

/**
 * μ > 1 passes over the batch (TRL num_iterations, verl ppo_epochs): per pass its loss, mean KL, how far the
 * ratio moved off 1 and the clipped tokens, and the pass the grid's heat and the inspector follow.
 */
function Passes() {
  const loss = useStudio((s) => s.run.loss);
  const step = useStudio((s) => s.run.step);
  const mask = useStudio((s) => s.run.assemble?.padded.completion_mask);
  const pass = useStudio((s) => s.pass);
  const setPass = useStudio((s) => s.setPass);
  if (!loss || !step?.passes?.length) return null;
  const rows = [{ pass: 1, loss: loss.loss, mean_kl: loss.mean_kl, importance_ratio: loss.importance_ratio, clip_counts: loss.clip_counts }, ...step.passes];
  return (
    <div data-testid="passes">
      <label className="small">
        pass shown in the grid and inspector{' '}
        <select value={pass} onChange={(e) => setPass(Number(e.target.value))} data-testid="pass">
          {rows.map((r) => (
            <option key={r.pass} value={r.pass}>
              {r.pass}
            </option>
          ))}
        </select>
      </label>
      <PassSparklines rows={rows} />
      <table className="dense">
        <thead>
          <tr>
            <th>pass</th>
            <th>loss</th>
            <th>mean KL</th>
            <th title="max |ratio − 1| over the loss's tokens: 0 on the first pass (old = the policy before it)">max |r − 1|</th>
            <th>clipped low / high</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.pass} className={r.pass === pass ? 'chosen' : ''} data-pass={r.pass} data-clipped={r.clip_counts.low + r.clip_counts.high}>
              <td>{r.pass}</td>
              <td className="num">{fmt(r.loss, 3)}</td>
              <td className="num">{fmt(r.mean_kl, 3)}</td>
              <td className="num">{fmt(ratioSpread(r.importance_ratio, mask), 3)}</td>
              <td className="num">
                {r.clip_counts.low} / {r.clip_counts.high}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

type PassRow = { pass: number; loss: number; mean_kl: number; clip_counts: { low: number; high: number } };

/** The passes' loss, mean KL and clipped tokens as three sparklines: how the μ passes walk off the old policy. */
function PassSparklines({ rows }: { rows: readonly PassRow[] }) {
  const data = rows.map((r) => ({ pass: r.pass, loss: r.loss, kl: r.mean_kl, clipped: r.clip_counts.low + r.clip_counts.high }));
  const lines = [
    ['loss', 'loss', SERIES_COLORS.loss],
    ['kl', 'mean KL', SERIES_COLORS.kl],
    ['clipped', 'clipped tokens', SERIES_COLORS.clipped],
  ] as const;
  return (
    <div className="sparklines">
      {lines.map(([key, name, color]) => (
        <SummaryChart key={key} compact title={`${name} per pass`} testId={`pass-sparkline-${key}`} data={data} xKey="pass" xTitle="pass" series={[{ key, name, color, kind: 'line' }]} label={(r) => `pass ${String(r.pass)}`} />
      ))}
    </div>
  );
}

/**
 * The time each stage of the update took (the stepper's numbers, side by side), drawn once Run to end stops: the
 * stepper shows each stage's time as it finishes, and redrawing this recharts tree at every stage (about 300
 * components a render) was three quarters of the page's React work in an update. Stepping with Next draws it
 * at each stage.
 */
function StageTimings() {
  const times = useStudio(useShallow(doneStageTimes));
  const running = useStudio((s) => s.running);
  const data = useMemo(() => STAGES.flatMap((id, i) => (times[i] === null ? [] : [{ stage: STAGE_LABELS[id], ms: times[i] }])), [times]);
  if (running || !data.length) return null;
  const total = data.reduce((t, r) => t + r.ms, 0);
  return <SummaryChart title={`stage timings (ms; total ${fmt(total, 3)} ms)`} testId="chart-timings" data={data} xKey="stage" xTitle="stage" layout="vertical" series={[{ key: 'ms', color: SERIES_COLORS.ms }]} height={28 + 16 * data.length} label={(r) => String(r.stage)} />;
}

function GradNorms() {
  const backward = useStudio((s) => s.run.backward);
  const step = useStudio((s) => s.run.step);
  if (!backward) return null;
  const rows = Object.entries(backward.group_grad_norms);
  const max = Math.max(...rows.map(([, norm]) => (Number.isFinite(norm) ? norm : 0)), Number.MIN_VALUE);
  return (
    <div className="chart" data-testid="chart-grads">
      <div className="chart-title">{`grad norm ‖grad‖₂ per parameter group (total ${fmt(backward.grad_norm)}${step ? `, clip coef ${fmt(step.clip_coef)}` : ''})`}</div>
      {/* The batch is one rank's (or one micro-batch's) share of the trainer's optimizer step: said where the norm is. */}
      {step?.scope && (
        <div className="stale-note small" data-testid="update-scope">
          {step.scope}
        </div>
      )}
      {/* One line per group: the name, the exact norm and a bar to compare them (a non-finite norm gets a full red bar). */}
      <table className="dense grad-norms">
        <tbody>
          {rows.map(([group, norm]) => (
            <tr key={group}>
              <td>{group}</td>
              <td className="num">{fmt(norm)}</td>
              <td className="bar-cell">
                <i className={Number.isFinite(norm) ? '' : 'bad'} style={{ width: `${Number.isFinite(norm) ? (100 * norm) / max : 100}%` }} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function BeforeAfter() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const sel = useStudio((s) => s.selected?.sample ?? 0);
  const series = useMemo((): Series[] => {
    const pre = heatAccessor('logp', batch, run);
    const post = run.re_evaluate && run.assemble ? run.re_evaluate.post_per_token_logps : null;
    if (!batch || !pre || !post || sel >= batch.completion_ids.length) return [];
    const C = run.assemble!.padded.C;
    return [
      { key: 'before', color: SERIES_COLORS.before, get: (j) => pre(sel, j) },
      { key: 'after', color: SERIES_COLORS.after, get: (j) => post[sel * C + j] },
    ];
  }, [batch, run, sel]);
  if (!series.length) return null;
  return (
    <SeriesChart
      title={`log-probs before / after the step, sample ${sel} (A = ${fmt(batch!.advantages?.[sel])})`}
      testId="chart-before-after"
      n={batch!.completion_ids[sel].length}
      xKey="t"
      xTitle="completion position t"
      series={series}
      dots
    />
  );
}

export function Charts() {
  const batch = useStudio((s) => s.batch);
  return (
    <Section title="Charts">
      {!batch && <div className="muted">charts appear with a batch</div>}
      <RewardsChart />
      <LossTable />
      <GradNorms />
      <BeforeAfter />
      <TokenCurves />
      <StageTimings />
    </Section>
  );
}
