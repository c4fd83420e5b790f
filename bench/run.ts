// `npm run bench [-- --quick] [--only SUITE,...] [--json FILE]`: runs every benchmark suite on the Node GPU
// adapter, prints one table per suite and writes all rows as JSON (default bench/results.json). A suite is
// a module exporting `run(gpu, opts): Promise<Row[]>`; add yours to SUITES.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeGpu } from '../src/gpu/node.ts';
import { measurePeak } from './peak.ts';
import type { BenchFile, Row, Suite } from './types.ts';

const SUITES: Record<string, () => Promise<Suite>> = {
  peak: () => import('./peak.ts'),
  gemm: () => import('./gemm.ts'),
  loss: () => import('./loss.ts'),
  loss_table: () => import('./loss_table.ts'),
  model: () => import('./model.ts'),
  step: () => import('./step.ts'),
  profile: () => import('./profile.ts'),
  sample: () => import('./sample.ts'),
  plan: () => import('./plan.ts'),
  doctor: () => import('./doctor.ts'),
  trl: () => import('./trl.ts'),
  import: () => import('./import.ts'),
  import_page: () => import('./import_page.ts'),
  attention: () => import('./attention.ts'),
  mismatch: () => import('./mismatch.ts'),
  mismatch_page: () => import('./mismatch_page.ts'),
  first_update: () => import('./first_update.ts'),
  roundtrip: () => import('./roundtrip.ts'),
};

/** Suites that need no Node GPU adapter (the CPU, or the page's own WebGPU): with nothing else selected, none is opened. */
const CPU_ONLY = new Set(['doctor', 'import_page', 'mismatch', 'mismatch_page', 'first_update', 'roundtrip']);

function table(rows: Row[]): string {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: Row[string] | undefined) => (v === null || v === undefined ? '' : typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : v);
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padStart(width[i])).join('  ');
  return [line(cols), line(width.map((w) => '-'.repeat(w))), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n');
}

async function main(argv: string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const only = arg('--only')?.split(',') ?? Object.keys(SUITES);
  const unknown = only.filter((s) => !(s in SUITES));
  if (unknown.length) throw new Error(`unknown suite(s) ${unknown.join(', ')}; have ${Object.keys(SUITES).join(', ')}`);
  const out = arg('--json') ?? path.join(path.dirname(fileURLToPath(import.meta.url)), 'results.json');
  const gpu = only.every((s) => CPU_ONLY.has(s)) ? null : await nodeGpu();
  console.log(`adapter: ${gpu ? `${gpu.adapter.description || gpu.adapter.device} (${gpu.adapter.backend}); timestamps: ${gpu.hasTimestamps}` : 'none (CPU suites)'}; ${quick ? 'quick' : 'full'} sizes`);
  const results: Record<string, Row[]> = {};
  // The ceilings first, in the same run: every GPU suite reports its kernels as fractions of them.
  const probe = gpu ? await measurePeak(gpu, { quick }) : null;
  if (probe) {
    results.peak = probe.rows;
    console.log(`\n## peak\n${table(probe.rows)}`);
  }
  for (const name of only.filter((s) => s !== 'peak')) {
    const suite = await SUITES[name]();
    const rows = await suite.run(gpu, { quick, peak: probe?.peak ?? null });
    results[name] = rows;
    console.log(`\n## ${name}\n${table(rows)}`);
  }
  const file: BenchFile = { date: new Date().toISOString(), quick, adapter: gpu?.adapter ?? null, peak: probe?.peak ?? null, results };
  writeFileSync(out, JSON.stringify(file, null, 1) + '\n');
  console.log(`\nwrote ${out}`);
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
