// The layout slice (src/store/layout.ts) and the row order derived from it (src/store/rows.ts), in Node with an
// in-memory storage: panel widths are clamped, persisted with the settings and restored by a new store on the
// same storage (a malformed stored value keeps the defaults); a heat scale is kept per metric; the row order
// sorts by the batch's rewards, filters to the rows the findings name, is the same object while its inputs
// are, and offers only the sort keys the batch has values for.
import { describe, expect, it } from 'vitest';
import { createStudioStore, STORAGE_KEY } from '../../src/store/index.ts';
import { DEFAULT_PANELS, PANEL_MAX, PANEL_MIN } from '../../src/store/layout.ts';
import { rowOrderOf, sortKeysOf, sortValues } from '../../src/store/rows.ts';
import type { RunResults } from '../../src/store/session.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import type { DoctorReport } from '../../src/doctor/types.ts';
import { memoryStorage } from '../helpers/page_store.ts';

const batch: GrpoBatch = {
  format: 'grpo-batch/v1',
  num_generations: 2,
  pad_token_id: 0,
  eos_token_ids: [3],
  prompt_ids: [[5], [5], [6], [6]],
  completion_ids: [[7, 3], [8, 9, 3], [7], [9, 9, 9, 3]],
  completion_mask: [[1, 1], [1, 1, 1], [1], [1, 1, 1, 1]],
  rewards: [0.2, 1, 0.2, 0.5],
};
const report = { findings: [{ rule: 'x', severity: 'error', sample: 2, message: '', hint: '' }, { rule: 'y', severity: 'info', message: '', hint: '' }], skipped: [] } as unknown as DoctorReport;

describe('panels', () => {
  it('clamps widths, persists them and restores them in a new store; malformed stored values keep the defaults', () => {
    const storage = memoryStorage();
    const a = createStudioStore(storage);
    a.getState().setPanel('right', { width: 5000 });
    expect(a.getState().panels.right.width).toBe(PANEL_MAX);
    a.getState().setPanel('left', { width: 12, collapsed: true });
    expect(a.getState().panels.left).toEqual({ width: PANEL_MIN, collapsed: true });
    expect(JSON.parse(storage.data.get(STORAGE_KEY)!).state.panels.right.width).toBe(PANEL_MAX);
    const b = createStudioStore(storage);
    expect(b.getState().panels).toEqual({ left: { width: PANEL_MIN, collapsed: true }, right: { width: PANEL_MAX, collapsed: false } });
    const bad = memoryStorage();
    bad.setItem(STORAGE_KEY, JSON.stringify({ version: 2, state: { panels: { left: { width: 'wide' }, right: null } } }));
    expect(createStudioStore(bad).getState().panels).toEqual(DEFAULT_PANELS);
  });

  it('keeps a heat scale per metric', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().setHeatScale('ratio', { range: 'fixed', lo: 0.5, hi: 2 });
    expect(s.getState().heatScales.ratio).toMatchObject({ range: 'fixed', lo: 0.5, hi: 2, clip: 1 });
    expect(s.getState().heatScales.kl).toBeUndefined();
  });
});

describe('row order', () => {
  it('sorts by reward, filters to rows with findings, and is memoised on its inputs', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().setImported({ batch, name: 'b.json', report });
    expect(rowOrderOf(s.getState())).toBeNull();
    // Loss and mismatch need a run / an explorer answer; advantages are not in this batch.
    expect(sortKeysOf(s.getState())).toBe('reward,length,findings');
    s.getState().setRowSort({ key: 'reward', descending: true });
    const o = rowOrderOf(s.getState())!;
    expect(Array.from(o.rows)).toEqual([1, 3, 0, 2]); // 1, 0.5, 0.2 (row 0 before row 2)
    expect(rowOrderOf(s.getState())).toBe(o);
    s.getState().setRowSort({ key: 'length', descending: false });
    expect(Array.from(rowOrderOf(s.getState())!.rows)).toEqual([2, 0, 1, 3]);
    s.getState().setRowSort({ findingsOnly: true });
    expect(Array.from(rowOrderOf(s.getState())!.rows)).toEqual([2]);
    s.getState().setRowSort({ key: null });
    expect(Array.from(rowOrderOf(s.getState())!.rows)).toEqual([2]);
  });
});

describe('sort values', () => {
  it("reads a row's loss as Σ per-token loss × weight over the padded (B, C) arrays, and advantages from the run", () => {
    // C = 4 (the widest completion); padding columns carry junk the weight 0 removes.
    const C = 4;
    const loss = Float32Array.from([1, 2, 9, 9, 0.5, 0.5, 0.5, 9, 3, 9, 9, 9, -1, -1, -1, -1]);
    const weight = Float32Array.from([0.25, 0.25, 0, 0, 0.1, 0.1, 0.1, 0, 0.5, 0, 0, 0, 0.125, 0.125, 0.125, 0.125]);
    const run = { assemble: { padded: { B: 4, C } }, loss: { per_token_loss: loss, token_weight: weight }, advantages: { advantages: [0.3, -0.3, 1, -1] } } as unknown as RunResults;
    const s = { batch: { ...batch, rewards: undefined }, run, findings: [], mismatch: null, batchOrigin: 'step', imported: null, rowSort: { key: null, descending: true, findingsOnly: false } } as const;
    // Row 0: 1·0.25 + 2·0.25 = 0.75; row 1: 3 · 0.5 · 0.1 = 0.15; row 2: 3 · 0.5 = 1.5; row 3: 4 · (−1) · 0.125 = −0.5.
    expect(Array.from(sortValues(s as never, 'loss')!()).map((v) => Number(v.toFixed(6)))).toEqual([0.75, 0.15, 1.5, -0.5]);
    expect(Array.from(sortValues(s as never, 'advantage')!())).toEqual([0.3, -0.3, 1, -1]);
    expect(sortValues(s as never, 'reward')).toBeNull();
    expect(sortKeysOf(s as never)).toBe('advantage,length,findings,loss');
  });
});
