// The batch grid: one row per sample, grouped by prompt, one cell per token of prompt ⧺ completion. The
// canvas is virtual in both directions: it is as wide as the scroller and about as tall as the viewport,
// and paints only the columns in view and a window of rows around the viewport (layout.ts, paint.ts); a
// spacer as large as the whole grid gives the scrollbars their range, so 200,000 rows scroll like 16.
// Row labels on the left (lengths of ids vs every mask) exist only for the window's rows. Rows are laid out
// in display order (src/store/rows.ts: sorted / filtered, or the batch's own with a gap between groups);
// selection, hover and findings stay in sample numbers, mapped to display positions where drawn. A batch
// with turns (turns.ts) shows them as role bands, or one cell per turn (collapsed: columns are turns, and a
// turn's cell stands for its first token's column, so selection and the inspector keep working in columns).
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { hoverStore } from '../../store/hover.ts';
import { useStudio } from '../../store/index.ts';
import type { Overlay } from '../../store/session.ts';
import { ranValue } from '../../store/vocabulary.ts';
import { mismatchShown, shownRun } from '../../store/derived.ts';
import { spanColumns } from '../../view/cells.ts';
import { useBatchDiff, useGridModel } from './useGrid.ts';
import { HEATS, availableHeats, heatSource } from './heat.ts';
import { HeatControls } from './HeatControls.tsx';
import { RowControls } from './RowControls.tsx';
import { scaleOf } from '../../store/layout.ts';
import { rowOrderOf } from '../../store/rows.ts';
import { stepRow } from '../../view/row_order.ts';
import { HeatLegend, Legend, TurnLegend } from './Legends.tsx';
import { TURN_W, useTurns } from './turns.ts';
import type { TurnsView } from '../../store/session.ts';
import { HEADER_H, ROW_H, gridHeight, rowAt, rowTop, rowWindow, sameWindow, type RowWindow } from './layout.ts';
import { paintGrid, type Cell, type PaintInput } from './paint.ts';
import { RowLabel } from './RowLabel.tsx';
import { countOf } from '../panels/count.ts';

/** The mask the overlay shows, or null (no overlay, or tool_mask on a batch without one). */
function overlayMask(overlay: Overlay, hasTool: boolean): PaintInput['mask'] {
  if (overlay === 'attention') return { field: 'attention', completionOnly: false };
  if (overlay === 'completion') return { field: 'completion', completionOnly: true };
  if (overlay === 'tool' && hasTool) return { field: 'tool', completionOnly: true };
  return null;
}

