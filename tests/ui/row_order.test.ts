// The grid's row order (src/view/row_order.ts): sorted by one value per sample in either direction, ties in
// batch order, NaN (no value) last in both directions, filtered, and the keyboard's step through the order.
// Expected orders are written out by hand from the planted keys.
import { describe, expect, it } from 'vitest';
import { rowOrder, stepRow } from '../../src/view/row_order.ts';

describe('rowOrder', () => {
  it('is null with neither a sort nor a filter (the batch order, with its group layout)', () => {
    expect(rowOrder(5, null, true, null)).toBeNull();
  });

  it('sorts descending / ascending with ties in batch order and NaN last either way; position inverts rows', () => {
    const key = [0.5, NaN, 0.9, 0.5, -1, NaN, Infinity];
    const down = rowOrder(7, key, true, null)!;
    expect(Array.from(down.rows)).toEqual([6, 2, 0, 3, 4, 1, 5]);
    const up = rowOrder(7, key, false, null)!;
    expect(Array.from(up.rows)).toEqual([4, 0, 3, 2, 6, 1, 5]);
    for (let i = 0; i < 7; i++) expect(up.position[up.rows[i]]).toBe(i);
  });

  it('filters, keeping the batch order (or the sort) of the rows kept; a dropped row has position −1', () => {
    const keep = (b: number) => b % 3 === 0;
    const f = rowOrder(10, null, true, keep)!;
    expect(Array.from(f.rows)).toEqual([0, 3, 6, 9]);
    expect(f.position[4]).toBe(-1);
    const sorted = rowOrder(10, [5, 0, 0, 1, 0, 0, 9, 0, 0, 2], true, keep)!;
    expect(Array.from(sorted.rows)).toEqual([6, 0, 9, 3]);
    expect(rowOrder(3, null, true, () => false)!.rows.length).toBe(0);
  });
});

describe('stepRow', () => {
  it('walks the display order, clamped at its ends; from a filtered-out sample it goes to the first row', () => {
    const o = rowOrder(6, [3, 1, 4, 1, 5, 9], false, (b) => b !== 2)!; // rows: 1, 3, 0, 4, 5
    expect(Array.from(o.rows)).toEqual([1, 3, 0, 4, 5]);
    expect(stepRow(o, 6, 1, 1)).toBe(3);
    expect(stepRow(o, 6, 3, 2)).toBe(4);
    expect(stepRow(o, 6, 4, 10)).toBe(5);
    expect(stepRow(o, 6, 0, -10)).toBe(1);
    expect(stepRow(o, 6, 2, 1)).toBe(1);
    // Without an order: sample numbers, clamped.
    expect(stepRow(null, 6, 4, 3)).toBe(5);
    expect(stepRow(null, 6, 1, -3)).toBe(0);
  });
});
