// The train–inference mismatch explorer (issue 22): where the sampler's log-probs of the sampled tokens (vLLM,
// SGLang, the studio's own generate) and the trainer's disagree on the batch on screen, and why. Everything it
// shows is the worker's analysis (src/grpo/mismatch, the same report as `grpo-studio mismatch` and the offline
// report): the page only lays out a small report — the sides compared, the distribution of d = trainer −
// sampler and of k1 / k2 / k3 per token and per sequence, the histogram of d, d against the sampler's
// probability, the worst tokens (each a link to its cell), the token classes and the diagnoses with their rows,
// evidence and fix. The grid's "log ratio" heat shows d per token. "Recompute" scores the trainer side with the
// loaded model in the worker (and the base, with its LoRA adapter off, when one is loaded).
import { useEffect } from 'react';
import { useStudio } from '../../store/index.ts';
import { mismatchShown, mismatchTarget } from '../../store/derived.ts';
import { openMismatch, runMismatch } from '../../store/controller.ts';
import type { Distribution, MismatchReport, Statistic, TopToken } from '../../grpo/mismatch/types.ts';
import { visibleText } from '../../view/cells.ts';
import { CHART_THEME } from '../../view/chart_theme.ts';
import { SummaryChart } from '../chart/SummaryChart.tsx';
import { fmt } from '../fields.tsx';
import { MismatchCorrections } from './MismatchCorrections.tsx';
import type { MismatchResult } from '../../bridge/protocol.ts';

/** The header's control: shown whenever a batch is on screen; opens and closes the explorer. */
export function MismatchOpenButton() {
  const hasBatch = useStudio((s) => !!s.batch);
  const open = useStudio((s) => s.mismatchOpen);
  if (!hasBatch) return null;
  return (
    <button onClick={() => openMismatch(!open)} aria-pressed={open} data-testid="mismatch-open" title="where and why the sampler's and the trainer's log-probs of the sampled tokens disagree">
      Mismatch explorer
    </button>
  );
}

const SIDE_TEXT: Record<MismatchReport['sampler'] | MismatchReport['trainer'], string> = {
  sampling_per_token_logps: 'sampling_per_token_logps (the sampler, as dumped)',
  old_per_token_logps: 'old_per_token_logps (the trainer, as dumped or the policy before the step)',
  recomputed: 'recomputed with the loaded model',
  recomputed_base: 'recomputed with the loaded model, adapter off (base)',
};

const STAT_TEXT: Record<Statistic | 'log_ratio_sum', string> = {
  log_ratio: 'd = log π_train − log π_sampler',
  k1: 'k1 = −d',
  k2: 'k2 = d² / 2',
  k3: 'k3 = exp(d) − 1 − d',
  log_ratio_sum: 'Σ d (sequence IS log-weight)',
};

const QUANTILES = ['p1', 'p5', 'p50', 'p95', 'p99'] as const;

function SummaryTable({ r }: { r: MismatchReport }) {
  const line = (k: string, label: string, d: Distribution) => (
    <tr key={k}>
      <td title={STAT_TEXT[label as Statistic]}>{label}</td>
      <td className="num">{d.summary.n}</td>
      <td className="num">{fmt(d.summary.mean, 3)}</td>
      <td className="num">{fmt(d.summary.mean_abs, 3)}</td>
      {QUANTILES.map((q) => (
        <td key={q} className="num">
          {fmt(d.summary.q[q], 3)}
        </td>
      ))}
      <td className="num">{fmt(d.summary.max, 3)}</td>
    </tr>
  );
  const stats: Statistic[] = ['log_ratio', 'k1', 'k2', 'k3'];
  return (
    <div className="scroll-x">
      <table className="dense" data-testid="mismatch-summary">
        <thead>
          <tr>
            <th />
            <th>n</th>
            <th>mean</th>
            <th>mean |·|</th>
            {QUANTILES.map((q) => (
              <th key={q}>{q}</th>
            ))}
            <th>max</th>
          </tr>
        </thead>
        <tbody>
          <tr>
            <td colSpan={10} className="muted">
              per token
            </td>
          </tr>
          {stats.map((k) => line(`t.${k}`, k, r.token[k]))}
          <tr>
            <td colSpan={10} className="muted">
              per sequence (row means)
            </td>
          </tr>
          {[...stats, 'log_ratio_sum' as const].map((k) => line(`s.${k}`, k, r.sequence[k]))}
        </tbody>
      </table>
    </div>
  );
}

/** One bin of a mismatch plot: its x label, its value, the colour of its sign and the tooltip's sentence. */
type BinRow = { bin: string; value: number; fill: string; title: string };

