// A shareable report of one batch as ONE self-contained HTML file: no server, no network, nothing
// fetched — inline CSS, an inline script that paints the token grid on a canvas (only the visible cells,
// so thousands of tokens stay light), and the data as JSON in the page. It shows what a maintainer needs
// to see in an issue thread: the token grid with the prompt | completion boundary, completion_mask and an
// optional per-token heat, the Doctor's findings (a click highlights the cells), the settings and the
// losses. Written by `grpo-studio report` and by the studio's "Save report" button, from the same code.
// Cells are classified in Node by the grid model the studio uses (src/view/cells.ts, pure), so the
// report and the page agree on every cell.
import type { DoctorReport } from '../doctor/types.ts';
import type { GrpoBatch } from '../io/batch.ts';
import { buildGrid, gridContext, REGION_NAMES, spanColumns, visibleText } from '../view/cells.ts';
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
  /** Who wrote it, e.g. "grpo-studio report" or "GRPO Studio (page)". */
  generator: string;
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

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
  const heat = x.heat ? Array.from({ length: g.B }, (_, b) => Array.from({ length: g.C }, (_, j) => { const v = x.heat!.rows[b]?.[j]; return v === undefined || !Number.isFinite(v) ? null : v; })) : null;
  const findings = x.report.findings.map((f) => {
    const cols = f.sample !== undefined ? spanColumns(ctx, f) : null;
    return { ...f, cols };
  });
  const data = {
    B: g.B, P: g.P, C: g.C, W: g.W, G: x.batch.num_generations,
    region: Array.from(g.region), completion: Array.from(g.completion), flags: Array.from(g.flags), ids: Array.from(g.ids), texts,
    regionNames: REGION_NAMES, colors: REGION_COLORS, textColors: REGION_TEXT,
    heat, heatLabel: x.heat?.label ?? null, advantages: x.batch.advantages ?? null, rewards: x.batch.rewards ?? null,
    rows: g.rows.map((r) => `#${r.sample} p${r.prompt_ids} c${r.completion_ids} m${r.completion_mask ?? '-'}`),
    findings: findings.map((f) => ({ sample: f.sample ?? null, cols: f.cols })),
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
.legend span{margin-right:10px}.legend i{display:inline-block;width:12px;height:10px;margin-right:3px;vertical-align:middle}
</style></head><body>
<header><h1>GRPO Studio report: ${esc(x.name)}</h1>
<div class="muted">B=${g.B} G=${x.batch.num_generations} P=${g.P} C=${g.C} · Doctor: <span data-testid="report-counts">${c.error} error(s), ${c.warning} warning(s), ${c.info} info</span> · written by ${esc(x.generator)}; open offline, nothing is fetched</div></header>
<main><section>
<h2>Token grid</h2>
<div class="legend small">${REGION_NAMES.slice(1).map((n, i) => `<span><i style="background:${REGION_COLORS[i + 1]}"></i>${esc(n)}</span>`).join('')}<span><i style="background:#f2cc60;width:3px"></i>boundary</span><span><i style="background:#e6edf3;height:3px"></i>completion_mask = 1</span><span><i style="border:2px solid #ff4040"></i>mask ≠ region</span>${x.heat ? `<span>heat: ${esc(x.heat.label)} (blue low → red high)</span>` : ''}</div>
<div id="scroll"><div id="sizer"><canvas id="grid"></canvas></div></div>
<div id="info" data-testid="report-info">hover a token; click a finding to highlight its cells</div>
</section><aside>
<h2>Doctor findings (${x.report.findings.length})</h2>
<ul id="findings">${findings.map((f, i) => `<li class="finding ${f.severity}" data-i="${i}" data-rule="${esc(f.rule)}"><b>${esc(f.severity)}</b> <code>${esc(f.rule)}</code>${f.sample !== undefined ? ` <span class="muted">sample ${f.sample}${f.span ? ` · ${esc(f.field ?? 'completion_ids')}[${f.span[0]}:${f.span[1]}]` : ''}</span>` : ' <span class="muted">whole batch</span>'}<div>${esc(f.message)}</div><div class="hint">${esc(f.hint)}</div></li>`).join('')}</ul>
${x.report.skipped.length ? `<h2>Rules skipped</h2><ul>${x.report.skipped.map((s) => `<li><code>${esc(s.rule)}</code>: ${esc(s.reason)}</li>`).join('')}</ul>` : ''}
<h2>Settings</h2><table>${Object.entries(settings).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(typeof v === 'object' ? JSON.stringify(v) : num(v))}</td></tr>`).join('')}</table>
${x.losses ? `<h2>Loss (${esc(x.losses.chosen)} drives the gradient)</h2><table><tr><th>aggregation</th><th>loss</th><th>after step</th></tr>${lossRows}</table>` : ''}
</aside></main>
<script type="application/json" id="data">${scriptJson(data)}</script>
<script>${GRID_SCRIPT}</script>
</body></html>
`;
}

