// The grid model of the batch on screen, shared by the grid, the token inspector and anything else that
// needs cell classes or position ids; and the diff of the batch on screen against a pinned one (the grid's
// diff heat and the diff panel share it). Rows are classified on demand and a bounded number of them kept:
// a render never walks the whole batch, so 200,000 rows cost what the rows on screen cost.
import type { GrpoBatch } from '../../io/batch.ts';
import type { BatchDiff } from '../../io/batch_diff.ts';
import { batchDiff } from '../../store/derived.ts';
import { useStudio } from '../../store/index.ts';
import { gridContext, gridRow, rowMismatch, rowReadout, type GridContext, type RowCells, type RowReadout } from './cells.ts';

/** Rows kept classified: a few windows' worth (the least recently built go first). */
const ROW_CACHE = 4096;

/** The grid of one batch: its widths, and its rows built on first use. */
export interface GridView {
  B: number;
  P: number;
  C: number;
  W: number;
  row(b: number): RowCells;
  readout(b: number): RowReadout;
  /** How many rows have a field whose length differs from its ids (O(B) once, lengths only). */
  mismatchRows(): number;
}

export function gridView(ctx: GridContext): GridView {
  const B = ctx.batch.completion_ids.length;
  const rows = new Map<number, RowCells>();
  let mismatches: number | null = null;
  return {
    B,
    P: ctx.P,
    C: ctx.C,
    W: ctx.P + ctx.C,
    row(b) {
      let r = rows.get(b);
      if (!r) {
        r = gridRow(ctx, b);
        if (rows.size >= ROW_CACHE) rows.delete(rows.keys().next().value!);
        rows.set(b, r);
      }
      return r;
    },
    readout: (b) => rowReadout(ctx, b),
    mismatchRows() {
      if (mismatches === null) {
        mismatches = 0;
        for (let b = 0; b < B; b++) if (rowMismatch(ctx, b)) mismatches++;
      }
      return mismatches;
    },
  };
}

const cache = new WeakMap<GrpoBatch, { special: readonly number[] | undefined; ctx: GridContext; grid: GridView }>();

function gridFor(batch: GrpoBatch, special: readonly number[] | undefined): { ctx: GridContext; grid: GridView } {
  let hit = cache.get(batch);
  if (!hit || hit.special !== special) {
    const ctx = gridContext(batch, special ?? []);
    hit = { special, ctx, grid: gridView(ctx) };
    cache.set(batch, hit);
  }
  return hit;
}

export function useGridModel(): { ctx: GridContext; grid: GridView } | null {
  const batch = useStudio((s) => s.batch);
  const special = useStudio((s) => s.model?.tokenizer.special_token_ids);
  return batch ? gridFor(batch, special) : null;
}

/** The batch on screen against the pinned diff base (null without one, or when it is the same batch). */
export function useBatchDiff(): BatchDiff | null {
  return useStudio(batchDiff);
}