/** A signed bar per bin (d > 0 and d < 0 in the theme's two colours), on the summary charts' recharts frame. */
function Bins({ rows, name, xTitle, testId, caption }: { rows: BinRow[]; name: string; xTitle: string; testId: string; caption: string }) {
  return <SummaryChart title={caption} testId={testId} data={rows} xKey="bin" xTitle={xTitle} series={[{ key: 'value', name, color: CHART_THEME.positive }]} label={(r) => String(r.title)} zeroLine height={130} />;
}

const signFill = (negative: boolean) => (negative ? CHART_THEME.negative : CHART_THEME.positive);

function Histogram({ d }: { d: Distribution }) {
  const h = d.histogram;
  const width = (h.hi - h.lo) / h.counts.length;
  const rows = h.counts.map((c, i) => {
    const [lo, hi] = [h.lo + i * width, h.lo + (i + 1) * width];
    return { bin: fmt((lo + hi) / 2, 3), value: c, fill: signFill((lo + hi) / 2 < 0), title: `d in [${fmt(lo, 3)}, ${fmt(hi, 3)}): ${c} tokens` };
  });
  return <Bins testId="mismatch-histogram" rows={rows} name="tokens" xTitle="d per token (nats, bin centre)" caption={`histogram of d per token (${h.under} below ${fmt(h.lo, 3)}, ${h.over} above ${fmt(h.hi, 3)} nats)`} />;
}

function ByProbability({ r }: { r: MismatchReport }) {
  // Empty bins are left out: a mean over no tokens is no value.
  const bins = r.by_probability.filter((b) => b.tokens > 0);
  if (bins.length === 0) return null;
  const rows = bins.map((b) => ({ bin: fmt((b.lo + b.hi) / 2, 2), value: b.mean, fill: signFill(b.mean < 0), title: `sampler probability in [${fmt(b.lo, 3)}, ${fmt(b.hi, 3)}): ${b.tokens} tokens, mean d ${fmt(b.mean, 3)}, mean |d| ${fmt(b.mean_abs, 3)}` }));
  return <Bins testId="mismatch-by-probability" rows={rows} name="mean d" xTitle="sampler probability exp(sampler) (bin centre)" caption="mean d by the sampler's probability of the token (empty bins left out)" />;
}