/** The report's only script: paints the visible cells, shows the hovered token, highlights a clicked finding. */
const GRID_SCRIPT = `
(function () {
  var d = JSON.parse(document.getElementById('data').textContent);
  var CW = 34, RH = 20, LW = 170, HH = 18, GAP = 6;
  var scroll = document.getElementById('scroll'), sizer = document.getElementById('sizer'), cv = document.getElementById('grid'), info = document.getElementById('info');
  var top = function (b) { return HH + b * RH + Math.floor(b / d.G) * GAP; };
  var H = d.B ? top(d.B - 1) + RH + 2 : 0;
  sizer.style.width = (LW + d.W * CW) + 'px'; sizer.style.height = H + 'px';
  var hi = null, lo = 0, hv = 0;
  if (d.heat) { lo = Infinity; hv = -Infinity; d.heat.forEach(function (r) { r.forEach(function (v) { if (v !== null) { lo = Math.min(lo, v); hv = Math.max(hv, v); } }); }); if (lo > hv) { lo = 0; hv = 1; } }
  function heat(v) { var t = (v - lo) / ((hv - lo) || 1); var r = Math.round(70 + 185 * t), g = Math.round(130 - 50 * Math.abs(t - 0.5) * 2), b = Math.round(255 - 175 * t); return 'rgb(' + r + ',' + g + ',' + b + ')'; }
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
        var j = col - d.P, hvv = d.heat && j >= 0 ? d.heat[b][j] : null;
        c.fillStyle = hvv !== null && hvv !== undefined ? heat(hvv) : d.colors[reg]; c.fillRect(x + 0.5, y + 0.5, CW - 1, RH - 1);
        if (j >= 0 && d.completion[k] === 0) { c.fillStyle = 'rgba(0,0,0,0.6)'; c.fillRect(x + 0.5, y + 0.5, CW - 1, RH - 1); }
        if (j >= 0 && d.completion[k] === 1) { c.fillStyle = '#e6edf3'; c.fillRect(x + 1, y + RH - 4, CW - 2, 3); }
        c.fillStyle = hvv !== null && hvv !== undefined ? '#0d1117' : d.textColors[reg]; var t = d.texts[k]; c.fillText(t.length > 4 ? t.slice(0, 4) + '…' : t, x + 3, y + RH / 2);
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
      (d.heat && j >= 0 && d.heat[p.b][j] !== null ? '  ' + d.heatLabel + ' ' + d.heat[p.b][j] : '') + (d.rewards ? '\\nreward ' + d.rewards[p.b] : '') + (d.advantages ? '  advantage ' + d.advantages[p.b] : '');
  });
  document.getElementById('findings').addEventListener('click', function (e) {
    var li = e.target.closest('li.finding'); if (!li) return;
    Array.prototype.forEach.call(document.querySelectorAll('li.finding'), function (x) { x.classList.remove('active'); }); li.classList.add('active');
    var f = d.findings[+li.dataset.i];
    if (f.sample === null) { hi = null; info.textContent = 'a finding about the whole batch'; draw(); return; }
    var c0 = f.cols ? f.cols[0] : 0, c1 = f.cols ? Math.max(f.cols[1], c0 + 1) : d.W;
    hi = { sample: f.sample, c0: c0, c1: c1 };
    scroll.scrollTop = Math.max(0, top(f.sample) - 40); scroll.scrollLeft = Math.max(0, c0 * CW - 200);
    info.textContent = 'sample ' + f.sample + (f.cols ? ' · columns ' + c0 + '…' + (c1 - 1) : ' · whole row'); draw();
  });
  scroll.addEventListener('scroll', function () { requestAnimationFrame(draw); });
  window.addEventListener('resize', draw);
  scroll.scrollLeft = Math.max(0, d.P * CW - 300);
  draw();
})();
`;
