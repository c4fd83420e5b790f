// The batch grid: one row per sample, grouped by prompt, one cell per token of prompt ⧺ completion, drawn
// on a canvas that only paints the visible columns (16 rows × 1000+ tokens stay fast). Colours give the
// region (pad / prompt / special / completion / EOS / after EOS); a bright line marks the prompt →
// completion boundary; an overlay shows one mask (cells with mask 0 dimmed, missing entries hatched);
// cells where a mask disagrees with its region get a red frame; a heat overlay colours completion tokens
// by a per-token metric. Row labels on the left carry the per-row length readout of ids vs every mask.
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { hoverStore } from '../../store/hover.ts';
import { useStudio } from '../../store/index.ts';
import type { Overlay } from '../../store/session.ts';
import { fmt } from '../fields.tsx';
import { REGION, spanColumns, visibleText, type GridModel, type RowReadout } from './cells.ts';
import { useBatchDiff, useGridModel } from './useGrid.ts';
import { REGION_COLORS, REGION_TEXT } from './colors.ts';
import { HEAT_LABELS, availableHeats, heatColor, heatSource, heatTextColor } from './heat.ts';
import { HeatLegend, Legend } from './Legends.tsx';

const ROW_H = 20;
const GROUP_GAP = 6;
const HEADER_H = 18;


/** y of row b's top edge: rows of a group are packed, groups separated by a gap. */
function rowTop(b: number, G: number): number {
  return HEADER_H + b * ROW_H + Math.floor(b / G) * GROUP_GAP;
}

function rowAt(y: number, B: number, G: number): number | null {
  for (let b = 0; b < B; b++) {
    const t = rowTop(b, G);
    if (y >= t && y < t + ROW_H) return b;
  }
  return null;
}

function maskOf(grid: GridModel, overlay: Overlay): Int8Array | null {
  return overlay === 'attention' ? grid.attention : overlay === 'completion' ? grid.completion : overlay === 'tool' ? grid.tool : null;
}

function RowLabel({ r, adv }: { r: RowReadout; adv?: number }) {
  const bad = (n: number | null) => n !== null && n !== r.completion_ids;
  const title = [
    `sample ${r.sample}, group ${r.group}`,
    `prompt_ids ${r.prompt_ids}${r.prompt_mask !== null ? `, prompt_mask ${r.prompt_mask}` : ''}`,
    `completion_ids ${r.completion_ids}, completion_mask ${r.completion_mask} (Σ = ${r.masked_tokens})`,
    r.tool_mask !== null ? `tool_mask ${r.tool_mask}` : '',
    r.old_per_token_logps !== null ? `old_per_token_logps ${r.old_per_token_logps}` : '',
    r.ref_per_token_logps !== null ? `ref_per_token_logps ${r.ref_per_token_logps}` : '',
    r.first_eos >= 0 ? `first EOS at ${r.first_eos}` : 'no EOS (truncated)',
  ].filter(Boolean).join('\n');
  return (
    <>
      <span className="rl-id">#{r.sample}</span>
      <span className="rl-adv">{adv !== undefined ? (adv >= 0 ? '+' : '') + fmt(adv, 2) : ''}</span>
      <span className="rl-len" title={title}>
        <span>p{r.prompt_ids}</span>
        {r.prompt_mask !== null && <span className={r.prompt_mask !== r.prompt_ids ? 'bad' : ''}>/{r.prompt_mask}</span>}
        <span> c{r.completion_ids}</span>
        <span className={bad(r.completion_mask) ? 'bad' : ''}> m{r.completion_mask}</span>
        {r.tool_mask !== null && <span className={bad(r.tool_mask) ? 'bad' : ''}> t{r.tool_mask}</span>}
        {r.old_per_token_logps !== null && <span className={bad(r.old_per_token_logps) ? 'bad' : ''}> o{r.old_per_token_logps}</span>}
        {r.ref_per_token_logps !== null && <span className={bad(r.ref_per_token_logps) ? 'bad' : ''}> r{r.ref_per_token_logps}</span>}
        <span className="muted" title="Σm: Σ completion_mask, the tokens of this row the loss counts">
          {' '}Σm{r.masked_tokens}
        </span>
      </span>
    </>
  );
}

