// The grid's cell classification (src/view/cells.ts) and heat ranges (heat.ts): regions, mask bits and
// mismatch flags on hand-made batches, position ids and attention bits against the golden PyTorch batch,
// and agreement with the Doctor on where a mask-length mismatch is.
import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toI32 } from '../../src/io/safetensors.ts';
import { FLAG, REGION, buildGrid, classifyCell, classifyColumns, emptyCells, gridContext, gridRow, rowReadout, spanColumns, visibleText } from '../../src/view/cells.ts';
import type { RunResults } from '../../src/store/session.ts';
import { heatSource } from '../../src/ui/grid/heat.ts';
import { DEFAULT_SCALE } from '../../src/view/heat_scale.ts';
import { refCell } from '../helpers/grid_cells_ref.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const golden = path.resolve(root, 'tests/golden/models/tiny-llama');

function batch(p: Partial<GrpoBatch>): GrpoBatch {
  return { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [1], prompt_ids: [], completion_ids: [], completion_mask: [], ...p };
}

describe('classifyCell', () => {
  it('right-aligns ragged prompts to the boundary and marks the rest absent', () => {
    const ctx = gridContext(batch({ num_generations: 2, prompt_ids: [[5, 6], [7, 8, 9, 10]], completion_ids: [[11, 1], [12, 1]], completion_mask: [[1, 1], [1, 1]] }));
    expect(ctx.P).toBe(4);
    expect(ctx.C).toBe(2);
    const row0 = [0, 1, 2, 3].map((c) => classifyCell(ctx, 0, c));
    expect(row0.map((c) => c.region)).toEqual([REGION.absent, REGION.absent, REGION.prompt, REGION.prompt]);
    expect(row0.map((c) => c.id)).toEqual([null, null, 5, 6]);
    expect(classifyCell(ctx, 1, 0).id).toBe(7);
    expect(classifyCell(ctx, 0, 4)).toMatchObject({ side: 'completion', index: 0, id: 11, region: REGION.completion, completion: 1, flags: 0 });
    expect(classifyCell(ctx, 0, 5)).toMatchObject({ region: REGION.eos, id: 1, flags: 0 });
  });

  it('classifies after-EOS tokens and flags a mask that covers them', () => {
    const ctx = gridContext(batch({ prompt_ids: [[5]], completion_ids: [[10, 1, 0, 0]], completion_mask: [[1, 1, 1, 0]] }));
    const cells = [1, 2, 3, 4].map((c) => classifyCell(ctx, 0, c));
    expect(cells.map((c) => c.region)).toEqual([REGION.completion, REGION.eos, REGION.after_eos, REGION.after_eos]);
    expect(cells.map((c) => c.flags)).toEqual([0, 0, FLAG.mask_on_pad, 0]);
  });

  it('flags mask entries without ids and ids without mask entries (seed 000)', () => {
    const ctx = gridContext(batch({ prompt_ids: [[5], [5]], num_generations: 2, completion_ids: [[10, 1], [10, 11, 12, 1]], completion_mask: [[1, 1, 1, 1], [1, 1]] }));
    // Row 0: mask is 2 longer → two extra cells with a mask and no id.
    expect(classifyCell(ctx, 0, 3)).toMatchObject({ region: REGION.absent, id: null, completion: 1 });
    expect(classifyCell(ctx, 0, 3).flags & FLAG.mask_extra).toBeTruthy();
    expect(classifyCell(ctx, 0, 4).flags & FLAG.mask_extra).toBeTruthy();
    // Row 1: mask is 2 shorter → the last two ids have no mask entry.
    expect(classifyCell(ctx, 1, 3)).toMatchObject({ id: 12, completion: null });
    expect(classifyCell(ctx, 1, 3).flags & FLAG.mask_missing).toBeTruthy();
    expect(classifyCell(ctx, 1, 4).flags & FLAG.mask_missing).toBeTruthy();
    expect(classifyCell(ctx, 1, 2).flags).toBe(0);
    expect(rowReadout(ctx, 0)).toMatchObject({ completion_ids: 2, completion_mask: 4, mismatch: true, masked_tokens: 4 });
    expect(rowReadout(ctx, 1)).toMatchObject({ completion_ids: 4, completion_mask: 2, mismatch: true });
  });

  it('reads left padding kept in the data, with and without prompt_mask', () => {
    const withMask = gridContext(batch({ prompt_ids: [[0, 0, 5, 6]], prompt_mask: [[0, 1, 1, 0]], completion_ids: [[7]], completion_mask: [[1]] }));
    const cells = [0, 1, 2, 3].map((c) => classifyCell(withMask, 0, c));
    expect(cells.map((c) => c.attention)).toEqual([0, 1, 1, 0]);
    expect(cells.map((c) => c.region)).toEqual([REGION.pad, REGION.pad, REGION.prompt, REGION.prompt]);
    // The leading run of pad ids is padding whatever the mask says: 1 there, or 0 on a real token, is flagged.
    expect(cells.map((c) => c.flags)).toEqual([0, FLAG.mask_on_pad, 0, FLAG.mask_off_token]);
    const noMask = gridContext(batch({ prompt_ids: [[0, 0, 5]], completion_ids: [[7]], completion_mask: [[1]] }));
    expect([0, 1, 2].map((c) => classifyCell(noMask, 0, c).region)).toEqual([REGION.pad, REGION.pad, REGION.prompt]);
    expect([0, 1, 2].map((c) => classifyCell(noMask, 0, c).attention)).toEqual([0, 0, 1]);
  });

  it('flags a completion_mask of 0 on a real token and non-binary mask values', () => {
    const ctx = gridContext(batch({ prompt_ids: [[5]], completion_ids: [[10, 11, 1]], completion_mask: [[1, 0, 0.5]] }));
    expect(classifyCell(ctx, 0, 2).flags & FLAG.mask_off_token).toBeTruthy();
    expect(classifyCell(ctx, 0, 3).flags & FLAG.non_binary).toBeTruthy();
  });

  it('flags a tool_mask whose length differs from the ids', () => {
    const ctx = gridContext(batch({ prompt_ids: [[5]], completion_ids: [[10, 11, 1]], completion_mask: [[1, 1, 1]], tool_mask: [[1, 0]] }));
    expect(classifyCell(ctx, 0, 2)).toMatchObject({ tool: 0, flags: 0 });
    expect(classifyCell(ctx, 0, 3).flags & FLAG.tool_length).toBeTruthy();
  });

  it('marks the special ids it is given and every EOS id in the prompt', () => {
    const ctx = gridContext(batch({ eos_token_ids: [1, 2], prompt_ids: [[9, 5, 2]], completion_ids: [[1]], completion_mask: [[1]] }), [9]);
    expect([0, 1, 2].map((c) => classifyCell(ctx, 0, c).region)).toEqual([REGION.special, REGION.prompt, REGION.special]);
  });
});