function TopTokens({ r }: { r: MismatchReport }) {
  const setFocus = useStudio((s) => s.setFocus);
  // Selects the token's cell and scrolls it into view: the grid follows a focus as it does a Doctor finding's.
  const go = (t: TopToken) => setFocus({ sample: t.sample, field: 'completion_ids', span: [t.position, t.position + 1], rule: 'mismatch' });
  return (
    <table className="dense mismatch-top" data-testid="mismatch-top">
      <thead>
        <tr>
          <th>token</th>
          <th>context</th>
          <th title="sample / completion position / assistant turn">sample · pos</th>
          <th title="exp(sampler log-prob)">p sampler</th>
          <th title="exp(trainer log-prob)">p trainer</th>
          <th title="trainer − sampler, nats">d</th>
        </tr>
      </thead>
      <tbody>
        {r.top.map((t) => (
          <tr key={`${t.sample}.${t.position}`} className="link-row" tabIndex={0} data-sample={t.sample} data-position={t.position} onClick={() => go(t)} onKeyDown={(e) => e.key === 'Enter' && go(t)} title="select this token in the grid">
            <td className="mono">{t.text === undefined ? `#${t.id}` : JSON.stringify(visibleText(t.text))}</td>
            <td className="mono small">{t.context === undefined ? '' : visibleText(t.context)}</td>
            <td className="num">
              {t.sample} · {t.position}
              {t.turn > 1 ? ` (turn ${t.turn})` : ''}
            </td>
            <td className="num">{fmt(Math.exp(t.sampler_logp), 3)}</td>
            <td className="num">{fmt(Math.exp(t.trainer_logp), 3)}</td>
            <td className="num">{fmt(t.log_ratio, 3)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Classes({ r }: { r: MismatchReport }) {
  return (
    <table className="dense" data-testid="mismatch-classes">
      <thead>
        <tr>
          <th>tokens</th>
          <th>n</th>
          <th>mean d</th>
          <th>mean |d|</th>
          <th>max |d|</th>
          <th title="share of the batch's Σ|d| these tokens hold">share</th>
        </tr>
      </thead>
      <tbody>
        {r.classes.map((c) => (
          <tr key={c.id} data-class={c.id}>
            <td>{c.label}</td>
            <td className="num">{c.tokens}</td>
            <td className="num">{fmt(c.mean, 3)}</td>
            <td className="num">{fmt(c.mean_abs, 3)}</td>
            <td className="num">{fmt(c.max_abs, 3)}</td>
            <td className="num">{`${(c.share * 100).toFixed(1)} %`}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Diagnoses({ r }: { r: MismatchReport }) {
  const setFocus = useStudio((s) => s.setFocus);
  if (r.diagnoses.length === 0) {
    return (
      <ul className="mismatch-diagnoses" data-testid="mismatch-diagnoses">
        <li className="muted small">no diagnosis: no rule's pattern is on this batch (mean |d| per row tolerance {fmt(r.tolerance, 3)})</li>
      </ul>
    );
  }
  return (
    <ul className="mismatch-diagnoses" data-testid="mismatch-diagnoses">
      {r.diagnoses.map((d) => (
        <li key={d.id} data-diagnosis={d.id} data-rows={d.rows.map((x) => x.sample).join(',')}>
          <div>
            <b>{d.title}</b> <span className="tag">{d.id}</span>
          </div>
          <div className="small">{d.evidence}</div>
          <div className="small ok">fix: {d.fix}</div>
          <div className="small muted">
            rows:{' '}
            {d.rows.map((x) => (
              <button
                key={x.sample}
                className="link-button small"
                title={`value ${fmt(x.value, 4)}${x.turn !== undefined ? `, turn ${x.turn}` : ''}`}
                onClick={() => setFocus({ sample: x.sample, field: 'completion_ids', span: [x.position ?? 0, (x.position ?? 0) + 1], rule: `mismatch:${d.id}` })}
              >
                #{x.sample}
                {x.position !== undefined ? `@${x.position}` : ''}
              </button>
            ))}
          </div>
        </li>
      ))}
    </ul>
  );
}

function Report({ result, r }: { result: MismatchResult; r: MismatchReport }) {
  return (
    <>
      <div className="kv small" data-testid="mismatch-sides" data-sampler={r.sampler} data-trainer={r.trainer} data-tokens={r.tokens} data-mean-abs={r.token.log_ratio.summary.mean_abs} data-tolerance={r.tolerance}>
        <span>sampler</span>
        <span>{SIDE_TEXT[r.sampler]}</span>
        <span>trainer</span>
        <span>{SIDE_TEXT[r.trainer]}</span>
        {r.adapter && (
          <>
            <span>adapter</span>
            <span data-testid="mismatch-adapter">
              mean |d| with the adapter {fmt(r.adapter.with_adapter_mean_abs, 3)}, base (adapter off) {fmt(r.adapter.base_mean_abs, 3)}
            </span>
          </>
        )}
        <span>compared</span>
        <span data-testid="mismatch-tokens">
          {r.tokens} tokens in {r.rows} rows{r.nonfinite ? `, ${r.nonfinite} loss tokens skipped (a side not finite)` : ''}
        </span>
      </div>
      <h4>Why</h4>
      <Diagnoses r={r} />
      <h4>Distribution</h4>
      <SummaryTable r={r} />
      <Histogram d={r.token.log_ratio} />
      <ByProbability r={r} />
      <h4>Largest mismatch</h4>
      <TopTokens r={r} />
      <h4>By token class</h4>
      <Classes r={r} />
      <h4>What a correction would do</h4>
      <MismatchCorrections analysis={result} />
    </>
  );
}

export function MismatchPanel() {
  const open = useStudio((s) => s.mismatchOpen);
  const key = useStudio((s) => mismatchTarget(s).key);
  const reason = useStudio((s) => {
    const t = mismatchTarget(s);
    return t.key ? null : t.reason;
  });
  const shown = useStudio(mismatchShown);
  const modelReady = useStudio((s) => s.modelStatus === 'ready');
  const adapter = useStudio((s) => !!s.model?.adapter);
  // Each batch shown while the explorer is open is analysed once (a new import, an update reaching its loss stage).
  useEffect(() => {
    if (open && key && !shown) void runMismatch();
  }, [open, key]);
  if (!open) return null;
  const result = shown?.result ?? null;
  return (
    <section className="mismatch-drawer" data-testid="mismatch-panel" data-status={shown?.status ?? 'idle'} aria-label="train–inference mismatch explorer">
      <div className="row">
        <h3 className="grow">Train–inference mismatch</h3>
        <button className="x" title="close" onClick={() => openMismatch(false)}>
          ×
        </button>
      </div>
      <div className="row">
        <button
          disabled={!modelReady || !key || shown?.status === 'busy'}
          onClick={() => void runMismatch(true)}
          data-testid="mismatch-recompute"
          title={adapter ? 'score the trainer side with the loaded model and its LoRA adapter, and the base with the adapter off, in the worker' : 'score the trainer side with the loaded model in the worker'}
        >
          Recompute trainer side with the loaded model
        </button>
        {result?.recomputed && (
          <button onClick={() => void runMismatch(false)} title="back to the batch's own trainer side (old_per_token_logps)" data-testid="mismatch-dumped">
            Use the batch's
          </button>
        )}
      </div>
      {reason && <div className="muted small">{reason}</div>}
      {shown?.status === 'busy' && <div className="muted small">computing in the worker…</div>}
      {result?.missing && (
        <div className="warn" data-testid="mismatch-missing">
          This batch lacks a side: {result.missing}
        </div>
      )}
      {result?.report && <Report result={result} r={result.report} />}
    </section>
  );
}
