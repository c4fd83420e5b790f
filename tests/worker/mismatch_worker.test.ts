// The mismatch explorer's worker side (src/worker/mismatch.ts) on the planted fixtures: each pattern's
// diagnosis names exactly the planted rows and the clean batch gets none, as the page will show them; the
// packed log ratios the grid's heat reads are old − sampling on every compared token (completion_mask 1,
// tool_mask not 0) and NaN elsewhere, computed here from the batch's own fields; the buffers handed over are
// the packed ones; a batch without a side answers which field it lacks instead of failing.
import { describe, expect, it } from 'vitest';
import { mismatchOf, transferOf } from '../../src/worker/mismatch.ts';
import { DIAGNOSIS_OF, PLANTED, plantedBatch } from '../helpers/mismatch_fixtures.ts';

describe('mismatch explorer, worker side', () => {
  for (const pattern of PLANTED) {
    it(`${pattern}: ${pattern === 'clean' ? 'no diagnosis' : `${DIAGNOSIS_OF[pattern]} on exactly the planted rows`}`, () => {
      const { batch, planted } = plantedBatch(pattern);
      const r = mismatchOf(batch, { sides: null, tokenizer: null });
      expect(r.missing).toBeNull();
      const report = r.report!;
      expect([report.sampler, report.trainer]).toEqual(['sampling_per_token_logps', 'old_per_token_logps']);
      if (pattern === 'clean') expect(report.diagnoses).toEqual([]);
      else expect(report.diagnoses.map((d) => [d.id, d.rows.map((x) => x.sample)])).toEqual([[DIAGNOSIS_OF[pattern], planted]]);
    });
  }

  it('packs d = old − sampling per compared token, NaN elsewhere, row by row; hands over exactly those buffers', () => {
    const { batch } = plantedBatch('divergence');
    const r = mismatchOf(batch, { sides: null, tokenizer: null });
    const { values, offsets } = r.log_ratio!;
    expect(Array.from(offsets.subarray(1), (o, b) => o - offsets[b])).toEqual(batch.completion_ids.map((row) => row.length));
    let compared = 0;
    batch.completion_ids.forEach((row, b) =>
      row.forEach((_, t) => {
        const v = values[offsets[b] + t];
        const inLoss = batch.completion_mask[b][t] === 1 && batch.tool_mask![b][t] !== 0;
        if (!inLoss) return expect(v, `sample ${b} position ${t}`).toBeNaN();
        compared++;
        const want = batch.old_per_token_logps![b][t] - batch.sampling_per_token_logps![b][t];
        expect(Math.abs(v - want), `sample ${b} position ${t}`).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(want)));
      }),
    );
    // The divergence rows carry tool responses: some tokens are not compared, and the report counts the rest.
    expect(compared).toBeLessThan(values.length);
    expect(r.report!.tokens).toBe(compared);
    expect(transferOf(r)).toEqual([values.buffer, offsets.buffer]);
  });

  it('names the top tokens with the tokenizer it is given', () => {
    const { batch } = plantedBatch('top_p');
    const r = mismatchOf(batch, { sides: null, tokenizer: { special_ids: new Set(), tokenText: (id) => `<${id}>` } });
    const top = r.report!.top;
    expect(top.length).toBeGreaterThan(0);
    for (const t of top) expect(t.text).toBe(`<${batch.completion_ids[t.sample][t.position]}>`);
  });

  it('a batch without a side: which field it lacks, no report, nothing to hand over', () => {
    const { batch } = plantedBatch('clean');
    for (const field of ['sampling_per_token_logps', 'old_per_token_logps'] as const) {
      const r = mismatchOf({ ...batch, [field]: undefined }, { sides: null, tokenizer: null });
      expect(r.report).toBeNull();
      expect(r.missing).toContain(field);
      expect(transferOf(r)).toEqual([]);
    }
    // The trainer side recomputed stands in for a missing old_per_token_logps.
    const r = mismatchOf({ ...batch, old_per_token_logps: undefined }, { sides: { trainer: batch.old_per_token_logps!, base: null }, tokenizer: null });
    expect(r.report!.trainer).toBe('recomputed');
    expect(r.recomputed).toBe(true);
  });
});