export function TokenGrid() {
  const batch = useStudio((s) => s.batch);
  const batchName = useStudio((s) => s.batchName);
  const run = useStudio((s) => s.run);
  const overlay = useStudio((s) => s.overlay);
  const heat = useStudio((s) => s.heat);
  const selected = useStudio((s) => s.selected);
  const focus = useStudio((s) => s.focus);
  const setOverlay = useStudio((s) => s.setOverlay);
  const setHeat = useStudio((s) => s.setHeat);
  const select = useStudio((s) => s.select);
  const [cellW, setCellW] = useState(34);

  const model = useGridModel();
  const ctx = model?.ctx ?? null;
  const grid = model?.grid ?? null;
  const whatIf = useStudio((s) => s.whatIf);
  const diff = useBatchDiff();
  const heats = useMemo(() => availableHeats(batch, run, { whatIf, diff }), [batch, run, whatIf, diff]);
  const src = useMemo(() => heatSource(heat, batch, run, { whatIf, diff }), [heat, batch, run, whatIf, diff]);
  const focusCols = useMemo(() => (ctx && focus ? spanColumns(ctx, focus) : null), [ctx, focus]);
  const texts = useStudio((s) => s.tokenTexts);

  const scrollRef = useRef<HTMLDivElement>(null);
  const canvasRef = useRef<HTMLCanvasElement>(null);
  const hoverRef = useRef<{ sample: number; col: number } | null>(null);

  const G = batch?.num_generations ?? 1;
  const B = grid?.B ?? 0;
  const height = B > 0 ? rowTop(B - 1, G) + ROW_H + 2 : 0;

  const draw = useCallback(() => {
    const canvas = canvasRef.current;
    const scroller = scrollRef.current;
    if (!canvas || !scroller || !grid) return;
    const dpr = globalThis.devicePixelRatio || 1;
    const w = scroller.clientWidth;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = `${w}px`;
      canvas.style.height = `${height}px`;
    }
    const g = canvas.getContext('2d')!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = REGION_COLORS[0];
    g.fillRect(0, 0, w, height);
    const left = scroller.scrollLeft;
    const c0 = Math.max(0, Math.floor(left / cellW));
    const c1 = Math.min(grid.W, Math.ceil((left + w) / cellW));
    const mask = overlay === 'tool' && !batch?.tool_mask ? null : maskOf(grid, overlay);
    const showText = cellW >= 18;
    const maxChars = Math.max(1, Math.floor((cellW - 4) / 6.2));
    g.font = '10px ui-monospace, "DejaVu Sans Mono", monospace';
    g.textBaseline = 'middle';
    // Column ruler: positions relative to the boundary.
    g.fillStyle = '#7d8590';
    for (let c = c0; c < c1; c++) {
      const rel = c - grid.P;
      if (rel % 10 === 0 || (cellW >= 30 && rel % 5 === 0)) g.fillText(String(rel), c * cellW - left + 2, HEADER_H / 2);
    }
    for (let b = 0; b < grid.B; b++) {
      const y = rowTop(b, G);
      for (let c = c0; c < c1; c++) {
        const k = b * grid.W + c;
        const x = c * cellW - left;
        const region = grid.region[k];
        let fill: string = REGION_COLORS[region];
        const j = c - grid.P;
        const v = src && j >= 0 && region !== REGION.absent ? src.get(b, j) : undefined;
        if (v !== undefined) fill = heatColor(src!, v);
        g.fillStyle = fill;
        g.fillRect(x + 0.5, y + 0.5, cellW - 1, ROW_H - 1);
        if (src && v === undefined && region !== REGION.absent) {
          g.fillStyle = 'rgba(14,17,23,0.55)';
          g.fillRect(x + 0.5, y + 0.5, cellW - 1, ROW_H - 1);
        }
        // completion_mask / tool_mask cover only the completion side.
        if (mask && (overlay === 'attention' || j >= 0)) {
          const m = mask[k];
          if (m === 0 && region !== REGION.absent) {
            g.fillStyle = 'rgba(0,0,0,0.6)';
            g.fillRect(x + 0.5, y + 0.5, cellW - 1, ROW_H - 1);
          } else if (m === 1) {
            g.fillStyle = '#e6edf3';
            g.fillRect(x + 1, y + ROW_H - 4, cellW - 2, 3);
          } else if (m === 2) {
            g.fillStyle = '#ff00ff';
            g.fillRect(x + 1, y + ROW_H - 4, cellW - 2, 3);
          } else if (m === -1 && region !== REGION.absent) {
            g.strokeStyle = '#ff5555';
            g.beginPath();
            g.moveTo(x + 2, y + ROW_H - 2);
            g.lineTo(x + cellW - 2, y + 2);
            g.stroke();
          }
        }
        if (showText && region !== REGION.absent) {
          const t = texts ? (j >= 0 ? texts.completion[b]?.[j] : texts.prompt[b]?.[c - (grid.P - (texts.prompt[b]?.length ?? 0))]) : undefined;
          const label = t !== undefined ? visibleText(t) : String(grid.ids[k]);
          g.fillStyle = v !== undefined ? heatTextColor(src!, v) : REGION_TEXT[region];
          g.fillText(label.length > maxChars ? label.slice(0, maxChars - 1) + '…' : label, x + 3, y + ROW_H / 2);
        }
        if (grid.flags[k]) {
          g.strokeStyle = '#ff4040';
          g.lineWidth = 2;
          g.strokeRect(x + 1.5, y + 1.5, cellW - 3, ROW_H - 3);
          g.lineWidth = 1;
          g.fillStyle = '#ff4040';
          g.beginPath();
          g.moveTo(x + cellW - 7, y + 1);
          g.lineTo(x + cellW - 1, y + 1);
          g.lineTo(x + cellW - 1, y + 7);
          g.fill();
        }
      }
    }
    // Prompt | completion boundary.
    const bx = grid.P * cellW - left;
    g.fillStyle = '#f2cc60';
    g.fillRect(bx - 1, HEADER_H - 4, 2, height - HEADER_H + 4);
    const outline = (b: number, cs: number, ce: number, color: string, lw: number) => {
      g.strokeStyle = color;
      g.lineWidth = lw;
      g.strokeRect(cs * cellW - left + lw / 2, rowTop(b, G) + lw / 2, (ce - cs) * cellW - lw, ROW_H - lw);
      g.lineWidth = 1;
    };
    if (focus?.sample !== undefined && focusCols) outline(focus.sample, focusCols[0], Math.max(focusCols[1], focusCols[0] + 1), '#f2cc60', 2);
    else if (focus?.sample !== undefined && focus.sample < grid.B) outline(focus.sample, 0, grid.W, '#f2cc60', 2);
    if (selected && selected.sample < grid.B) outline(selected.sample, selected.col, selected.col + 1, '#ffffff', 2);
    const h = hoverRef.current;
    if (h) outline(h.sample, h.col, h.col + 1, 'rgba(255,255,255,0.6)', 1);
  }, [grid, batch, cellW, overlay, src, texts, focus, focusCols, selected, height, G]);

  useLayoutEffect(() => draw(), [draw]);
  useEffect(() => {
    const el = scrollRef.current;
    if (!el) return;
    const ro = new ResizeObserver(() => draw());
    ro.observe(el);
    return () => ro.disconnect();
  }, [draw]);

  // A new batch opens on the prompt | completion boundary: the end of the prompts and as much of the
  // completions as fits (what the trainer scores), not on the left padding.
  useEffect(() => {
    const el = scrollRef.current;
    if (!el || !grid) return;
    el.scrollLeft = Math.max(0, Math.min(grid.W * cellW - el.clientWidth, grid.P * cellW - el.clientWidth / 4));
  }, [batch]);

  // A Doctor finding selects the first cell of its span and scrolls it into view.
  useEffect(() => {
    if (!focusCols || focus?.sample === undefined) return;
    select({ sample: focus.sample, col: focusCols[0] });
    reveal(focus.sample, focusCols[0]);
  }, [focusCols]);

  /** Scrolls cell (sample, col) into view: columns in the grid's own scroller, rows in the body around it. */
  const reveal = (sample: number, col: number) => {
    const el = scrollRef.current;
    const body = el?.parentElement;
    if (!el || !body) return;
    const x = col * cellW;
    if (x < el.scrollLeft || x > el.scrollLeft + el.clientWidth - cellW) el.scrollLeft = Math.max(0, x - el.clientWidth / 3);
    const y = rowTop(sample, G);
    if (y < body.scrollTop + HEADER_H) body.scrollTop = Math.max(0, y - HEADER_H);
    else if (y + ROW_H > body.scrollTop + body.clientHeight) body.scrollTop = y + ROW_H - body.clientHeight + 4;
  };

  /** Arrow keys move the selected cell (Shift: 10 columns; Home / End: row ends), Escape clears it. */
  const onKey = (e: React.KeyboardEvent) => {
    if (!grid) return;
    const cur = selected ?? { sample: 0, col: grid.P };
    const step = e.shiftKey ? 10 : 1;
    const moves: Record<string, () => { sample: number; col: number }> = {
      ArrowLeft: () => ({ ...cur, col: cur.col - step }),
      ArrowRight: () => ({ ...cur, col: cur.col + step }),
      ArrowUp: () => ({ ...cur, sample: cur.sample - step }),
      ArrowDown: () => ({ ...cur, sample: cur.sample + step }),
      Home: () => ({ ...cur, col: 0 }),
      End: () => ({ ...cur, col: grid.W - 1 }),
    };
    if (e.key === 'Escape') {
      select(null);
      return;
    }
    const move = moves[e.key];
    if (!move) return;
    e.preventDefault();
    const n = move();
    const next = { sample: Math.min(grid.B - 1, Math.max(0, n.sample)), col: Math.min(grid.W - 1, Math.max(0, n.col)) };
    select(next);
    reveal(next.sample, next.col);
  };

  const cellAt = (e: React.MouseEvent) => {
    const el = scrollRef.current!;
    const r = el.getBoundingClientRect();
    const col = Math.floor((e.clientX - r.left + el.scrollLeft) / cellW);
    const sample = rowAt(e.clientY - r.top, B, G);
    return sample === null || !grid || col < 0 || col >= grid.W ? null : { sample, col };
  };

  if (!batch || !grid) {
    return (
      <div className="grid-empty" data-testid="grid-empty">
        No batch yet. Import a grpo-batch/v1 JSON (drop it anywhere on the page), or load a model and step.
      </div>
    );
  }
  const adv = batch.advantages;
  const mismatchRows = grid.rows.filter((r) => r.mismatch).length;
  return (
    <div className="token-grid" data-testid="token-grid" data-rows={grid.B} data-boundary={grid.P} data-width={grid.W} data-whatif={whatIf?.settings.loss_type}>
      <div className="grid-toolbar">
        <span className="muted">{batchName}</span>
        <span data-testid="grid-dims">
          <abbr title="B: samples (rows) in the batch = prompts × G">B={grid.B}</abbr>{' '}
          <abbr title="G: num_generations, completions sampled per prompt (one group)">G={batch.num_generations}</abbr>{' '}
          <abbr title="P: prompt width after left padding (the widest prompt); the boundary line sits at column P">P={grid.P}</abbr>{' '}
          <abbr title="C: completion width after right padding (the longest completion); per-token arrays are (B, C)">C={grid.C}</abbr>
        </span>
        {mismatchRows > 0 && <span className="bad" data-testid="mismatch-rows">{mismatchRows} row(s) with length mismatch</span>}
        <label>
          mask overlay{' '}
          <select value={overlay} onChange={(e) => setOverlay(e.target.value as Overlay)} data-testid="overlay">
            <option value="none">none</option>
            <option value="attention">attention_mask</option>
            <option value="completion">completion_mask</option>
            <option value="tool">tool_mask</option>
          </select>
        </label>
        <label>
          heat{' '}
          <select value={heats.includes(heat) ? heat : 'none'} onChange={(e) => setHeat(e.target.value as typeof heat)} data-testid="heat">
            {heats.map((h) => (
              <option key={h} value={h}>
                {HEAT_LABELS[h]}
              </option>
            ))}
          </select>
        </label>
        {src && <HeatLegend src={src} />}
        <label>
          zoom <input type="range" min={6} max={60} value={cellW} onChange={(e) => setCellW(Number(e.target.value))} />
        </label>
      </div>
      <Legend />
      <div className="grid-body">
        <div className="grid-labels" style={{ height }}>
          {grid.rows.map((r) => (
            <div
              key={r.sample}
              className={`grid-label${r.mismatch ? ' mismatch' : ''}${selected?.sample === r.sample ? ' sel' : ''}`}
              style={{ top: rowTop(r.sample, G), height: ROW_H }}
              data-testid="grid-row"
              data-sample={r.sample}
              data-mismatch={r.mismatch ? '1' : '0'}
              onClick={() => select({ sample: r.sample, col: grid.P })}
            >
              <RowLabel r={r} adv={adv?.[r.sample]} />
            </div>
          ))}
        </div>
        <div
          className="grid-scroll"
          ref={scrollRef}
          tabIndex={0}
          role="grid"
          aria-label="token grid: arrow keys move the selected token, Shift+arrow by 10, Home / End to the row ends"
          data-testid="grid-scroll"
          onKeyDown={onKey}
          onScroll={() => requestAnimationFrame(draw)}
          onMouseMove={(e) => {
            const c = cellAt(e);
            const h = hoverRef.current;
            if (c?.sample === h?.sample && c?.col === h?.col) return;
            hoverRef.current = c;
            hoverStore.getState().setCell(c);
            requestAnimationFrame(draw);
          }}
          onMouseLeave={() => {
            hoverRef.current = null;
            hoverStore.getState().setCell(null);
            requestAnimationFrame(draw);
          }}
          onClick={(e) => select(cellAt(e))}
        >
          <div style={{ width: grid.W * cellW, height }}>
            <canvas ref={canvasRef} className="grid-canvas" data-testid="grid-canvas" />
          </div>
        </div>
      </div>
    </div>
  );
}
