// The turns of the batch on screen for the grid and the token inspector (issue 25, item 1): each row's
// spans (src/view/turns.ts: the round-trip proof's where the Doctor proved the row, else the masks') and
// each span's sums over the per-token arrays the page holds (the loss stage's loss, KL and effective mask,
// the mismatch explorer's trainer − sampler log ratio or the batch's own two log-probs). Built per row on
// first use and a bounded number kept, per batch (spans) and per run (sums): a paint reads cached rows only,
// and a 200,000-row batch costs the rows on screen.
import { useMemo } from 'react';
import type { GrpoBatch } from '../../io/batch.ts';
import type { ProvenRow } from '../../io/turns.ts';
import type { MismatchResult } from '../../bridge/protocol.ts';
import type { RunResults } from '../../store/session.ts';
import { useStudio } from '../../store/index.ts';
import { mismatchShown, provenTurnsOf, shownRun } from '../../store/derived.ts';
import { hasTurns, rowTurns, spanAt, turnSums, type PerToken, type RowTurns, type TurnInputs, type TurnSums } from '../../view/turns.ts';
import { heatAccessor } from './heat.ts';
import { bounded } from './useGrid.ts';

/** Width of one turn's cell in the collapsed view (room for "tool response 120/0 Σℓ −0.123"). */
export const TURN_W = 200;

/** A row's turns with the column its position 0 sits at (P − prompt_ids[b].length). */
export type ColumnTurns = RowTurns & { offset: number };

export interface TurnsModel {
  row(b: number): ColumnTurns;
  sums(b: number): TurnSums[];
  /** The most turns any row has (the collapsed view's width; O(B) once). */
  maxTurns(): number;
  /** The index of the turn holding column col of row b, or −1. */
  turnAt(b: number, col: number): number;
}

const ROWS_KEPT = 4096;

/** Whether a batch has turns, once per batch. */
const turnful = new WeakMap<GrpoBatch, boolean>();
const spansOf = new WeakMap<GrpoBatch, { proven: unknown; P: number; row: (b: number) => ColumnTurns; max: number | null }>();

/** trainer − sampler log-prob: the explorer's, else the batch's old_per_token_logps − sampling_per_token_logps. */
function mismatchOf(batch: GrpoBatch, run: RunResults, mismatch: MismatchResult | null): PerToken | undefined {
  const explorer = heatAccessor('log_ratio', batch, run, { mismatch });
  if (explorer) return explorer;
  const [old, sampler] = [batch.old_per_token_logps, batch.sampling_per_token_logps];
  if (!old || !sampler) return undefined;
  return (b, j) => {
    const [t, s] = [old[b]?.[j], sampler[b]?.[j]];
    return t === undefined || s === undefined ? undefined : t - s;
  };
}

let lastSums: { key: unknown[]; sums: (b: number) => TurnSums[] } | null = null;

/** The turns model of a batch (null when it has none to show), its spans shared by every caller. */
export function turnsModel(batch: GrpoBatch, P: number, proven: Record<number, ProvenRow> | null | undefined, run: RunResults, mismatch: MismatchResult | null): TurnsModel | null {
  if (!turnful.has(batch)) turnful.set(batch, hasTurns(batch));
  if (!turnful.get(batch) && !proven) return null;
  let spans = spansOf.get(batch);
  if (!spans || spans.proven !== proven || spans.P !== P) {
    spans = { proven, P, row: bounded(ROWS_KEPT, (b) => ({ ...rowTurns(batch, b, proven?.[b]), offset: P - (batch.prompt_ids[b]?.length ?? 0) })), max: null };
    spansOf.set(batch, spans);
  }
  const row = spans.row;
  const key = [spans, run, mismatch];
  if (!lastSums || lastSums.key.some((k, i) => k !== key[i])) {
    const inputs: TurnInputs = {
      loss: heatAccessor('loss', batch, run),
      kl: heatAccessor('kl', batch, run),
      effective: heatAccessor('effective_mask', batch, run),
      mismatch: mismatchOf(batch, run, mismatch),
    };
    lastSums = { key, sums: bounded(ROWS_KEPT, (b) => turnSums(batch, b, row(b).spans, inputs)) };
  }
  const sums = lastSums.sums;
  const held = spans;
  return {
    row,
    sums,
    maxTurns() {
      if (held.max === null) {
        held.max = 1;
        for (let b = 0; b < batch.completion_ids.length; b++) held.max = Math.max(held.max, row(b).spans.length);
      }
      return held.max;
    },
    turnAt: (b, col) => {
      const t = row(b);
      return spanAt(t.spans, col - t.offset);
    },
  };
}

/** The turns model of the batch on screen, or null (no batch, or one without turns). */
export function useTurns(P: number | undefined): TurnsModel | null {
  const batch = useStudio((s) => s.batch);
  const proven = useStudio(provenTurnsOf);
  const run = useStudio(shownRun);
  const mismatch = useStudio((s) => mismatchShown(s)?.result ?? null);
  return useMemo(() => (batch && P !== undefined ? turnsModel(batch, P, proven, run, mismatch) : null), [batch, P, proven, run, mismatch]);
}
