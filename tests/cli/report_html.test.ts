// The shareable report (src/report/html.ts, `grpo-studio report`): one HTML file with no external
// resource (nothing to fetch: no src/href to a URL, a CSP that forbids loading anything), the Doctor's
// findings listed with their rule ids, the grid's data embedded as JSON that survives hostile token
// texts ("</script>" inside a completion), and the CLI verb writing it (exit 0) or refusing a bad file (2).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { renderReport } from '../../src/report/html.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const fixture = path.join(root, 'tests/e2e/fixtures/r1-mask-mismatch.json');

const embedded = (html: string) => JSON.parse(/<script type="application\/json" id="data">([\s\S]*?)<\/script>/.exec(html)![1]) as Record<string, unknown>;

describe('renderReport', () => {
  const batch = parseBatch(fs.readFileSync(fixture, 'utf8'));
  const report = diagnose(batch);

  it('is self-contained: no URL is loaded from anywhere', () => {
    const html = renderReport({ name: 'r1.json', batch, report, generator: 'test' });
    expect(html).not.toMatch(/\b(src|href)\s*=\s*["']?(https?:)?\/\//i);
    expect(html).not.toMatch(/@import|url\(/i);
    expect(html).toContain("default-src 'none'");
  });

  it('lists every finding with its rule and links it to its cells', () => {
    const html = renderReport({ name: 'r1.json', batch, report, generator: 'test' });
    expect(report.findings.length).toBeGreaterThan(0);
    for (const f of report.findings) expect(html).toContain(`data-rule="${f.rule}"`);
    const data = embedded(html) as { marks: { sample: number | null; cols: [number, number] | null }[]; B: number; P: number };
    expect(data.B).toBe(batch.completion_ids.length);
    const i = report.findings.findIndex((f) => f.rule === 'mask-length-mismatch');
    expect(html).toContain(`data-mark="${i}" data-rule="mask-length-mismatch"`);
    expect(data.marks[i].sample).toBe(5);
    expect(data.marks[i].cols![0]).toBeGreaterThanOrEqual(data.P);
  });

  it('keeps hostile token text inside its JSON', () => {
    const evil = '</script><script>alert(1)</script>';
    const html = renderReport({ name: '<b>x</b>', batch, report, tokenTexts: { by_id: Object.fromEntries(batch.completion_ids.flat().map((t) => [t, evil])) }, generator: 'test' });
    expect(html.match(/<script/g)).toHaveLength(2); // the data block and the grid script, nothing injected
    expect(html).toContain('&lt;b&gt;x&lt;/b&gt;');
    expect((embedded(html).texts as string[]).filter((t) => t === evil).length).toBeGreaterThan(0);
  });
});

describe('grpo-studio report', () => {
  it('writes the report with the Doctor exit code (1 on error findings, 0 clean) and refuses an unreadable batch with exit 2', async () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'report-')), 'r.html');
    expect(await main(['report', fixture, '--out', out])).toBe(1);
    const html = fs.readFileSync(out, 'utf8');
    expect(html).toContain('data-rule="mask-length-mismatch"');
    expect(await main(['report', path.join(root, 'tests/fixtures/batches/clean.json'), '--out', out])).toBe(0);
    const bad = path.join(path.dirname(out), 'bad.json');
    fs.writeFileSync(bad, '{"format": "grpo-batch/v1",');
    expect(await main(['report', bad, '--out', out])).toBe(2);
  });

  it('reads every format as doctor does (a trainer dump, ids the reader inferred): the same exit code', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'report-'));
    const formats = path.join(root, 'tests/fixtures/formats');
    for (const f of fs.readdirSync(formats)) {
      const file = path.join(formats, f);
      const doctor = await main(['doctor', file, '--json']);
      expect([f, await main(['report', file, '--out', path.join(dir, `${f}.html`)])]).toEqual([f, doctor]);
      expect(fs.readFileSync(path.join(dir, `${f}.html`), 'utf8')).toMatch(/^<!doctype html>/i);
    }
  });
});
