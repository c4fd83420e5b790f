// Paints the token grid's window onto its canvas: the rows of the virtual window (layout.ts) and the
// columns in view, nothing else, so one frame costs the same for 16 rows or 200,000. Colours give the
// region (pad / prompt / special / completion / EOS / after EOS); a bright line marks the prompt →
// completion boundary; a mask overlay dims cells with mask 0 and hatches missing entries; cells where a
// mask disagrees with its region get a red frame; a heat overlay colours completion tokens by a metric. A
// multi-turn batch's turns (paint_turns.ts) band the cells by role, or collapse each row to one cell per turn.
import type { TokenTexts } from '../../bridge/protocol.ts';
import { REGION, emptyCells, visibleText } from '../../view/cells.ts';
import { REGION_COLORS, REGION_TEXT } from '../../view/colors.ts';
import { heatColor, heatTextColor, type HeatSource } from './heat.ts';
import { HEADER_H, ROW_H, rowTop, type RowWindow } from './layout.ts';
import type { GridView } from './useGrid.ts';
import type { RowOrder } from '../../view/row_order.ts';
import { collapsedExtent, paintTurnBands, paintTurnCells } from './paint_turns.ts';
import { TURN_W, type TurnsModel } from './turns.ts';

export type Cell = { sample: number; col: number };

export interface PaintInput {
  grid: GridView;
  /** Rows per group of the layout (layout.ts): the batch's G, or the row count when the order is sorted / filtered. */
  G: number;
  /** Display position → sample and back (src/view/row_order.ts); null: the batch's own order. */
  order: RowOrder | null;
  win: RowWindow;
  /** The canvas' CSS width (the scroller's visible width) and the scroller's scrollLeft. */
  width: number;
  left: number;
  cellW: number;
  /** Which mask the overlay shows (null: none); the completion-side masks cover only the completion. */
  mask: { field: 'attention' | 'completion' | 'tool'; completionOnly: boolean } | null;
  src: HeatSource | null;
  texts: TokenTexts | null;
  /** A finding's span [start, end) on its sample (cols null: the whole row). */
  focus: { sample: number; cols: [number, number] | null } | null;
  selected: Cell | null;
  hover: Cell | null;
  /** The batch's turns (null: none shown): role bands over the tokens, or one cell per turn (collapsed). */
  turns: { model: TurnsModel; collapsed: boolean } | null;
}

