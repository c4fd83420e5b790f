// The offline report's train–inference mismatch section (src/report/html.ts, written by `grpo-studio report`):
// batches with a planted sampler–trainer mismatch (tests/helpers/mismatch_fixtures.ts, planted rows known by
// construction) get the diagnosis with exactly the planted rows, each row and top token a link to its grid
// cell; the log-ratio heat is trainer − sampler on the compared tokens (recomputed here from the batch's two
// fields), centred on 0 with a symmetric range; a clean batch gets the section with no diagnosis; a batch
// without the sampler's log-probs (or with a sampler side of other rows) gets no section; the report stays
// self-contained.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { LOG_RATIO_HEAT } from '../../src/report/html.ts';
import { DIAGNOSIS_OF, plantedBatch } from '../helpers/mismatch_fixtures.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'report-mismatch-'));

/** `grpo-studio report` on the batch: its exit code and the HTML it wrote. */
async function report(batch: GrpoBatch, name: string): Promise<{ code: number; html: string }> {
  const file = path.join(dir, `${name}.json`);
  const out = path.join(dir, `${name}.html`);
  fs.writeFileSync(file, serializeBatch(batch));
  const code = await main(['report', file, '--out', out]);
  return { code, html: fs.readFileSync(out, 'utf8') };
}

interface Data {
  P: number;
  heats: { label: string; unit: string; rows: (number | null)[][]; lo: number; hi: number; centred: boolean }[];
  heat: number;
  marks: { sample: number | null; cols: [number, number] | null; heat?: number }[];
}
const embedded = (html: string) => JSON.parse(/<script type="application\/json" id="data">([\s\S]*?)<\/script>/.exec(html)![1]) as Data;

