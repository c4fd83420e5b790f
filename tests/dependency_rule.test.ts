// The layer rule (.dependency-cruiser.cjs) holds on src/ and bench/: no cycles, imports only in the
// layers' direction, no production import of the src/oracle test oracle. A second tree with one planted
// violation per rule checks that each rule really fires (a config that matched nothing would pass the
// first test on anything).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const config = path.join(root, '.dependency-cruiser.cjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
  cycle?: { name: string }[];
}

/** depcruise over `dirs` (relative to cwd) with the project's config; its violations. */
function cruise(cwd: string, dirs: string[]): Violation[] {
  const bin = path.join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
  const r = spawnSync(process.execPath, [bin, ...dirs, '--config', config, '--output-type', 'json'], { cwd, encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
  if (r.status === null || !r.stdout) throw new Error(`depcruise did not run: ${r.error?.message ?? r.stderr}`);
  const out = JSON.parse(r.stdout) as { summary: { violations: Violation[]; totalCruised: number } };
  expect(out.summary.totalCruised).toBeGreaterThan(0);
  return out.summary.violations;
}

const show = (v: Violation[]) => v.map((x) => `${x.rule.name}: ${x.from} → ${x.to}`).join('\n');

describe('dependency rule', () => {
  it('src/ and bench/ have no cycle, no upward import and no production import of src/oracle', () => {
    const v = cruise(root, ['src', 'bench']);
    expect(show(v)).toBe('');
  });

  it('fires on each kind of violation', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'depcruise-'));
    try {
      const files: Record<string, string> = {
        'tsconfig.json': JSON.stringify({ compilerOptions: { allowImportingTsExtensions: true, noEmit: true, module: 'ESNext', moduleResolution: 'Bundler' } }),
        'src/oracle/twin.ts': "import { k } from '../kernels/k.ts';\nexport const twin = k;\n", // allowed: twins may import production
        'src/kernels/k.ts': "import { g } from '../gpu/g.ts';\nexport const k = g;\n",
        'src/gpu/g.ts': "import type { K } from '../kernels/types.ts';\nexport const g: K = 1;\n", // gpu → kernels (type-only still counts)
        'src/kernels/types.ts': 'export type K = number;\n',
        'src/grpo/step.ts': "import { twin } from '../oracle/twin.ts';\nexport const step = twin;\n", // production → oracle
        'src/model/m.ts': "import { step } from '../grpo/step.ts';\nexport const m = step;\n", // model → grpo
        'src/io/a.ts': "import { b } from './b.ts';\nexport const a = 1 + b;\n", // a ⇄ b cycle
        'src/io/b.ts': "import { a } from './a.ts';\nexport const b = () => a;\n",
        'src/bridge/protocol.ts': 'export type Msg = { type: string };\nexport const STAGES = [1];\n',
        'src/bridge/client.ts': "import type { Msg } from './protocol.ts';\nexport const client = (m: Msg) => m;\n",
        'src/ui/ok.ts': "import type { Msg } from '../bridge/protocol.ts';\nexport const ok = (m: Msg) => m;\n", // allowed: type only
        'src/ui/bad.ts': "import { STAGES } from '../bridge/protocol.ts';\nexport const bad = STAGES;\n", // ui → bridge (value)
        'src/store/s.ts': "import { m } from '../model/m.ts';\nexport const s = m;\n", // store → model
        // allowed: store → bridge, the client included; store → worker (type-only still counts)
        'src/store/talk.ts': "import { client } from '../bridge/client.ts';\nimport type { W } from '../worker/w.ts';\nexport const talk: W = client({ type: '' }).type.length;\n",
        // allowed: worker → the bridge's contract; worker → bridge/client.ts (the page's end)
        'src/worker/w.ts': "import { STAGES } from '../bridge/protocol.ts';\nimport { client } from '../bridge/client.ts';\nexport type W = number;\nexport const w = [STAGES, client];\n",
        // bridge → worker; bridge → store (type-only still counts)
        'src/bridge/up.ts': "import { w } from '../worker/w.ts';\nimport type { S } from '../store/s.ts';\nexport const up: S[] = [w];\n",
        // allowed: bridge → the settings tables, a type of the GPU stack; bridge → grpo (value)
        'src/bridge/settings.ts': "import { table } from '../grpo/settings/table.ts';\nimport type { K } from '../kernels/k.ts';\nimport { step } from '../grpo/step.ts';\nexport const settings: K[] = [table, step];\n",
        'src/grpo/settings/table.ts': 'export const table = 1;\n',
        'src/io/v.ts': "import type { K } from '../kernels/types.ts';\nimport { k } from '../kernels/k.ts';\nexport const v: K = k;\n", // io → kernels (types.ts allowed)
        'src/doctor/d.ts': "import { v } from '../io/v.ts';\nexport const d = v;\n", // allowed: doctor above io
        'src/io/w.ts': "import { d } from '../doctor/d.ts';\nexport const w = d;\n", // io → doctor
        'src/cli/c.ts': "import { s } from '../store/s.ts';\nexport const c = s;\n", // cli → store
        'src/view/v.ts': "import { STAGES } from '../bridge/protocol.ts';\nexport const v = STAGES;\n", // view → bridge
        'src/ui/grid.ts': "import { v } from '../view/v.ts';\nexport const grid = v;\n", // allowed: the page draws the view
        'src/report/r.ts': "import { v } from '../view/v.ts';\nimport { s } from '../store/s.ts';\nexport const r = [v, s];\n", // report → store (→ view allowed)
        'src/grpo/g.ts': "import { v } from '../view/v.ts';\nexport const g = v;\n", // grpo → view
        'src/cli/report.ts': "import { r } from '../report/r.ts';\nexport const cr = r;\n", // cli ⇝ store, through the report
      };
      for (const [f, text] of Object.entries(files)) {
        mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        writeFileSync(path.join(dir, f), text);
      }
      const got = cruise(dir, ['src'])
        .map((x) => `${x.rule.name}: ${x.from} → ${x.to}`)
        .sort();
      expect(got).toEqual(
        [
          'gpu-is-the-bottom: src/gpu/g.ts → src/kernels/types.ts',
          'ingestion-is-the-top: src/io/v.ts → src/kernels/k.ts',
          'ingestion-is-the-top: src/io/w.ts → src/doctor/d.ts',
          'cli-is-headless: src/cli/c.ts → src/store/s.ts',
          'cli-is-headless: src/cli/report.ts → src/store/s.ts',
          'report-below-the-apps: src/report/r.ts → src/store/s.ts',
          'view-is-for-display: src/grpo/g.ts → src/view/v.ts',
          'view-is-pure: src/view/v.ts → src/bridge/protocol.ts',
          'model-below-grpo: src/model/m.ts → src/grpo/step.ts',
          'no-circular: src/io/a.ts → src/io/b.ts',
          'no-oracle-in-production: src/grpo/step.ts → src/oracle/twin.ts',
          'store-talks-to-the-worker: src/store/s.ts → src/model/m.ts',
          'ui-reads-the-store: src/ui/bad.ts → src/bridge/protocol.ts',
          'store-never-imports-the-worker: src/store/talk.ts → src/worker/w.ts',
          'worker-never-the-client: src/worker/w.ts → src/bridge/client.ts',
          'bridge-imports-neither-end: src/bridge/up.ts → src/worker/w.ts',
          'bridge-imports-neither-end: src/bridge/up.ts → src/store/s.ts',
          'bridge-runs-nothing: src/bridge/settings.ts → src/grpo/step.ts',
        ].sort(),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