export function paintGrid(g: CanvasRenderingContext2D, p: PaintInput): void {
  const { grid, G, win, width: w, left, cellW, mask, src, texts, turns } = p;
  const collapsed = turns?.collapsed ? turns.model : null;
  const top = win.top;
  g.fillStyle = REGION_COLORS[0];
  g.fillRect(0, 0, w, win.height);
  const c0 = Math.max(0, Math.floor(left / cellW));
  const c1 = Math.min(grid.W, Math.ceil((left + w) / cellW));
  const showText = cellW >= 18;
  const maxChars = Math.max(1, Math.floor((cellW - 4) / 6.2));
  g.font = '10px ui-monospace, "DejaVu Sans Mono", monospace';
  g.textBaseline = 'middle';
  // Column ruler (positions relative to the boundary), when the window starts at the top.
  if (top === 0 && collapsed) {
    g.fillStyle = '#7d8590';
    for (let k = Math.floor(left / TURN_W); k * TURN_W < left + w; k++) g.fillText(`turn ${k + 1}`, k * TURN_W - left + 2, HEADER_H / 2);
  } else if (top === 0) {
    g.fillStyle = '#7d8590';
    for (let c = c0; c < c1; c++) {
      const rel = c - grid.P;
      if (rel % 10 === 0 || (cellW >= 30 && rel % 5 === 0)) g.fillText(String(rel), c * cellW - left + 2, HEADER_H / 2);
    }
  }
  const row = emptyCells(Math.max(0, c1 - c0));
  const { order } = p;
  for (let i = win.first; i < win.last; i++) {
    const b = order ? order.rows[i] : i;
    const y = rowTop(i, G) - top;
    if (collapsed) {
      paintTurnCells(g, collapsed.row(b), collapsed.sums(b), y, left, w);
      continue;
    }
    grid.cells(b, c0, c1, row);
    const bits = mask ? row[mask.field] : null;
    for (let c = c0; c < c1; c++) {
      const x = c * cellW - left;
      const k = c - c0;
      const region = row.region[k];
      const j = c - grid.P;
      const v = src && j >= 0 && region !== REGION.absent ? src.get(b, j) : undefined;
      g.fillStyle = v !== undefined ? heatColor(src!, v) : REGION_COLORS[region];
      g.fillRect(x + 0.5, y + 0.5, cellW - 1, ROW_H - 1);
      if (src && v === undefined && region !== REGION.absent) {
        g.fillStyle = 'rgba(14,17,23,0.55)';
        g.fillRect(x + 0.5, y + 0.5, cellW - 1, ROW_H - 1);
      }
      if (bits && (!mask!.completionOnly || j >= 0)) paintMaskBit(g, bits[k], region, x, y, cellW);
      // With turns shown, a token tool_mask keeps out of the loss is dimmed whatever the overlay (TRL's completion_mask is 1 there).
      if (turns && row.tool[k] === 0 && region !== REGION.absent && !(bits && bits[k] === 0)) paintMaskBit(g, 0, region, x, y, cellW);
      if (showText && region !== REGION.absent) {
        const t = texts?.by_id[row.ids[k]];
        const label = t !== undefined ? visibleText(t) : String(row.ids[k]);
        g.fillStyle = v !== undefined ? heatTextColor(src!, v) : REGION_TEXT[region];
        g.fillText(label.length > maxChars ? label.slice(0, maxChars - 1) + '…' : label, x + 3, y + ROW_H / 2);
      }
      if (row.flags[k]) paintFlag(g, x, y, cellW);
    }
    if (turns) paintTurnBands(g, turns.model.row(b), y, c0, c1, cellW, left);
  }
  // Prompt | completion boundary, from just above the first row (or the window's top) to its bottom.
  const bx = grid.P * cellW - left;
  const y0 = Math.max(0, HEADER_H - 4 - top);
  g.fillStyle = '#f2cc60';
  if (!collapsed) g.fillRect(bx - 1, y0, 2, win.height - y0);
  /** Outlines columns [cs, ce) of sample b, where its display row is in the window. */
  const outline = (b: number, cs: number, ce: number, color: string, lw: number) => {
    const i = b >= grid.B ? -1 : order ? order.position[b] : b;
    if (i < win.first || i >= win.last) return;
    const [x0, x1] = collapsed ? collapsedExtent(collapsed, b, cs, ce) : [cs * cellW, ce * cellW];
    g.strokeStyle = color;
    g.lineWidth = lw;
    g.strokeRect(x0 - left + lw / 2, rowTop(i, G) - top + lw / 2, x1 - x0 - lw, ROW_H - lw);
    g.lineWidth = 1;
  };
  const { focus, selected, hover } = p;
  if (focus && focus.cols) outline(focus.sample, focus.cols[0], Math.max(focus.cols[1], focus.cols[0] + 1), '#f2cc60', 2);
  else if (focus && focus.sample < grid.B) outline(focus.sample, 0, grid.W, '#f2cc60', 2);
  if (selected && selected.sample < grid.B) outline(selected.sample, selected.col, selected.col + 1, '#ffffff', 2);
  if (hover) outline(hover.sample, hover.col, hover.col + 1, 'rgba(255,255,255,0.6)', 1);
}

/** One mask bit (−1 none, 0, 1, 2 non-binary) as the overlay shows it. */
function paintMaskBit(g: CanvasRenderingContext2D, m: number, region: number, x: number, y: number, cellW: number): void {
  if (m === 0 && region !== REGION.absent) {
    g.fillStyle = 'rgba(0,0,0,0.6)';
    g.fillRect(x + 0.5, y + 0.5, cellW - 1, ROW_H - 1);
  } else if (m === 1 || m === 2) {
    g.fillStyle = m === 1 ? '#e6edf3' : '#ff00ff';
    g.fillRect(x + 1, y + ROW_H - 4, cellW - 2, 3);
  } else if (m === -1 && region !== REGION.absent) {
    g.strokeStyle = '#ff5555';
    g.beginPath();
    g.moveTo(x + 2, y + ROW_H - 2);
    g.lineTo(x + cellW - 2, y + 2);
    g.stroke();
  }
}

/** A red frame with a corner mark: a mask disagrees with the cell's region. */
function paintFlag(g: CanvasRenderingContext2D, x: number, y: number, cellW: number): void {
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