/** The <li> of one diagnosis, and its row chips (mark index, sample, position). */
function diagnosisRows(html: string, id: string): { mark: number; sample: number; position: number | null }[] {
  const li = new RegExp(`<li class="diagnosis" data-diagnosis="${id}">([\\s\\S]*?)</li>`).exec(html);
  expect(li, `diagnosis ${id} in the report`).not.toBeNull();
  return [...li![1].matchAll(/<span class="mark" data-mark="(\d+)" data-sample="(\d+)">#\d+(?: \[(\d+)\])?/g)].map((m) => ({ mark: +m[1], sample: +m[2], position: m[3] === undefined ? null : +m[3] }));
}

/** The exit code `grpo-studio report` owes the batch: 1 when the Doctor has error findings. */
const doctorCode = (batch: GrpoBatch) => (diagnose(batch).counts.error ? 1 : 0);

describe('grpo-studio report: the mismatch section', () => {
  const cases = (['top_p', 'temperature', 'off_by_one', 'stale'] as const).map((p) => [p, DIAGNOSIS_OF[p]] as const);
  for (const [pattern, id] of cases) {
    it(`names ${id} on exactly the planted rows of a ${pattern} batch, each row a link to its grid row`, async () => {
      const { batch, planted } = plantedBatch(pattern);
      const { code, html } = await report(batch, pattern);
      expect(code).toBe(doctorCode(batch));
      expect(html).toContain('data-testid="report-mismatch"');
      const rows = diagnosisRows(html, id);
      expect(rows.map((r) => r.sample).sort((a, b) => a - b)).toEqual(planted);
      const data = embedded(html);
      for (const r of rows) expect(data.marks[r.mark]).toMatchObject({ sample: r.sample });
    });
  }

  it('names the divergence at its first token in turn 2, the link pointing at that cell', async () => {
    const { batch, planted } = plantedBatch('divergence');
    const { html } = await report(batch, 'divergence');
    const rows = diagnosisRows(html, 'divergence');
    expect(rows.map((r) => r.sample).sort((a, b) => a - b)).toEqual(planted);
    const data = embedded(html);
    const P = Math.max(...batch.prompt_ids.map((p) => p.length));
    for (const r of rows) {
      // Turn 2 starts after the tool response (the run of tool_mask 0): the divergence is planted from there on.
      const tool = batch.tool_mask![r.sample];
      const turn2 = tool.findIndex((v, t) => v === 1 && t > 0 && tool[t - 1] === 0);
      expect(r.position).toBeGreaterThanOrEqual(turn2);
      expect(html).toMatch(new RegExp(`data-sample="${r.sample}">#${r.sample} \\[${r.position}\\] turn 2 `));
      expect(data.marks[r.mark].cols).toEqual([P + r.position!, P + r.position! + 1]);
      expect(data.heats[data.marks[r.mark].heat!].label).toBe(LOG_RATIO_HEAT);
    }
  });

  it('draws d = old − sampling on the compared tokens as a heat centred on 0, and shows its mean |d|', async () => {
    const { batch } = plantedBatch('divergence');
    const { html } = await report(batch, 'heat');
    const data = embedded(html);
    const heat = data.heats.find((h) => h.label === LOG_RATIO_HEAT)!;
    expect(heat).toMatchObject({ unit: 'nats', centred: true });
    let [maxAbs, sumAbs, n] = [0, 0, 0];
    batch.completion_ids.forEach((ids, b) =>
      ids.forEach((_, t) => {
        const compared = batch.completion_mask[b][t] === 1 && batch.tool_mask![b][t] === 1;
        if (!compared) return expect(heat.rows[b][t]).toBeNull();
        const d = batch.old_per_token_logps![b][t] - batch.sampling_per_token_logps![b][t];
        expect(heat.rows[b][t]).toBeCloseTo(d, 4);
        [maxAbs, sumAbs, n] = [Math.max(maxAbs, Math.abs(d)), sumAbs + Math.abs(d), n + 1];
      }),
    );
    expect(heat.hi).toBeCloseTo(maxAbs, 12);
    expect(heat.lo).toBe(-heat.hi);
    // The Doctor's old_per_token_logps heat stays the one shown first; the log ratio is a switch away.
    expect(data.heats[data.heat].label).toBe('old_per_token_logps');
    expect(html).toContain(`mean |d| ${Number((sumAbs / n).toPrecision(5))} `);
  });

  it('lists the top tokens with both probabilities, each linked to its cell', async () => {
    const { batch } = plantedBatch('off_by_one');
    const { html } = await report(batch, 'top');
    const data = embedded(html);
    const P = Math.max(...batch.prompt_ids.map((p) => p.length));
    const top = /<table data-testid="report-mismatch-top">([\s\S]*?)<\/table>/.exec(html)![1];
    const rows = [...top.matchAll(/<tr class="mark" data-mark="(\d+)"><td class="n">(\d+)<\/td><td class="n">(\d+)<\/td>(?:<td[^>]*>[^<]*<\/td>){3}<td class="n">([^<]+)<\/td><td class="n">([^<]+)<\/td><td class="n">([^<]+)<\/td>/g)];
    expect(rows.length).toBe(20);
    let last = Infinity;
    for (const [, mark, sample, position, ps, pt, d] of rows) {
      const [b, t] = [+sample, +position];
      expect(Number(ps)).toBeCloseTo(Math.exp(batch.sampling_per_token_logps![b][t]), 4);
      expect(Number(pt)).toBeCloseTo(Math.exp(batch.old_per_token_logps![b][t]), 4);
      expect(Number(d)).toBeCloseTo(batch.old_per_token_logps![b][t] - batch.sampling_per_token_logps![b][t], 4);
      expect(Math.abs(Number(d))).toBeLessThanOrEqual(last); // largest |d| first
      last = Math.abs(Number(d));
      expect(data.marks[+mark]).toMatchObject({ sample: b, cols: [P + t, P + t + 1] });
    }
  });

  it('shows the section with no diagnosis on a clean batch', async () => {
    const { batch } = plantedBatch('clean');
    const { html } = await report(batch, 'clean');
    expect(html).toContain('data-testid="report-mismatch"');
    expect(html).toContain('data-testid="report-mismatch-clean"');
    expect(html).not.toContain('class="diagnosis"');
  });

  it('has no mismatch section nor log-ratio heat without the sampler log-probs, and stays self-contained with one', async () => {
    const { batch } = plantedBatch('top_p');
    const { sampling_per_token_logps: _, ...one } = batch;
    const without = await report(one, 'one-side');
    expect(without.html).not.toContain('report-mismatch');
    expect(embedded(without.html).heats.map((h) => h.label)).not.toContain('log ratio d = trainer − sampler');
    // A sampler side with a row fewer than completion_ids cannot be compared: the report is written, without the section.
    const short = { ...batch, sampling_per_token_logps: batch.sampling_per_token_logps!.slice(1) };
    const shortReport = await report(short, 'short-side');
    expect(shortReport.code).toBe(doctorCode(short));
    expect(shortReport.html).not.toContain('report-mismatch');
    const { html } = await report(batch, 'both');
    expect(html).not.toMatch(/\b(src|href)\s*=\s*["']?(https?:)?\/\//i);
    expect(html).not.toMatch(/@import|url\(/i);
    expect(html).toContain("default-src 'none'");
    expect(html.match(/<script/g)).toHaveLength(2);
    // The page's script compiles (a stray newline inside one of its strings would not).
    expect(() => new Function(/<script>([\s\S]*?)<\/script>/.exec(html)![1])).not.toThrow();
  });
});
