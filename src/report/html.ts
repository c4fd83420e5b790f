// A shareable report of one batch as ONE self-contained HTML file: no server, no network, nothing
// fetched — inline CSS, an inline script that paints the token grid on a canvas (only the visible cells,
// so thousands of tokens stay light), and the data as JSON in the page. It shows what a maintainer needs
// to see in an issue thread: the token grid with the prompt | completion boundary, completion_mask and
// per-token heats to switch between, the Doctor's findings (a click highlights the cells), the settings and
// the losses. When the batch holds both the sampler's and the trainer's log-probs, a train–inference
// mismatch section: the log ratio d = trainer − sampler as a heat, its summary, the worst tokens and the
// diagnoses with their rows (clicks highlight cells, as findings do). Its numbers are the caller's
// MismatchReport (src/grpo/mismatch/analysis.ts, the CLI's `mismatch` numbers; the page passes its own):
// the report formats them and computes none. Written by `grpo-studio report` and by the studio's "Save
// report" button, from the same code. Cells are classified in Node by the grid model the studio uses
// (src/view/cells.ts, pure), so the report and the page agree on every cell.
import type { DoctorReport } from '../doctor/types.ts';
import type { Diagnosis, DiagnosisRow, MismatchReport, Summary, TopToken } from '../grpo/mismatch/types.ts';
import { groupRows } from '../grpo/advantages.ts';
import type { GrpoBatch } from '../io/batch.ts';
import { buildGrid, gridContext, REGION_NAMES, spanColumns, visibleText } from '../view/cells.ts';
import { SERIES_COLORS } from '../view/chart_theme.ts';
import { REGION_COLORS, REGION_TEXT } from '../view/colors.ts';

export interface ReportInput {
  name: string;
  batch: GrpoBatch;
  report: DoctorReport;
  /** Decoded token texts (a tokenizer's), else the grid shows ids. */
  /** The tokenizer's text of each token id (src/bridge/protocol.ts TokenTexts). */
  tokenTexts?: { by_id: Record<number, string> } | null;
  specialIds?: readonly number[];
  /** The settings the numbers were computed with (the studio's loss settings, or the batch's config). */
  settings?: Record<string, unknown> | null;
  /** Losses under every aggregation, before (and after) a step; `chosen` drives the gradient. */
  losses?: { chosen: string; before: Record<string, number>; after?: Record<string, number> } | null;
  /** One per-token metric over the completions (B rows of C values), drawn as heat. */
  heat?: { label: string; rows: ArrayLike<number>[] } | null;
  /** The train–inference mismatch, when the batch has both sides (else null / absent: no section). */
  mismatch?: ReportMismatch | null;
  /** Who wrote it, e.g. "grpo-studio report" or "GRPO Studio (page)". */
  generator: string;
}

/** What the mismatch section shows: the analysis and its per-token log ratio (logRatioRows: NaN where not compared). */
export interface ReportMismatch {
  report: MismatchReport;
  /** d = trainer − sampler per completion token, ragged like completion_ids (B, C_i). */
  log_ratio: ArrayLike<number>[];
}

/** A heat as the report's script reads it: B × C values (null = no value), the colour range, the unit. */
interface HeatData {
  label: string;
  unit: string;
  rows: (number | null)[][];
  lo: number;
  hi: number;
  /** Diverging around 0 (blue below, red above, symmetric range), else sequential over [lo, hi]. */
  centred: boolean;
  /** No range (every value equal, or none): cells are painted neutral and the legend says so (`note`). */
  flat: boolean;
  note: string;
}

/** The log-ratio heat's label (the section's top tokens and diagnosis rows switch the grid to it). */
export const LOG_RATIO_HEAT = 'log ratio d = trainer − sampler';

/** A clickable place on the grid: a finding, a top token or a diagnosis row; `heat` switches the overlay. */
interface Mark {
  sample: number | null;
  cols: [number, number] | null;
  text: string;
  heat?: number;
}

