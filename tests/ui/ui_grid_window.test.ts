// The token grid's virtual window (src/ui/grid/layout.ts): the O(1) row arithmetic against a brute-force
// scan of every row, and the window the grid draws always covering every row in the viewport while its
// canvas stays about a viewport tall, whatever the batch size (200,000 rows included); and the rows the
// page classifies on demand equal the whole-grid build, through the bounded row cache.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { buildGrid, gridContext } from '../../src/view/cells.ts';
import { gridView } from '../../src/ui/grid/useGrid.ts';
import { GROUP_GAP, HEADER_H, OVERSCAN_PX, ROW_H, WINDOW_QUANTUM, gridHeight, rowAt, rowTop, rowWindow, rowsIn } from '../../src/ui/grid/layout.ts';

/** Brute force: the geometry written out row by row, independent of the closed forms. */
function tops(B: number, G: number): number[] {
  const t: number[] = [];
  let y = HEADER_H;
  for (let b = 0; b < B; b++) {
    if (b > 0 && b % G === 0) y += GROUP_GAP;
    t.push(y);
    y += ROW_H;
  }
  return t;
}

const sizes = fc.record({ B: fc.integer({ min: 0, max: 300 }), G: fc.integer({ min: 1, max: 20 }) });

describe('grid layout', () => {
  it('rowTop and gridHeight match the rows laid out one by one', () => {
    fc.assert(
      fc.property(sizes, ({ B, G }) => {
        const t = tops(B, G);
        t.forEach((y, b) => expect(rowTop(b, G)).toBe(y));
        expect(gridHeight(B, G)).toBe(B === 0 ? 0 : t[B - 1] + ROW_H + 2);
      }),
    );
  });

  it('rowAt finds the row under every y, and null on the ruler, in gaps and below the last row', () => {
    fc.assert(
      fc.property(sizes, fc.double({ min: -50, max: 10_000, noNaN: true }), ({ B, G }, y) => {
        const t = tops(B, G);
        const want = t.findIndex((top) => y >= top && y < top + ROW_H);
        expect(rowAt(y, B, G)).toBe(want < 0 ? null : want);
      }),
      { numRuns: 500 },
    );
  });

  it('rowsIn returns exactly the rows that intersect a band', () => {
    fc.assert(
      fc.property(sizes, fc.double({ min: -100, max: 8_000, noNaN: true }), fc.double({ min: 0, max: 3_000, noNaN: true }), ({ B, G }, y0, h) => {
        const t = tops(B, G);
        const hit = t.map((top, b) => (top < y0 + h && top + ROW_H > y0 ? b : -1)).filter((b) => b >= 0);
        const [first, last] = rowsIn(y0, y0 + h, B, G);
        if (hit.length === 0) expect(last - first).toBe(0);
        else expect([first, last]).toEqual([hit[0], hit[hit.length - 1] + 1]);
      }),
      { numRuns: 500 },
    );
  });

  it('the window covers the viewport, stays within the batch and is about a viewport tall, up to 200,000 rows', () => {
    const big = fc.record({ B: fc.integer({ min: 1, max: 200_000 }), G: fc.integer({ min: 1, max: 64 }) });
    fc.assert(
      fc.property(big, fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 50, max: 2_000 }), ({ B, G }, at, viewH) => {
        const scrollTop = at * Math.max(0, gridHeight(B, G) - viewH);
        const w = rowWindow(scrollTop, viewH, B, G);
        expect(w.first).toBeGreaterThanOrEqual(0);
        expect(w.last).toBeLessThanOrEqual(B);
        expect(w.first % WINDOW_QUANTUM).toBe(0);
        const [v0, v1] = rowsIn(scrollTop, scrollTop + viewH, B, G);
        expect(w.first).toBeLessThanOrEqual(v0);
        expect(w.last).toBeGreaterThanOrEqual(v1);
        // The canvas spans every drawn row (from the ruler when the window starts at row 0)…
        expect(w.top).toBe(w.first === 0 ? 0 : rowTop(w.first, G));
        if (w.last > w.first) expect(w.top + w.height).toBe(rowTop(w.last - 1, G) + ROW_H + 2);
        // … and never more than the viewport, the overscan and two quanta of rows: bounded, unlike the grid.
        expect(w.height).toBeLessThanOrEqual(viewH + 2 * OVERSCAN_PX + 2 * WINDOW_QUANTUM * (ROW_H + GROUP_GAP) + HEADER_H + ROW_H + 2);
      }),
      { numRuns: 300 },
    );
  });

  it('the window at the bottom of a 200,000-row batch holds the last row', () => {
    const B = 200_000;
    const G = 8;
    const viewH = 600;
    const w = rowWindow(gridHeight(B, G) - viewH, viewH, B, G);
    expect(w.last).toBe(B);
    expect(rowAt(gridHeight(B, G) - 3 - ROW_H / 2, B, G)).toBe(B - 1);
  });
});

describe('rows built on demand (the page’s grid model)', () => {
  it('equal the whole-grid build on any row order, past the row cache, and count mismatched rows', () => {
    const B = 5_000;
    const batch: GrpoBatch = {
      format: 'grpo-batch/v1',
      num_generations: 4,
      pad_token_id: 0,
      eos_token_ids: [1],
      prompt_ids: Array.from({ length: B }, (_, b) => (b % 3 === 0 ? [0, 5, 6] : [7, 8])),
      completion_ids: Array.from({ length: B }, (_, b) => (b % 5 === 0 ? [9, 1, 0] : [9, 10, 11, 1])),
      // Every 7th row's mask is one entry short: a length mismatch the grid flags.
      completion_mask: Array.from({ length: B }, (_, b) => (b % 5 === 0 ? [1, 1, 0] : [1, 1, 1, 1]).slice(0, b % 7 === 0 ? -1 : undefined)),
    };
    const ctx = gridContext(batch);
    const whole = buildGrid(ctx);
    const view = gridView(ctx);
    const fields = ['region', 'ids', 'attention', 'completion', 'tool', 'flags', 'position_ids'] as const;
    // Every row twice in a scrambled order (7919 is prime to B): 10,000 reads through a 4,096-row cache.
    const order = Array.from({ length: 2 * B }, (_, i) => (i * 7919) % B);
    const check = (b: number) => {
      const row = view.row(b);
      for (const f of fields) expect(Array.from(row[f]), `${f} row ${b}`).toEqual(Array.from(whole[f].subarray(b * whole.W, (b + 1) * whole.W)));
    };
    order.forEach(check);
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: B - 1 }), { maxLength: 200 }), (bs) => bs.forEach(check)));
    expect(view.mismatchRows()).toBe(whole.rows.filter((r) => r.mismatch).length);
    expect(view.mismatchRows()).toBe(Math.ceil(B / 7));
    expect(view.readout(14)).toEqual(whole.rows[14]);
  });
});
