// The grid model of the batch on screen, shared by the grid, the token inspector and anything else that
// needs cell classes or position ids; and the diff of the batch on screen against a pinned one (the grid's
// diff heat and the diff panel share it). The canvas classifies only the cells it draws, per paint; whole
// rows (the inspector) and row readouts (the labels) are built on first use and a bounded number kept:
// a render never walks the whole batch, so 200,000 rows cost what the rows on screen cost.
import type { GrpoBatch } from '../../io/batch.ts';
import type { BatchDiff } from '../../io/batch_diff.ts';
import { batchDiff } from '../../store/derived.ts';
import { useStudio } from '../../store/index.ts';
import { classifyColumns, gridContext, gridRow, rowMismatch, rowReadout, type FullRow, type GridContext, type RowCells, type RowReadout } from '../../view/cells.ts';

/** Whole rows kept classified for the inspector, and row readouts for the labels (the oldest go first). */
const ROW_CACHE = 64;
const READOUT_CACHE = 4096;

/** `make(b)` kept for the next call, at most `max` entries. */
export function bounded<T>(max: number, make: (b: number) => T): (b: number) => T {
  const kept = new Map<number, T>();
  return (b) => {
    let v = kept.get(b);
    if (v === undefined) {
      v = make(b);
      if (kept.size >= max) kept.delete(kept.keys().next().value!);
      kept.set(b, v);
    }
    return v;
  };
}

/** The grid of one batch: its widths, and its rows built on first use. */
export interface GridView {
  B: number;
  P: number;
  C: number;
  W: number;
  /** Every column of sample b, with position ids (kept for the next call). */
  row(b: number): FullRow;
  /** Columns [c0, c1) of sample b into `out`: what the canvas draws, classified per paint. */
  cells(b: number, c0: number, c1: number, out: RowCells): void;
  readout(b: number): RowReadout;
  /** How many rows have a field whose length differs from its ids (O(B) once, lengths only). */
  mismatchRows(): number;
}

export function gridView(ctx: GridContext): GridView {
  const B = ctx.batch.completion_ids.length;
  let mismatches: number | null = null;
  return {
    B,
    P: ctx.P,
    C: ctx.C,
    W: ctx.P + ctx.C,
    row: bounded(ROW_CACHE, (b) => gridRow(ctx, b)),
    cells: (b, c0, c1, out) => classifyColumns(ctx, b, c0, c1, out),
    // A label's readout sums its completion_mask: kept, since every render of the grid shows ~80 of them.
    readout: bounded(READOUT_CACHE, (b) => rowReadout(ctx, b)),
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
  const special = useStudio((s) => s.model?.tokenizer?.special_token_ids);
  return batch ? gridFor(batch, special) : null;
}

/** The batch on screen against the pinned diff base (null without one, or when it is the same batch). */
export function useBatchDiff(): BatchDiff | null {
  return useStudio(batchDiff);
}
