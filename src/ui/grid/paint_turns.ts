// Paints a row's turns on the grid's canvas (called by paint.ts per drawn row): over the tokens, a thin band
// at the top of each cell in its turn's role colour, a separator where a turn starts and a dashed outline on
// stored tokens that differ from the chat template's render; or, collapsed, one cell per turn with its role,
// tokens / tokens in the loss and Σ loss, dimmed where none of its tokens is in the loss (a tool response).
import { ROLE_COLORS, RETOKENIZED_COLOR } from '../../view/colors.ts';
import { ROLE_NAMES, type TurnSums } from '../../view/turns.ts';
import { fmt } from '../fields.tsx';
import { ROW_H } from './layout.ts';
import { TURN_W, type ColumnTurns, type TurnsModel } from './turns.ts';

/** The role band's height: thin enough to leave the token's text readable. */
const BAND_H = 3;

/** Role bands, turn separators and re-tokenization outlines over columns [c0, c1) of one row at y. */
export function paintTurnBands(g: CanvasRenderingContext2D, t: ColumnTurns, y: number, c0: number, c1: number, cellW: number, left: number): void {
  for (let k = 0; k < t.spans.length; k++) {
    const s = t.spans[k];
    const [a, e] = [Math.max(c0, s.start + t.offset), Math.min(c1, s.end + t.offset)];
    if (a >= e) continue;
    g.fillStyle = ROLE_COLORS[s.role];
    g.fillRect(a * cellW - left + 0.5, y + 0.5, (e - a) * cellW - 1, BAND_H);
    if (k > 0 && a === s.start + t.offset) {
      g.fillStyle = '#e6edf3';
      g.fillRect(a * cellW - left - 1, y, 2, ROW_H);
    }
  }
  if (t.diffs.length === 0) return;
  g.strokeStyle = RETOKENIZED_COLOR;
  g.lineWidth = 2;
  g.setLineDash([4, 2]);
  for (const d of t.diffs) {
    // A run only the render has (start = end) marks the token where it would stand.
    const [a, e] = [d.start + t.offset, Math.max(d.end, d.start + 1) + t.offset];
    if (e <= c0 || a >= c1) continue;
    g.strokeRect(a * cellW - left + 2, y + 2, (e - a) * cellW - 4, ROW_H - 4);
  }
  g.setLineDash([]);
  g.lineWidth = 1;
}

/** One cell per turn of a row at y (the collapsed view): what of [left, left + width) it covers. */
export function paintTurnCells(g: CanvasRenderingContext2D, t: ColumnTurns, sums: readonly TurnSums[], y: number, left: number, width: number): void {
  const maxChars = Math.floor((TURN_W - 8) / 6.2);
  for (let k = Math.max(0, Math.floor(left / TURN_W)); k < t.spans.length && k * TURN_W < left + width; k++) {
    const s = t.spans[k];
    const sum = sums[k];
    const x = k * TURN_W - left;
    g.fillStyle = '#1c2230';
    g.fillRect(x + 0.5, y + 0.5, TURN_W - 1, ROW_H - 1);
    g.fillStyle = ROLE_COLORS[s.role];
    g.fillRect(x + 0.5, y + 0.5, 4, ROW_H - 1);
    const label = `${ROLE_NAMES[s.role]} ${sum.tokens}/${sum.loss_tokens}${sum.loss !== null && sum.loss_tokens > 0 ? ` Σℓ ${fmt(sum.loss, 3)}` : ''}`;
    g.fillStyle = sum.loss_tokens === 0 ? '#8b949e' : '#e6edf3';
    g.fillText(label.length > maxChars ? `${label.slice(0, maxChars - 1)}…` : label, x + 8, y + ROW_H / 2);
    if (t.diffs.some((d) => d.start < s.end && Math.max(d.end, d.start + 1) > s.start)) {
      g.strokeStyle = RETOKENIZED_COLOR;
      g.lineWidth = 2;
      g.setLineDash([4, 2]);
      g.strokeRect(x + 2, y + 2, TURN_W - 4, ROW_H - 4);
      g.setLineDash([]);
      g.lineWidth = 1;
    }
  }
}

/** x extent [x0, x1) in the collapsed view of the turns covering columns [cs, ce) of row b (a column outside every turn: the row's ends). */
export function collapsedExtent(model: TurnsModel, b: number, cs: number, ce: number): [number, number] {
  const n = model.row(b).spans.length;
  const k0 = model.turnAt(b, cs);
  const k1 = model.turnAt(b, ce - 1);
  return [(k0 < 0 ? 0 : k0) * TURN_W, ((k1 < 0 ? n - 1 : k1) + 1) * TURN_W];
}