/** Heat values rounded to 6 significant digits (the file stays small; the readout needs no more). */
function heatData(label: string, unit: string, rows: ArrayLike<number>[], B: number, C: number, centred: boolean): HeatData {
  let [lo, hi] = [Infinity, -Infinity];
  const u = unit ? ` ${unit}` : '';
  const out = Array.from({ length: B }, (_, b) =>
    Array.from({ length: C }, (_, j) => {
      const v = rows[b]?.[j];
      if (v === undefined || !Number.isFinite(v)) return null;
      [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
      return Number(v.toPrecision(6));
    }),
  );
  // A scale needs a range: with none, any colour would claim a difference (an all-zero heat painted
  // saturated blue read as "very low"), so the cells stay neutral and the legend names the one value.
  const flat = !(lo < hi);
  const note = lo > hi ? 'no values' : flat ? `all values are ${num(lo)}${u}` : '';
  if (lo > hi) [lo, hi] = [0, 1];
  if (centred) hi = Math.max(Math.abs(lo), Math.abs(hi), 1e-12);
  return { label, unit, rows: out, lo: centred ? -hi : lo, hi, centred, flat, note };
}

/** Per-token advantages (the sample's advantage on each of its completion tokens), the overlay every batch with advantages has. */
function advantageRows(batch: GrpoBatch): number[][] | null {
  const A = batch.advantages;
  if (!A || A.length !== batch.completion_ids.length) return null;
  return batch.completion_ids.map((ids, b) => ids.map(() => A[b]));
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A per-sample field at the precision the heats carry (6 significant digits), null when absent. */
const rounded = (v: ArrayLike<number> | undefined) => (v ? Array.from(v, (x) => (Number.isFinite(x) ? Number(x.toPrecision(6)) : null)) : null);

const num = (v: unknown) => (typeof v === 'number' ? (Number.isFinite(v) ? Number(v.toPrecision(5)).toString() : String(v)) : JSON.stringify(v));

/** JSON that is safe inside <script>: no "</script>", no HTML comment openers. */
const scriptJson = (v: unknown) => JSON.stringify(v).replace(/</g, '\\u003c');

export function renderReport(x: ReportInput): string {
  const ctx = gridContext(x.batch, x.specialIds ?? []);
  const g = buildGrid(ctx);
  const texts: string[] = new Array(g.B * g.W).fill('');
  for (let b = 0; b < g.B; b++) {
    for (let c = 0; c < g.W; c++) {
      const k = b * g.W + c;
      if (g.ids[k] < 0) continue;
      const t = x.tokenTexts?.by_id[g.ids[k]];
      texts[k] = t !== undefined ? visibleText(t) : String(g.ids[k]);
    }
  }
  const heats: HeatData[] = [];
  if (x.heat) heats.push(heatData(x.heat.label, '', x.heat.rows, g.B, g.C, false));
  const adv = advantageRows(x.batch);
  if (adv) heats.push(heatData('advantage', '', adv, g.B, g.C, true));
  const mm = x.mismatch ?? null;
  const ratioHeat = mm ? heats.push(heatData(LOG_RATIO_HEAT, 'nats', mm.log_ratio, g.B, g.C, true)) - 1 : -1;
  const marks: Mark[] = x.report.findings.map((f) => ({ sample: f.sample ?? null, cols: f.sample !== undefined ? spanColumns(ctx, f) : null, text: f.sample === undefined ? 'a finding about the whole batch' : '' }));
  const mark = (m: Mark) => marks.push(m) - 1;
  const section = mm ? mismatchSection(mm.report, (sample, position, text) => mark({ sample, cols: position === undefined ? null : spanColumns(ctx, { sample, span: [position, position + 1] }), text, heat: ratioHeat })) : '';
  const data = {
    B: g.B, P: g.P, C: g.C, W: g.W, G: x.batch.num_generations,
    region: Array.from(g.region), completion: Array.from(g.completion), flags: Array.from(g.flags), ids: Array.from(g.ids), texts,
    regionNames: REGION_NAMES, colors: REGION_COLORS, textColors: REGION_TEXT,
    heats, heat: x.heat ? 0 : mm ? ratioHeat : -1, advantages: rounded(x.batch.advantages), rewards: rounded(x.batch.rewards),
    rows: g.rows.map((r) => `#${r.sample} p${r.prompt_ids} c${r.completion_ids} m${r.completion_mask ?? '-'}`),
    marks,
  };
  const c = x.report.counts;
  const settings = x.settings ?? (x.batch.config as Record<string, unknown> | undefined) ?? {};
  const lossRows = x.losses
    ? Object.keys(x.losses.before).map((a) => `<tr${a === x.losses!.chosen ? ' class="chosen"' : ''}><td>${esc(a)}</td><td>${num(x.losses!.before[a])}</td><td>${x.losses!.after ? num(x.losses!.after[a]) : '—'}</td></tr>`).join('')
    : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>GRPO Studio report: ${esc(x.name)}</title>
<style>
body{margin:0;font:12px system-ui,'DejaVu Sans',sans-serif;background:#0d1117;color:#e6edf3}
header{padding:8px 12px;border-bottom:1px solid #30363d;background:#161b22}h1{font-size:14px;margin:0 0 4px}
main{display:grid;grid-template-columns:minmax(0,1fr) 380px;gap:10px;padding:10px}
h2{font-size:11px;text-transform:uppercase;color:#8b949e;letter-spacing:.06em;margin:8px 0 4px}
table{border-collapse:collapse;font:10.5px ui-monospace,'DejaVu Sans Mono',monospace;width:100%}td,th{border:1px solid #30363d;padding:1px 4px;text-align:left}
tr.chosen td{color:#d29922;font-weight:600}.muted{color:#8b949e}
#scroll{position:relative;overflow:auto;height:70vh;border:1px solid #30363d;background:#161b22}#grid{position:sticky;left:0;top:0;display:block}
#info{font:11px ui-monospace,monospace;min-height:3em;white-space:pre-wrap;background:#161b22;border:1px solid #30363d;padding:4px 6px;margin-top:6px}
ul{list-style:none;margin:0;padding:0}li.finding{border:1px solid #30363d;border-left:3px solid #58a6ff;border-radius:4px;padding:4px 6px;margin-bottom:4px;cursor:pointer}
li.error{border-left-color:#f85149}li.warning{border-left-color:#d29922}li.active{background:#1c2230}.hint{color:#8b949e;font-size:10.5px}
.mark{cursor:pointer}tr.mark:hover td,span.mark:hover{background:#1c2230}tr.active td,span.mark.active{background:#2a3142}
li.diagnosis{border:1px solid #30363d;border-left:3px solid #f85149;border-radius:4px;padding:4px 6px;margin-bottom:4px}
span.mark{display:inline-block;border:1px solid #30363d;border-radius:3px;padding:0 4px;margin:2px 3px 0 0;font:10.5px ui-monospace,monospace}
#mismatch td.n{text-align:right}#heat-legend i{display:inline-block;width:120px;height:10px;margin:0 4px;vertical-align:middle}
.legend span{margin-right:10px}.legend i{display:inline-block;width:12px;height:10px;margin-right:3px;vertical-align:middle}
</style></head><body>
<header><h1>GRPO Studio report: ${esc(x.name)}</h1>
<div class="muted">B=${g.B} G=${x.batch.num_generations} P=${g.P} C=${g.C} · Doctor: <span data-testid="report-counts">${c.error} error(s), ${c.warning} warning(s), ${c.info} info</span> · written by ${esc(x.generator)}; open offline, nothing is fetched</div></header>
<main><section>
<h2>Token grid</h2>
<div class="legend small">${REGION_NAMES.slice(1).map((n, i) => `<span><i style="background:${REGION_COLORS[i + 1]}"></i>${esc(n)}</span>`).join('')}<span><i style="background:#f2cc60;width:3px"></i>boundary</span><span><i style="background:#e6edf3;height:3px"></i>completion_mask = 1</span><span><i style="border:2px solid #ff4040"></i>mask ≠ region</span></div>
${heats.length ? `<div class="legend small"><label>overlay <select id="heat" data-testid="report-heat"><option value="-1">none</option>${heats.map((h, i) => `<option value="${i}">${esc(h.label)}${h.unit ? ` (${h.unit})` : ''}</option>`).join('')}</select></label> <span id="heat-legend" data-testid="report-heat-legend"></span></div>` : ''}
${groupChart(x.batch)}
<div id="scroll"><div id="sizer"><canvas id="grid"></canvas></div></div>
<div id="info" data-testid="report-info">hover a token; click a finding${mm ? ', a top token or a diagnosis row' : ''} to highlight its cells</div>
${section}
</section><aside>
<h2>Doctor findings (${x.report.findings.length})</h2>
<ul id="findings">${x.report.findings.map((f, i) => `<li class="finding mark ${f.severity}" data-mark="${i}" data-rule="${esc(f.rule)}"><b>${esc(f.severity)}</b> <code>${esc(f.rule)}</code>${f.sample !== undefined ? ` <span class="muted">sample ${f.sample}${f.span ? ` · ${esc(f.field ?? 'completion_ids')}[${f.span[0]}:${f.span[1]}]` : ''}</span>` : ' <span class="muted">whole batch</span>'}<div>${esc(f.message)}</div><div class="hint">${esc(f.hint)}</div></li>`).join('')}</ul>
${x.report.skipped.length ? `<h2>Rules skipped</h2><ul>${x.report.skipped.map((s) => `<li><code>${esc(s.rule)}</code>: ${esc(s.reason)}</li>`).join('')}</ul>` : ''}
<h2>Settings</h2><table>${Object.entries(settings).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(typeof v === 'object' ? JSON.stringify(v) : num(v))}</td></tr>`).join('')}</table>
${x.losses ? `<h2>Loss (${esc(x.losses.chosen)} drives the gradient)</h2><table><tr><th>aggregation</th><th>loss</th><th>after step</th></tr>${lossRows}</table>` : ''}
</aside></main>
<script type="application/json" id="data">${scriptJson(data)}</script>
<script>${GRID_SCRIPT}</script>
</body></html>
`;
}

/**
 * The summary chart: rewards and advantages per sample, samples of one group side by side and groups apart,
 * as inline SVG (the file fetches nothing, so no chart library), one bar chart per field with its zero line,
 * its range, a legend and a tooltip (<title>) per bar. Empty when the batch has neither field.
 */
function groupChart(batch: GrpoBatch): string {
  const B = batch.completion_ids.length;
  // The page's colours for these two quantities (view/chart_theme.ts), so the report reads like the page.
  const fields = ([['reward', batch.rewards, SERIES_COLORS.reward], ['advantage', batch.advantages, SERIES_COLORS.advantage]] as const).filter(([, v]) => v && v.length === B);
  if (!fields.length || B === 0) return '';
  const { rows } = groupRows(B, Math.max(1, batch.num_generations), batch.group_ids?.length === B ? batch.group_ids : undefined);
  const BAR = Math.max(2, Math.min(12, Math.floor(600 / B))), GAP = BAR, H = 60, LEFT = 48;
  const W = LEFT + B * BAR + rows.length * GAP;
  const chart = ([name, values, colour]: (typeof fields)[number]) => {
    const finite = Array.from(values!).filter(Number.isFinite);
    const lo = finite.reduce((m, v) => Math.min(m, v), 0), hi = finite.reduce((m, v) => Math.max(m, v), 0); // no spread: B may be 100k
    const y = (v: number) => (hi === lo ? H / 2 : ((hi - v) / (hi - lo)) * H);
    let x = LEFT;
    const bars = rows.map((group, g) => {
      const out = group.map((b) => {
        const v = values![b];
        const [y0, y1] = [Math.min(y(0), y(v)), Math.max(y(0), y(v))];
        const bar = Number.isFinite(v) ? `<rect x="${x}" y="${y0.toFixed(1)}" width="${BAR - 1}" height="${Math.max(1, y1 - y0).toFixed(1)}" fill="${colour}"><title>sample ${b} · group ${g} · ${name} ${num(v)}</title></rect>` : '';
        x += BAR;
        return bar;
      }).join('');
      x += GAP;
      return out;
    }).join('');
    return `<svg width="${W}" height="${H + 14}" role="img" aria-label="${name} per sample, by group" data-testid="report-chart-${name}"><text x="0" y="10" fill="#8b949e" font-size="10">${num(hi)}</text><text x="0" y="${H}" fill="#8b949e" font-size="10">${num(lo)}</text><line x1="${LEFT}" x2="${W}" y1="${y(0)}" y2="${y(0)}" stroke="#30363d"/>${bars}<text x="${LEFT}" y="${H + 12}" fill="#8b949e" font-size="10">${name} per sample · ${rows.length} groups</text></svg>`;
  };
  return `<h2>Rewards and advantages per group</h2><div class="legend small" data-testid="report-chart">${fields.map(([n, , c]) => `<span><i style="background:${c}"></i>${n}</span>`).join('')}</div><div style="overflow-x:auto">${fields.map(chart).join('<br>')}</div>`;
}

/** Rows of the summary table: which distribution of the report, under which name. */
const SUMMARY_ROWS: Array<[string, (r: MismatchReport) => Summary]> = [
  ['d per token', (r) => r.token.log_ratio.summary],
  ['k1 = −d per token', (r) => r.token.k1.summary],
  ['k2 = d²/2 per token', (r) => r.token.k2.summary],
  ['k3 = eᵈ − 1 − d per token', (r) => r.token.k3.summary],
  ['mean d per sequence', (r) => r.sequence.log_ratio.summary],
  ['mean k3 per sequence', (r) => r.sequence.k3.summary],
  ['Σ d per sequence', (r) => r.sequence.log_ratio_sum.summary],
];
const QUANTILES = ['p1', 'p5', 'p25', 'p50', 'p75', 'p95', 'p99'] as const;

/**
 * The mismatch section's HTML: diagnoses (evidence, fix, rows), the summary, the token classes and the top
 * tokens. `mark` registers a clickable place (a row, or one completion position of it) and returns its index.
 */
function mismatchSection(r: MismatchReport, mark: (sample: number, position: number | undefined, text: string) => number): string {
  const td = (v: number) => `<td class="n">${num(v)}</td>`;
  const chip = (row: DiagnosisRow, d: Diagnosis) => {
    const where = `#${row.sample}${row.position !== undefined ? ` [${row.position}]` : ''}${row.turn !== undefined ? ` turn ${row.turn}` : ''}`;
    return `<span class="mark" data-mark="${mark(row.sample, row.position, `${d.id}: sample ${row.sample}${row.position !== undefined ? ` · completion [${row.position}]` : ' · whole row'} · value ${num(row.value)}`)}" data-sample="${row.sample}">${esc(where)} · ${num(row.value)}</span>`;
  };
  const diagnoses = r.diagnoses.length
    ? `<ul>${r.diagnoses.map((d) => `<li class="diagnosis" data-diagnosis="${esc(d.id)}"><b>${esc(d.title)}</b> <code>${esc(d.id)}</code> <span class="muted">${d.rows.length} row(s)</span><div>${esc(d.evidence)}</div><div class="hint">fix: ${esc(d.fix)}</div><div>${d.rows.map((row) => chip(row, d)).join('')}</div></li>`).join('')}</ul>`
    : `<p class="muted" data-testid="report-mismatch-clean">no diagnosis: no rule found a pattern behind the mismatch (tolerance ${num(r.tolerance)} nats mean |d| per row)</p>`;
  const summary = `<table><tr><th>statistic</th><th>n</th><th>mean</th><th>mean |·|</th><th>min</th>${QUANTILES.map((q) => `<th>${q}</th>`).join('')}<th>max</th></tr>${SUMMARY_ROWS.map(([name, of]) => {
    const v = of(r);
    return `<tr><td>${esc(name)}</td><td class="n">${v.n}</td>${td(v.mean)}${td(v.mean_abs)}${td(v.min)}${QUANTILES.map((q) => td(v.q[q])).join('')}${td(v.max)}</tr>`;
  }).join('')}</table>`;
  const classes = `<table><tr><th>tokens of class</th><th>n</th><th>mean d</th><th>mean |d|</th><th>max |d|</th><th>share of Σ|d|</th></tr>${r.classes.map((c) => `<tr><td>${esc(c.label)}</td><td class="n">${c.tokens}</td>${td(c.mean)}${td(c.mean_abs)}${td(c.max_abs)}<td class="n">${(100 * c.share).toFixed(1)} %</td></tr>`).join('')}</table>`;
  const token = (t: TopToken) => (t.text !== undefined ? `${JSON.stringify(visibleText(t.text))} (${t.id})` : String(t.id));
  const top = `<table data-testid="report-mismatch-top"><tr><th>sample</th><th>pos</th><th>turn</th><th>token</th><th>context</th><th>p sampler</th><th>p trainer</th><th>d</th></tr>${r.top.map((t) => `<tr class="mark" data-mark="${mark(t.sample, t.position, `top token: sample ${t.sample} · completion [${t.position}] · d ${num(t.log_ratio)} nats`)}"><td class="n">${t.sample}</td><td class="n">${t.position}</td><td class="n">${t.turn}</td><td>${esc(token(t))}</td><td>${t.context !== undefined ? esc(visibleText(t.context)) : ''}</td>${td(Math.exp(t.sampler_logp))}${td(Math.exp(t.trainer_logp))}${td(t.log_ratio)}</tr>`).join('')}</table>`;
  const d = r.token.log_ratio.summary;
  return `<section id="mismatch" data-testid="report-mismatch">
<h2>Train–inference mismatch</h2>
<div class="muted">d = trainer (<code>${esc(r.trainer)}</code>) − sampler (<code>${esc(r.sampler)}</code>) in nats · ${r.tokens} tokens compared over ${r.rows} rows${r.nonfinite ? `, ${r.nonfinite} loss tokens skipped (a side is NaN / ±inf)` : ''} · mean |d| ${num(d.mean_abs)} · mean d ${num(d.mean)} · p1 ${num(d.q.p1)} · p50 ${num(d.q.p50)} · p99 ${num(d.q.p99)}${r.adapter ? ` · mean |d| with the adapter ${num(r.adapter.with_adapter_mean_abs)}, without ${num(r.adapter.base_mean_abs)}` : ''}</div>
<h2>Diagnoses (${r.diagnoses.length})</h2>${diagnoses}
<h2>Summary</h2>${summary}
<h2>By token class</h2>${classes}
<h2>Top tokens by |d| (${r.top.length})</h2>${top}
</section>`;
}

/**
 * The script's number and colour rules, exported so tests evaluate the very text the page runs
 * (`new Function(REPORT_HELPERS + 'return …')`). fmtNum: 4 significant digits, as the Doctor's findings
 * (src/doctor/util.ts showNumber), "—" for no value. heatColor: sequential heats blue low → red high,
 * centred ones (log ratio, advantage) diverge around 0: blue − · grey 0 · red +; a flat heat (no range)
 * is the neutral grey, whatever its one value.
 */
export const REPORT_HELPERS = `
  function fmtNum(v) { return v === null || v === undefined ? '—' : Number.isInteger(v) || !isFinite(v) ? String(v) : String(Number(v.toPrecision(4))); }
  function mix(a, b, t) { return 'rgb(' + a.map(function (x, i) { return Math.round(x + (b[i] - x) * t); }).join(',') + ')'; }
  function heatColor(H, v) {
    if (H.flat) return 'rgb(40,44,56)';
    var t = Math.min(1, Math.max(0, (v - H.lo) / ((H.hi - H.lo) || 1)));
    if (H.centred) return t < 0.5 ? mix([70, 130, 255], [40, 44, 56], t * 2) : mix([40, 44, 56], [255, 80, 80], (t - 0.5) * 2);
    return 'rgb(' + Math.round(70 + 185 * t) + ',' + Math.round(130 - 50 * Math.abs(t - 0.5) * 2) + ',' + Math.round(255 - 175 * t) + ')';
  }
`;

/** The report's only script: paints the visible cells, shows the hovered token, highlights a clicked finding. */
const GRID_SCRIPT = `
(function () {
  var d = JSON.parse(document.getElementById('data').textContent);
  var CW = 34, RH = 20, LW = 170, HH = 18, GAP = 6;
  var scroll = document.getElementById('scroll'), sizer = document.getElementById('sizer'), cv = document.getElementById('grid'), info = document.getElementById('info');
  var top = function (b) { return HH + b * RH + Math.floor(b / d.G) * GAP; };
  var H = d.B ? top(d.B - 1) + RH + 2 : 0;
  sizer.style.width = (LW + d.W * CW) + 'px'; sizer.style.height = H + 'px';
  var hi = null, H0 = null, sel = document.getElementById('heat'), legend = document.getElementById('heat-legend');
  ${REPORT_HELPERS}
  function heat(v) { return heatColor(H0, v); }
  function setHeat(i) {
    H0 = i >= 0 ? d.heats[i] : null; if (sel) sel.value = String(i);
    if (legend) legend.innerHTML = '';
    if (H0 && legend) {
      var u = H0.unit ? ' ' + H0.unit : '', bar = document.createElement('i');
      bar.style.background = 'linear-gradient(to right, ' + [0, 0.25, 0.5, 0.75, 1].map(function (t) { return heat(H0.lo + t * (H0.hi - H0.lo)); }).join(', ') + ')';
      if (H0.flat) legend.append(bar, H0.note + ' (no range: cells neutral)');
      else legend.append(fmtNum(H0.lo) + u, bar, fmtNum(H0.hi) + u + (H0.centred ? ' (centre 0, symmetric; beyond saturates)' : ''));
    }
    draw();
  }
  if (sel) sel.addEventListener('change', function () { setHeat(+sel.value); });
  function draw() {
    var w = scroll.clientWidth, h = Math.min(scroll.clientHeight, H), dpr = window.devicePixelRatio || 1;
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr); cv.style.width = w + 'px'; cv.style.height = h + 'px';
    var x0 = scroll.scrollLeft, y0 = scroll.scrollTop, c = cv.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0); c.fillStyle = '#0e1117'; c.fillRect(0, 0, w, h);
    c.font = '10px ui-monospace, monospace'; c.textBaseline = 'middle';
    var c0 = Math.max(0, Math.floor(x0 / CW)), c1 = Math.min(d.W, Math.ceil((x0 + w - LW) / CW));
    for (var b = 0; b < d.B; b++) {
      var y = top(b) - y0; if (y + RH < HH || y > h) continue;
      for (var col = c0; col < c1; col++) {
        var k = b * d.W + col, x = LW + col * CW - x0, reg = d.region[k]; if (!reg) continue;
        var j = col - d.P, hvv = H0 && j >= 0 ? H0.rows[b][j] : null;
        c.fillStyle = hvv !== null && hvv !== undefined ? heat(hvv) : d.colors[reg]; c.fillRect(x + 0.5, y + 0.5, CW - 1, RH - 1);
        if (j >= 0 && d.completion[k] === 0) { c.fillStyle = 'rgba(0,0,0,0.6)'; c.fillRect(x + 0.5, y + 0.5, CW - 1, RH - 1); }
        if (j >= 0 && d.completion[k] === 1) { c.fillStyle = '#e6edf3'; c.fillRect(x + 1, y + RH - 4, CW - 2, 3); }
        c.fillStyle = hvv !== null && hvv !== undefined ? (H0.centred ? '#e6edf3' : '#0d1117') : d.textColors[reg]; var t = d.texts[k]; c.fillText(t.length > 4 ? t.slice(0, 4) + '…' : t, x + 3, y + RH / 2);
        if (d.flags[k]) { c.strokeStyle = '#ff4040'; c.lineWidth = 2; c.strokeRect(x + 1.5, y + 1.5, CW - 3, RH - 3); c.lineWidth = 1; }
      }
      if (hi && hi.sample === b) { c.strokeStyle = '#f2cc60'; c.lineWidth = 2; c.strokeRect(LW + hi.c0 * CW - x0 + 1, y + 1, (hi.c1 - hi.c0) * CW - 2, RH - 2); c.lineWidth = 1; }
      c.fillStyle = '#161b22'; c.fillRect(0, y, LW, RH); c.fillStyle = '#8b949e'; c.fillText(d.rows[b] + (d.advantages ? '  A=' + (+d.advantages[b]).toFixed(2) : ''), 4, y + RH / 2);
    }
    c.fillStyle = '#f2cc60'; var bx = LW + d.P * CW - x0; if (bx >= LW) c.fillRect(bx - 1, HH - 4, 2, h);
    c.fillStyle = '#161b22'; c.fillRect(0, 0, w, HH); c.fillStyle = '#7d8590';
    for (var cc = c0; cc < c1; cc++) if ((cc - d.P) % 5 === 0) c.fillText(String(cc - d.P), LW + cc * CW - x0 + 2, HH / 2);
  }
  function cellAt(e) {
    var r = cv.getBoundingClientRect(), x = e.clientX - r.left + scroll.scrollLeft - LW, y = e.clientY - r.top + scroll.scrollTop;
    if (x < 0) return null; var col = Math.floor(x / CW);
    for (var b = 0; b < d.B; b++) if (y >= top(b) && y < top(b) + RH && col < d.W) return { b: b, col: col };
    return null;
  }
  cv.addEventListener('mousemove', function (e) {
    var p = cellAt(e); if (!p) return; var k = p.b * d.W + p.col, j = p.col - d.P;
    info.textContent = 'sample ' + p.b + ' · column ' + p.col + (j >= 0 ? ' (completion [' + j + '])' : ' (prompt)') + ' · ' + d.regionNames[d.region[k]] +
      '\\nid ' + d.ids[k] + '  text ' + JSON.stringify(d.texts[k]) + (j >= 0 ? '  completion_mask ' + d.completion[k] : '') +
      (H0 && j >= 0 && H0.rows[p.b][j] !== null ? '  ' + H0.label + ' ' + fmtNum(H0.rows[p.b][j]) + (H0.unit ? ' ' + H0.unit : '') : '') + (d.rewards ? '\\nreward ' + fmtNum(d.rewards[p.b]) : '') + (d.advantages ? '  advantage ' + fmtNum(d.advantages[p.b]) : '');
  });
  // Findings, top tokens and diagnosis rows: d.marks[data-mark] is the place; a mismatch mark shows the log-ratio heat.
  document.addEventListener('click', function (e) {
    var el = e.target.closest('[data-mark]'); if (!el) return;
    Array.prototype.forEach.call(document.querySelectorAll('.active'), function (x) { x.classList.remove('active'); }); el.classList.add('active');
    var f = d.marks[+el.dataset.mark];
    if (f.heat !== undefined && f.heat >= 0 && d.heats[f.heat] !== H0) setHeat(f.heat);
    if (f.sample === null) { hi = null; info.textContent = f.text; draw(); return; }
    var c0 = f.cols ? f.cols[0] : 0, c1 = f.cols ? Math.max(f.cols[1], c0 + 1) : d.W;
    hi = { sample: f.sample, c0: c0, c1: c1 };
    scroll.scrollTop = Math.max(0, top(f.sample) - 40); scroll.scrollLeft = Math.max(0, c0 * CW - 200);
    info.textContent = (f.text ? f.text + '\\n' : '') + 'sample ' + f.sample + (f.cols ? ' · columns ' + c0 + '…' + (c1 - 1) : ' · whole row'); draw();
  });
  scroll.addEventListener('scroll', function () { requestAnimationFrame(draw); });
  window.addEventListener('resize', draw);
  scroll.scrollLeft = Math.max(0, d.P * CW - 300);
  setHeat(d.heat);
})();
`;
