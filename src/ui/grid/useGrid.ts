// The grid model of the batch on screen, built once per batch (and tokenizer) and shared by the grid,
// the token inspector and anything else that needs cell classes or position ids; and the diff of the
// batch on screen against a pinned one (the grid's diff heat and the diff panel share it).
import type { GrpoBatch } from '../../io/batch.ts';
import type { BatchDiff } from '../../io/batch_diff.ts';
import { batchDiff } from '../../store/derived.ts';
import { useStudio } from '../../store/index.ts';
import { buildGrid, gridContext, type GridContext, type GridModel } from './cells.ts';

const cache = new WeakMap<GrpoBatch, { special: readonly number[] | undefined; ctx: GridContext; grid: GridModel }>();

function gridFor(batch: GrpoBatch, special: readonly number[] | undefined): { ctx: GridContext; grid: GridModel } {
  let hit = cache.get(batch);
  if (!hit || hit.special !== special) {
    const ctx = gridContext(batch, special ?? []);
    hit = { special, ctx, grid: buildGrid(ctx) };
    cache.set(batch, hit);
  }
  return hit;
}

export function useGridModel(): { ctx: GridContext; grid: GridModel } | null {
  const batch = useStudio((s) => s.batch);
  const special = useStudio((s) => s.model?.tokenizer.special_token_ids);
  return batch ? gridFor(batch, special) : null;
}

/** The batch on screen against the pinned diff base (null without one, or when it is the same batch). */
export function useBatchDiff(): BatchDiff | null {
  return useStudio(batchDiff);
}
