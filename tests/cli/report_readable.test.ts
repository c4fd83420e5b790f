// The offline report reads right (issue 24): a heat with no range (all zeros) is painted neutral with a
// legend that says so, not saturated blue; numbers in the readout carry 4 significant digits (no
// 0.719952693525266); every batch with advantages has an overlay switch (the per-token advantage) and a
// summary chart of rewards and advantages per group. The colour and number rules are evaluated from the
// very script text the report embeds (REPORT_HELPERS).
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { renderReport, REPORT_HELPERS } from '../../src/report/html.ts';

type Heat = { label: string; lo: number; hi: number; centred: boolean; flat: boolean; note: string; rows: (number | null)[][] };
const embedded = (html: string) => JSON.parse(/<script type="application\/json" id="data">([\s\S]*?)<\/script>/.exec(html)![1]) as { heats: Heat[]; heat: number; rewards: number[]; advantages: number[] };
const helpers = new Function(`${REPORT_HELPERS}; return { fmtNum: fmtNum, heatColor: heatColor };`)() as { fmtNum: (v: number | null) => string; heatColor: (h: Heat, v: number) => string };

const batch = (rewards: number[], advantages: number[]): GrpoBatch => ({
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
  prompt_ids: [[5, 6], [5, 6], [7, 8], [7, 8]],
  completion_ids: [[10, 1], [11, 1], [12, 13, 1], [14, 1]],
  completion_mask: [[1, 1], [1, 1], [1, 1, 1], [1, 1]],
  rewards, advantages,
}) as GrpoBatch;
const render = (b: GrpoBatch, heat?: { label: string; rows: number[][] }) => renderReport({ name: 'b.json', batch: b, report: diagnose(b), heat, generator: 'test' });

describe('report heat scale', () => {
  it('an all-zero heat has no range: neutral cells and a legend saying all values are 0', () => {
    const b = batch([1, 1, 0, 0], [0, 0, 0, 0]);
    const html = render(b, { label: 'Δ log-prob', rows: [[0, 0], [0, 0], [0, 0, 0], [0, 0]] });
    const { heats } = embedded(html);
    for (const h of heats) {
      expect(h.flat).toBe(true);
      expect(h.note).toBe('all values are 0');
      // Saturated blue (rgb(70,80,255) sequential, rgb(70,130,255) centred) is the bottom of a scale; a flat heat is the neutral grey.
      expect(helpers.heatColor(h, 0)).toBe('rgb(40,44,56)');
    }
    expect(heats.map((h) => h.label)).toEqual(['Δ log-prob', 'advantage']);
  });

  it('a heat with a range is painted from blue (low) to red (high)', () => {
    const h = embedded(render(batch([1, 0, 2, 0], [0.5, -0.5, 1, -1]), { label: 'x', rows: [[0, 1], [2, 3], [4, 5, 6], [7, 8]] })).heats[0];
    expect([h.flat, h.lo, h.hi, h.note]).toEqual([false, 0, 8, '']);
    expect(helpers.heatColor(h, 0)).toBe('rgb(70,80,255)'); // t = 0: (70 + 0, 130 − 50, 255 − 0)
    expect(helpers.heatColor(h, 8)).toBe('rgb(255,80,80)'); // t = 1: (70 + 185, 130 − 50, 255 − 175)
    expect(helpers.heatColor(h, 4)).toBe('rgb(163,130,168)'); // t = 0.5: (162.5, 130, 167.5) rounded
  });
});

describe('report numbers, overlay switch and chart', () => {
  const b = batch([0.719952693525266, 0.2, 1, 0], [Math.fround(0.7071), Math.fround(-0.7071), 0.7071, -0.7071]);
  const html = render(b);

  it('formats readout numbers to 4 significant digits and embeds no long float', () => {
    expect(helpers.fmtNum(0.719952693525266)).toBe('0.72');
    expect(helpers.fmtNum(Math.fround(-0.8))).toBe('-0.8');
    expect(helpers.fmtNum(3)).toBe('3');
    expect(helpers.fmtNum(null)).toBe('—');
    const data = embedded(html);
    expect(data.rewards[0]).toBe(0.719953);
    expect(html).not.toContain('0.719952693525266');
    expect(html).not.toMatch(/0\.707099974155426/); // float32 0.7071 read back as float64
  });

  it('offers the advantage overlay behind a switch (none by default) with a legend slot', () => {
    const data = embedded(html);
    expect(html).toMatch(/<label>overlay <select id="heat" data-testid="report-heat"><option value="-1">none<\/option><option value="0">advantage<\/option>/);
    expect(html).toContain('data-testid="report-heat-legend"');
    expect(data.heat).toBe(-1);
    expect(data.heats[0].centred).toBe(true);
    expect(data.heats[0].rows[2]).toEqual([0.7071, 0.7071, 0.7071]);
  });

  it('charts rewards and advantages per sample, grouped, with a tooltip per bar', () => {
    expect(html).toContain('data-testid="report-chart"');
    for (const f of ['reward', 'advantage']) {
      const svg = new RegExp(`<svg[^>]*data-testid="report-chart-${f}"[\\s\\S]*?</svg>`).exec(html)![0];
      expect(svg.match(/<rect /g)).toHaveLength(4);
      expect(svg).toContain('2 groups');
    }
    expect(html).toContain('<title>sample 0 · group 0 · reward 0.71995</title>');
    expect(html).toContain('<title>sample 3 · group 1 · advantage -0.7071</title>');
  });
});