export function TokenGrid() {
  const batch = useStudio((s) => s.batch);
  const batchName = useStudio((s) => s.batchName);
  // Stages under way (or done up to the batch's assembly): the grid is coming, not missing. Only the empty grid
  // shows the count: with a batch on screen it reads 0, so a stage starting does not re-render the grid.
  const stagesRun = useStudio((s) => (s.batch ? 0 : Object.values(s.stages).filter((st) => st.status !== 'pending').length));
  const run = useStudio(shownRun); // the chosen pass's ratio / KL / loss / clip (μ > 1)
  const overlay = useStudio((s) => s.overlay);
  const heat = useStudio((s) => s.heat);
  const selected = useStudio((s) => s.selected);
  const focus = useStudio((s) => s.focus);
  const setOverlay = useStudio((s) => s.setOverlay);
  const setHeat = useStudio((s) => s.setHeat);
  const select = useStudio((s) => s.select);
  const turnsView = useStudio((s) => s.turnsView);
  const setTurnsView = useStudio((s) => s.setTurnsView);
  const [cellW, setCellW] = useState(34);

  const model = useGridModel();
  const ctx = model?.ctx ?? null;
  const grid = model?.grid ?? null;
  const whatIf = useStudio((s) => s.whatIf);
  const diff = useBatchDiff();
  const mismatch = useStudio((s) => mismatchShown(s)?.result ?? null);
  const heats = useMemo(() => availableHeats(batch, run, { whatIf, diff, mismatch }), [batch, run, whatIf, diff, mismatch]);
  const scaleSettings = useStudio((s) => scaleOf(s, heat));
  const src = useMemo(() => heatSource(heat, batch, run, { whatIf, diff, mismatch }, scaleSettings), [heat, batch, run, whatIf, diff, mismatch, scaleSettings]);
  const order = useStudio(rowOrderOf);
  const focusCols = useMemo(() => (ctx && focus ? spanColumns(ctx, focus) : null), [ctx, focus]);
  const texts = useStudio((s) => s.tokenTexts);
  const turnsModel = useTurns(grid?.P);
  const turns = useMemo(() => (turnsModel && turnsView !== 'off' ? { model: turnsModel, collapsed: turnsView === 'collapsed' } : null), [turnsModel, turnsView]);
  const collapsed = turns?.collapsed ? turnsModel : null;

  const scrollRef = useRef<HTMLDivElement>(null);
  const canvasRef = useRef<HTMLCanvasElement>(null);
  const hoverRef = useRef<Cell | null>(null);

  const B = grid?.B ?? 0;
  // Display rows: N of them (all, or those the filter keeps); a sorted or filtered order is one block without group gaps.
  const N = order ? order.rows.length : B;
  const G = order ? Math.max(1, N) : (batch?.num_generations ?? 1);
  const sampleAt = (i: number) => (order ? order.rows[i] : i);
  const positionOf = (b: number) => (order ? order.position[b] : b);
  const height = gridHeight(N, G);
  // The rows drawn: the viewport of the grid body (which scrolls the rows) and the overscan around it.
  const [win, setWin] = useState<RowWindow>(() => rowWindow(0, 1000, N, G));
  const updateWindow = useCallback(() => {
    const body = scrollRef.current?.parentElement;
    if (!body) return;
    const next = rowWindow(body.scrollTop, body.clientHeight, N, G);
    setWin((w) => (sameWindow(w, next) ? w : next));
  }, [N, G]);

  const draw = useCallback(() => {
    const canvas = canvasRef.current;
    const scroller = scrollRef.current;
    if (!canvas || !scroller || !grid || win.last > N) return;
    const dpr = globalThis.devicePixelRatio || 1;
    const w = scroller.clientWidth;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(win.height * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(win.height * dpr);
      canvas.style.width = `${w}px`;
      canvas.style.height = `${win.height}px`;
    }
    // Moved down to the window by a transform, not a margin: a margin would collapse through the spacer and grow the scroll range.
    canvas.style.transform = `translateY(${win.top}px)`;
    const g = canvas.getContext('2d')!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    paintGrid(g, {
      grid,
      G,
      order,
      win,
      width: w,
      left: scroller.scrollLeft,
      cellW,
      mask: overlayMask(overlay, !!batch?.tool_mask),
      src,
      texts,
      focus: focus?.sample !== undefined ? { sample: focus.sample, cols: focusCols } : null,
      selected,
      hover: hoverRef.current,
      turns,
    });
  }, [grid, batch, cellW, overlay, src, texts, focus, focusCols, selected, win, G, N, order, turns]);

  // Every paint goes through the next animation frame (before that frame is shown): the changes of one
  // frame (a scroll, a hover, a resize) paint once, and the commit of a new batch does not also pay for
  // its first paint (a 1,024 × 2,560 import held the page 150 ms in one task with both).
  const drawRef = useRef(draw);
  const frame = useRef(0);
  const paintSoon = useCallback(() => {
    frame.current ||= requestAnimationFrame(() => {
      frame.current = 0;
      drawRef.current();
    });
  }, []);
  useLayoutEffect(() => {
    drawRef.current = draw;
    paintSoon();
  }, [draw, paintSoon]);
  useEffect(
    () => () => {
      // 0 again: a remount (React StrictMode runs effects twice) must be able to schedule a frame.
      cancelAnimationFrame(frame.current);
      frame.current = 0;
    },
    [],
  );
  // A new batch (or G) and every vertical scroll or resize of the body re-derive the window; the canvas
  // moves with the rows, so a vertical scroll inside the window repaints nothing.
  useLayoutEffect(() => updateWindow(), [updateWindow]);
  useEffect(() => {
    const el = scrollRef.current;
    const body = el?.parentElement;
    if (!el || !body) return;
    const ro = new ResizeObserver(() => {
      updateWindow();
      paintSoon();
    });
    ro.observe(el);
    ro.observe(body);
    body.addEventListener('scroll', updateWindow, { passive: true });
    return () => {
      ro.disconnect();
      body.removeEventListener('scroll', updateWindow);
    };
  }, [paintSoon, updateWindow]);

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

  // A switch of the turns view keeps the selected token (its turn, collapsed) in view; collapsed without one, the first turns.
  useEffect(() => {
    if (selected) reveal(selected.sample, selected.col);
    else if (collapsed && scrollRef.current) scrollRef.current.scrollLeft = 0;
  }, [turnsView]);

  /** Scrolls cell (sample, col) into view: columns in the grid's own scroller, rows in the body around it (none when filtered out). */
  const reveal = (sample: number, col: number) => {
    const el = scrollRef.current;
    const body = el?.parentElement;
    if (!el || !body) return;
    const [x, w] = collapsed ? [Math.max(0, collapsed.turnAt(sample, col)) * TURN_W, TURN_W] : [col * cellW, cellW];
    if (x < el.scrollLeft || x > el.scrollLeft + el.clientWidth - w) el.scrollLeft = Math.max(0, x - el.clientWidth / 3);
    const at = positionOf(sample);
    if (at < 0) return;
    const y = rowTop(at, G);
    if (y < body.scrollTop + HEADER_H) body.scrollTop = Math.max(0, y - HEADER_H);
    else if (y + ROW_H > body.scrollTop + body.clientHeight) body.scrollTop = y + ROW_H - body.clientHeight + 4;
  };

  /**
   * Arrow keys move the selected cell (Shift: by 10), Home / End to the row ends (Ctrl: the first / last
   * row), PageUp / PageDown by a screen of rows; Escape clears the selection. Up / down walk the display order.
   */
  const onKey = (e: React.KeyboardEvent) => {
    if (!grid || N === 0) return;
    const cur = selected ?? { sample: sampleAt(0), col: grid.P };
    const rowBy = (steps: number) => stepRow(order, grid.B, cur.sample, steps);
    const step = e.shiftKey ? 10 : 1;
    const page = Math.max(1, Math.floor((scrollRef.current?.parentElement?.clientHeight ?? ROW_H) / ROW_H) - 1);
    /** Collapsed: the first column of the turn `by` turns from the current one (clamped to the row's turns). */
    const turnStep = (by: number): Cell => {
      const t = collapsed!.row(cur.sample);
      const k = Math.min(t.spans.length - 1, Math.max(0, collapsed!.turnAt(cur.sample, cur.col) + by));
      return { ...cur, col: t.spans[k].start + t.offset };
    };
    const moves: Record<string, () => Cell> = {
      ArrowLeft: () => (collapsed ? turnStep(-step) : { ...cur, col: cur.col - step }),
      ArrowRight: () => (collapsed ? turnStep(step) : { ...cur, col: cur.col + step }),
      ArrowUp: () => ({ ...cur, sample: rowBy(-step) }),
      ArrowDown: () => ({ ...cur, sample: rowBy(step) }),
      PageUp: () => ({ ...cur, sample: rowBy(-page) }),
      PageDown: () => ({ ...cur, sample: rowBy(page) }),
      Home: () => (e.ctrlKey ? { ...cur, sample: sampleAt(0) } : { ...cur, col: 0 }),
      End: () => (e.ctrlKey ? { ...cur, sample: sampleAt(N - 1) } : { ...cur, col: grid.W - 1 }),
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
    const x = e.clientX - r.left + el.scrollLeft;
    const at = rowAt(e.clientY - r.top, N, G);
    if (at === null || !grid) return null;
    if (collapsed) {
      // The turn under the pointer, as its first token's column.
      const t = collapsed.row(sampleAt(at));
      const s = t.spans[Math.floor(x / TURN_W)];
      return s ? { sample: sampleAt(at), col: s.start + t.offset } : null;
    }
    const col = Math.floor(x / cellW);
    return col < 0 || col >= grid.W ? null : { sample: sampleAt(at), col };
  };

  if (!batch || !grid) {
    return (
      <div className="grid-empty" data-testid="grid-empty" data-stages-run={stagesRun}>
        {stagesRun > 0
          ? `Stepping: ${countOf(stagesRun, 'stage')} run so far; the token grid shows the batch once it is assembled.`
          : 'No batch yet. Import a grpo-batch/v1 JSON (drop it anywhere on the page), or load a model and step.'}
      </div>
    );
  }
  const adv = batch.advantages;
  const mismatchRows = grid.mismatchRows();
  const labels: number[] = [];
  for (let i = win.first; i < Math.min(win.last, N); i++) labels.push(i);
  return (
    <div className="token-grid" data-testid="token-grid" data-turns={turnsModel ? turnsView : undefined} data-rows={grid.B} data-shown={N} data-boundary={grid.P} data-width={grid.W} data-whatif={whatIf ? String(ranValue(whatIf.settings, 'loss_type')) : undefined}>
      <div className="grid-toolbar">
        <span className="muted" data-testid="batch-name">{batchName}</span>
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
                {HEATS[h].label}
              </option>
            ))}
          </select>
        </label>
        {src && <HeatControls metric={src.metric} src={src} />}
        {src && <HeatLegend src={src} />}
        <RowControls shown={N} total={grid.B} />
        {turnsModel && (
          <label title="how the grid shows each row's turns (system / user / assistant / tool call / tool response)">
            turns{' '}
            <select value={turnsView} onChange={(e) => setTurnsView(e.target.value as TurnsView)} data-testid="turns-view">
              <option value="off">off</option>
              <option value="bands">role bands</option>
              <option value="collapsed">one cell per turn</option>
            </select>
          </label>
        )}
        <label>
          zoom <input type="range" min={6} max={60} value={cellW} onChange={(e) => setCellW(Number(e.target.value))} />
        </label>
      </div>
      <Legend />
      {turns && <TurnLegend collapsed={turns.collapsed} />}
      <div className="grid-body">
        <div className="grid-labels" style={{ height }}>
          {labels.map((i) => {
            const b = sampleAt(i);
            const r = grid.readout(b);
            return (
              <div
                key={b}
                className={`grid-label${r.mismatch ? ' mismatch' : ''}${selected?.sample === b ? ' sel' : ''}`}
                style={{ top: rowTop(i, G), height: ROW_H }}
                data-testid="grid-row"
                data-sample={b}
                data-mismatch={r.mismatch ? '1' : '0'}
                data-turns={turnsModel?.row(b).spans.length}
                onClick={() => select({ sample: b, col: grid.P })}
              >
                <RowLabel r={r} adv={adv?.[b]} />
              </div>
            );
          })}
        </div>
        <div
          className="grid-scroll"
          ref={scrollRef}
          tabIndex={0}
          role="grid"
          aria-label="token grid: arrow keys move the selected token, Shift+arrow by 10, Home / End to the row ends, Ctrl+Home / Ctrl+End to the first / last sample, PageUp / PageDown by a screen"
          data-testid="grid-scroll"
          onKeyDown={onKey}
          onScroll={paintSoon}
          onMouseMove={(e) => {
            const c = cellAt(e);
            const h = hoverRef.current;
            if (c?.sample === h?.sample && c?.col === h?.col) return;
            hoverRef.current = c;
            hoverStore.getState().setCell(c);
            paintSoon();
          }}
          onMouseLeave={() => {
            hoverRef.current = null;
            hoverStore.getState().setCell(null);
            paintSoon();
          }}
          onClick={(e) => select(cellAt(e))}
        >
          <div style={{ width: collapsed ? collapsed.maxTurns() * TURN_W : grid.W * cellW, height }}>
            <canvas ref={canvasRef} className="grid-canvas" data-testid="grid-canvas" />
          </div>
        </div>
      </div>
    </div>
  );
}
