// The order the grid shows its rows in: the batch's own order, or sorted by one value per sample (reward,
// advantage, length, findings, loss, mismatch) and/or filtered to the rows with findings. Pure and O(B log B)
// once per change of sort, filter or batch: the grid, its row labels and its keyboard walk all read the same
// `RowOrder` (display position ↔ sample), so the selection stays on its sample whatever the order.

/** Display position → sample, and sample → display position (−1: filtered out). */
export interface RowOrder {
  rows: Int32Array;
  position: Int32Array;
}

/**
 * The rows of a B-row batch in display order. `key[b]` sorts (NaN / missing last in both directions; ties keep
 * the batch order, so groups stay together among equals); `keep(b)` false drops row b. null when neither
 * applies: the grid then keeps its identity layout (groups with gaps).
 */
export function rowOrder(B: number, key: ArrayLike<number> | null, descending: boolean, keep: ((b: number) => boolean) | null): RowOrder | null {
  if (!key && !keep) return null;
  const rows: number[] = [];
  for (let b = 0; b < B; b++) if (!keep || keep(b)) rows.push(b);
  if (key) {
    const sign = descending ? -1 : 1;
    rows.sort((a, b) => {
      const [x, y] = [key[a], key[b]];
      const [nx, ny] = [Number.isNaN(x), Number.isNaN(y)];
      if (nx !== ny) return nx ? 1 : -1;
      if (nx || x === y) return a - b;
      return x < y ? -sign : sign;
    });
  }
  const position = new Int32Array(B).fill(-1);
  rows.forEach((b, i) => (position[b] = i));
  return { rows: Int32Array.from(rows), position };
}

/** The display row `steps` away from sample `sample` (clamped to the ends); the first row when it is filtered out. */
export function stepRow(order: RowOrder | null, B: number, sample: number, steps: number): number {
  if (!order) return Math.min(B - 1, Math.max(0, sample + steps));
  const n = order.rows.length;
  if (n === 0) return sample;
  const at = order.position[sample];
  return order.rows[at < 0 ? 0 : Math.min(n - 1, Math.max(0, at + steps))];
}
