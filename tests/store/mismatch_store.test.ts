// The mismatch explorer's page state without a browser: what it asks the worker for (the import by its
// request id, an update only once its loss stage has run), an answer kept under the batch it was asked for
// (a new import hides it), and the grid's "log ratio" heat over the worker's packed rows — symmetric around 0
// with the range of the report's summary (no pass over the batch on the page), in nats, a token that was not
// compared (NaN) read as no value.
import { describe, expect, it } from 'vitest';
import { createStudioStore } from '../../src/store/index.ts';
import { mismatchShown, mismatchTarget } from '../../src/store/derived.ts';
import { availableHeats, heatSource } from '../../src/ui/grid/heat.ts';
import { DEFAULT_SCALE } from '../../src/view/heat_scale.ts';
import type { MismatchResult } from '../../src/bridge/protocol.ts';
import type { MismatchReport } from '../../src/grpo/mismatch/types.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import type { StagePayloads } from '../../src/bridge/protocol.ts';
import { memoryStorage } from '../helpers/page_store.ts';

const batchOf = (rows: number[][]): GrpoBatch => ({
  format: 'grpo-batch/v1',
  num_generations: 1,
  pad_token_id: 0,
  eos_token_ids: [3],
  prompt_ids: rows.map(() => [5]),
  completion_ids: rows,
  completion_mask: rows.map((r) => r.map(() => 1)),
});

const report = { diagnoses: [], token: { log_ratio: { summary: { min: -0.2, max: 0.5 } } } } as unknown as MismatchReport;

/** Two rows (3 and 2 tokens) packed; the middle token of row 0 not compared. */
const result = (): MismatchResult => ({
  report,
  missing: null,
  log_ratio: { values: Float32Array.from([0.1, NaN, -0.2, 0.5, 0.25]), offsets: Int32Array.from([0, 3, 5]) },
  recomputed: false,
  ms: 1,
});

const empty = { findings: [], skipped: [], checked: [], groups: null } as never;

describe('mismatch explorer state', () => {
  it('asks for the import by its request id, and keeps its answer under that batch only', () => {
    const store = createStudioStore(memoryStorage());
    expect(mismatchTarget(store.getState()).key).toBeNull();
    const batch = batchOf([[7, 8, 9], [10, 11]]);
    store.getState().setImported({ batch, name: 'a.json', importId: 42, report: empty });
    const t = mismatchTarget(store.getState());
    expect(t).toEqual({ key: batch, of: { kind: 'import', import: 42 } });
    store.getState().setMismatch({ key: batch, status: 'ready', recompute: false, result: result() });
    expect(mismatchShown(store.getState())?.result?.report).toBe(report);
    // Another import: the answer for the first batch is not shown for it.
    store.getState().setImported({ batch: batchOf([[7]]), name: 'b.json', importId: 43, report: empty });
    expect(mismatchShown(store.getState())).toBeNull();
  });

  it("an update's batch is asked for only once its loss stage has run (the trainer side is the policy before the step)", () => {
    const store = createStudioStore(memoryStorage());
    const batch = batchOf([[7, 8]]);
    const assemble = { batch, padded: { B: 1, C: 2, P: 1 }, token_texts: { by_id: {} }, report: empty } as unknown as StagePayloads['assemble'];
    store.getState().stageDone({ id: 'assemble', ms: 1, gpuBytes: 0, peakBytes: 0, data: assemble } as never);
    const waiting = mismatchTarget(store.getState());
    expect(waiting.key).toBeNull();
    expect('reason' in waiting && waiting.reason).toMatch(/loss stage/);
    const loss = { report: empty } as unknown as StagePayloads['loss'];
    store.getState().stageDone({ id: 'loss', ms: 1, gpuBytes: 0, peakBytes: 0, data: loss } as never);
    expect(mismatchTarget(store.getState())).toEqual({ key: store.getState().run.loss, of: { kind: 'update' } });
  });

  it('log ratio heat: the packed rows by sample and position, NaN as no value, symmetric min–max range over the compared tokens, nats', () => {
    const batch = batchOf([[7, 8, 9], [10, 11]]);
    expect(availableHeats(batch, {})).not.toContain('log_ratio');
    const extra = { mismatch: result() };
    expect(availableHeats(batch, {}, extra)).toContain('log_ratio');
    const src = heatSource('log_ratio', batch, {}, extra, { ...DEFAULT_SCALE, range: 'minmax' })!;
    expect([src.get(0, 0), src.get(0, 1), src.get(0, 2), src.get(1, 0), src.get(1, 1)].map((v) => (v === undefined ? v : Math.fround(v)))).toEqual([0.1, undefined, -0.2, 0.5, 0.25].map((v) => (v === undefined ? v : Math.fround(v))));
    // Past a row's end, and past the last row: nothing.
    expect([src.get(1, 2), src.get(2, 0)]).toEqual([undefined, undefined]);
    // max(|−0.2|, |0.5|) on both sides of 0.
    expect([src.scale.lo, src.scale.hi, src.scale.center, src.unit]).toEqual([-0.5, 0.5, 0, 'nats']);
  });
});