describe('classifyColumns (what the canvas draws)', () => {
  // Masks with non-binary values and null entries; ids with pad (0), EOS (5) and a special id (3).
  const mask = fc.array(fc.constantFrom<number | null>(0, 1, 1, 1, 2, 0.5, null), { maxLength: 9 });
  const ids = fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 9 });
  it('classifies any column range as the plain per-cell twin does, on ragged, misaligned, non-binary and null masks', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }).chain((B) =>
          fc.record({
            prompt_ids: fc.array(ids, { minLength: B, maxLength: B }),
            prompt_mask: fc.option(fc.array(mask, { minLength: B, maxLength: B }), { nil: undefined }),
            completion_ids: fc.array(ids, { minLength: B, maxLength: B }),
            completion_mask: fc.array(mask, { minLength: B, maxLength: B }),
            tool_mask: fc.option(fc.array(mask, { minLength: B, maxLength: B }), { nil: undefined }),
            c0: fc.nat(20),
            c1: fc.nat(20),
          }),
        ),
        (x) => {
          const bt = batch({ prompt_ids: x.prompt_ids, prompt_mask: x.prompt_mask as number[][] | undefined, completion_ids: x.completion_ids, completion_mask: x.completion_mask as number[][], tool_mask: x.tool_mask as number[][] | undefined, eos_token_ids: [5] });
          const ctx = gridContext(bt, [3]);
          const W = ctx.P + ctx.C;
          const c0 = Math.min(x.c0, W);
          const c1 = Math.max(c0, Math.min(x.c1, W));
          for (let b = 0; b < x.completion_ids.length; b++) {
            // A reused buffer, dirty from another row: every cell of the range is written.
            const out = emptyCells(c1 - c0 + 2);
            for (const f of ['region', 'ids', 'attention', 'completion', 'tool', 'flags'] as const) out[f].fill(7);
            classifyColumns(ctx, b, c0, c1, out);
            const row = gridRow(ctx, b);
            for (let c = c0; c < c1; c++) {
              const want = refCell(bt, new Set([3]), b, c);
              const k = c - c0;
              expect({ region: out.region[k], id: out.ids[k], attention: out.attention[k], completion: out.completion[k], tool: out.tool[k], flags: out.flags[k] }, `sample ${b} column ${c}`).toEqual(want);
              expect(row.region[c]).toBe(want.region);
              expect(classifyCell(ctx, b, c).flags).toBe(want.flags);
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('buildGrid against the golden tiny-llama batch', () => {
  const b = parseBatch(fs.readFileSync(path.join(golden, 'batch.json'), 'utf8'));
  const st = parseSafeTensors(new Uint8Array(fs.readFileSync(path.join(golden, 'golden.safetensors'))));
  const grid = buildGrid(gridContext(b));
  const P = toI32(st, 'prompt_length')[0];
  const input_ids = toI32(st, 'input_ids');
  const attention = toI32(st, 'attention_mask');
  const position_ids = toI32(st, 'position_ids');

  it('has the golden boundary and width', () => {
    expect(grid.P).toBe(P);
    expect(grid.B * grid.W).toBe(input_ids.length);
  });

  it('has the golden ids, attention bits and position ids (cumsum − 1, pads at 1)', () => {
    for (let k = 0; k < input_ids.length; k++) {
      if (grid.region[k] !== REGION.absent) expect(grid.ids[k], `ids[${k}]`).toBe(input_ids[k]);
      expect(Math.max(0, grid.attention[k]), `attention[${k}]`).toBe(attention[k]);
    }
    expect(Array.from(grid.position_ids)).toEqual(Array.from(position_ids));
  });

  it('has no mismatch flags on a clean batch', () => {
    expect(grid.flags.every((f) => f === 0)).toBe(true);
    expect(grid.rows.some((r) => r.mismatch)).toBe(false);
  });
});

describe('grid and Doctor agree', () => {
  it('the cells of every mask-length-mismatch span are flagged', () => {
    const b = parseBatch(fs.readFileSync(path.join(root, 'tests/e2e/fixtures/r1-mask-mismatch.json'), 'utf8'));
    const ctx = gridContext(b);
    const grid = buildGrid(ctx);
    const found = diagnose(b).findings.filter((f) => f.rule === 'mask-length-mismatch');
    expect(found.length).toBeGreaterThan(0);
    for (const f of found) {
      const cols = spanColumns(ctx, f)!;
      expect(cols[1]).toBeGreaterThan(cols[0]);
      for (let c = cols[0]; c < cols[1]; c++) expect(grid.flags[f.sample! * grid.W + c], `sample ${f.sample} col ${c}`).not.toBe(0);
    }
    expect(grid.rows.filter((r) => r.mismatch).map((r) => r.sample)).toEqual([...new Set(found.map((f) => f.sample))]);
  });

  it('maps prompt-field spans onto right-aligned prompt columns', () => {
    const ctx = gridContext(batch({ num_generations: 2, prompt_ids: [[5, 6], [7, 8, 9]], completion_ids: [[1], [1]], completion_mask: [[1], [1]] }));
    expect(spanColumns(ctx, { sample: 0, field: 'prompt_ids', span: [0, 1] })).toEqual([1, 2]);
    expect(spanColumns(ctx, { sample: 1, span: [0, 1] })).toEqual([3, 4]);
    expect(spanColumns(ctx, { sample: 1 })).toBeNull();
  });
});

describe('heat', () => {
  it('takes its range from completion_mask = 1 tokens only', () => {
    const b = batch({ num_generations: 2, prompt_ids: [[5], [5]], completion_ids: [[10, 1, 0], [11, 1]], completion_mask: [[1, 1, 0], [1, 1]], old_per_token_logps: [[-2, -0.5, 100], [-4, -1]] });
    const src = heatSource('old_logp', b, {})!;
    expect(src.scale.lo).toBe(-4);
    expect(src.scale.hi).toBe(0); // log-probs are ≤ 0: the scale ends at 0, not at the junk 100 on padding
    expect(src.get(0, 2)).toBe(100);
  });

  it('centres diverging metrics and reads step results over the padded (B, C) grid', () => {
    const b = batch({ prompt_ids: [[5]], completion_ids: [[10, 1]], completion_mask: [[1, 1]] });
    // The step's arrays are (B, C) over the assembled batch's padded width C = 3 (one column of padding here).
    const run = { assemble: { padded: { B: 1, C: 3 } }, loss: { importance_ratio: new Float32Array([1.5, 0.8, 9]) } } as unknown as RunResults;
    // min–max (the default for signed metrics clips at p1–p99: tests/ui/heat_scale.test.ts), symmetric around 1.
    const src = heatSource('ratio', b, run, {}, { ...DEFAULT_SCALE, range: 'minmax' })!;
    expect(src.scale.center).toBe(1);
    expect(src.scale.lo).toBeCloseTo(0.5, 6);
    expect(src.scale.hi).toBeCloseTo(1.5, 6);
    expect(src.get(0, 2)).toBeCloseTo(9, 6);
    expect(src.get(0, 3)).toBeUndefined();
    expect(heatSource('kl', b, {})).toBeNull();
  });
});

it('makes whitespace visible', () => {
  expect(visibleText(' a\n\tb')).toBe('·a↵→b');
});
