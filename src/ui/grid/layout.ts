// The token grid's vertical geometry and its virtual window, as pure arithmetic: where row b sits, which
// row a y falls on, and which rows to draw for a scroll position. A 200,000-row batch is millions of pixels
// tall, more than any canvas may be, so the grid draws only a window of rows around the viewport into a
// canvas of about the viewport's height, while a spacer as tall as every row gives the scrollbar its range.
// Every function here is O(1) in the number of rows (the hover and scroll handlers call them per event).

export const ROW_H = 20;
export const GROUP_GAP = 6;
/** The column ruler above the first row. */
export const HEADER_H = 18;
/** Rows drawn beyond the viewport on each side (in pixels), so a short scroll shows drawn rows at once. */
export const OVERSCAN_PX = 800;
/** The window's ends are rounded to multiples of this many rows, so it changes every few rows of scrolling, not every pixel. */
export const WINDOW_QUANTUM = 16;

/** Height of one group of G rows and the gap after it. */
const groupH = (G: number) => G * ROW_H + GROUP_GAP;

/** y of row b's top edge: rows of a group are packed, groups separated by a gap. */
export function rowTop(b: number, G: number): number {
  return HEADER_H + b * ROW_H + Math.floor(b / G) * GROUP_GAP;
}

/** Height of the whole grid (ruler, every row, a 2 px margin); 0 without rows. */
export function gridHeight(B: number, G: number): number {
  return B > 0 ? rowTop(B - 1, G) + ROW_H + 2 : 0;
}

/** The row under y, or null (ruler, a gap between groups, below the last row). */
export function rowAt(y: number, B: number, G: number): number | null {
  const yy = y - HEADER_H;
  if (!(yy >= 0)) return null;
  const g = Math.floor(yy / groupH(G));
  const r = Math.floor((yy - g * groupH(G)) / ROW_H);
  const b = g * G + r;
  return r < G && b < B ? b : null;
}

/** How many rows start above y (inclusive: at or above y). */
function rowsStartingAbove(y: number, inclusive: boolean, B: number, G: number): number {
  const yy = y - HEADER_H;
  if (!(yy >= 0) || (!inclusive && yy === 0)) return 0;
  const g = Math.floor(yy / groupH(G));
  const w = yy - g * groupH(G);
  const inGroup = inclusive ? Math.floor(w / ROW_H) + 1 : Math.ceil(w / ROW_H);
  return Math.min(B, g * G + Math.min(G, inGroup));
}

/** Rows [first, last) that intersect the band [y0, y1) of the grid: those ending below y0 and starting above y1. */
export function rowsIn(y0: number, y1: number, B: number, G: number): [number, number] {
  const first = rowsStartingAbove(y0 - ROW_H, true, B, G);
  const last = rowsStartingAbove(y1, false, B, G);
  return [Math.min(first, last), last];
}

/** The rows to draw for a viewport [top, top + height) of the grid body: every visible row and the overscan around it. */
export interface RowWindow {
  first: number;
  last: number; // exclusive
  /** y of the canvas' top edge in grid coordinates: 0 (with the ruler) when the window starts at row 0. */
  top: number;
  /** The canvas' height. */
  height: number;
}

export function rowWindow(scrollTop: number, viewHeight: number, B: number, G: number): RowWindow {
  const [a, b] = rowsIn(scrollTop - OVERSCAN_PX, scrollTop + viewHeight + OVERSCAN_PX, B, G);
  const first = Math.floor(a / WINDOW_QUANTUM) * WINDOW_QUANTUM;
  const last = Math.min(B, Math.ceil(b / WINDOW_QUANTUM) * WINDOW_QUANTUM);
  const top = first === 0 ? 0 : rowTop(first, G);
  const bottom = last > first ? rowTop(last - 1, G) + ROW_H + 2 : HEADER_H;
  return { first, last, top, height: Math.max(0, bottom - top) };
}

export const sameWindow = (a: RowWindow, b: RowWindow) => a.first === b.first && a.last === b.last && a.top === b.top && a.height === b.height;
