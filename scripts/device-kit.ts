// `npx tsx scripts/device-kit.ts [--ref COMMIT ...]`: packs what `npm run bench` needs onto a lent GPU machine
// (the `device` tool), which has no Node, no npm registry and maybe no Vulkan loader, into the ignored folder
// .devkit/, then prints the one `run` call that benchmarks there (scripts/device-run.sh). A machine is lent
// for 15 minutes per task, so everything that can be done here is done here:
//   .devkit/runtime.tar.xz  this machine's node binary and the `webgpu` package's linux-x64 Dawn (≈ 29 MB)
//   .devkit/gl/*.deb        Debian's Vulkan loader (libvulkan1), unpacked there only if the machine lacks one
//   .devkit/head/           an esbuild bundle of bench/run.ts from the working tree, with a copy of shaders/
//   .devkit/<commit>/       the same of another commit (--ref), for a before/after in the same lease
// A bundle's product code (src/) reads its shaders beside the bundle, so a commit's bundle runs that commit's
// kernels; bench code reads its fixtures (golden models, configs) from the checkout.
// `npx tsx scripts/device-kit.ts merge RESULTS GPU "NOTE"` then folds the run's results.json (as the tool brings
// it back) into bench/results-GPU.json: HEAD's suites become `results`, the file's previous run `before`, and each
// --ref bundle's suites `ab` (keyed COMMIT:SUITE).
import { build, type Plugin } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchFile, Row } from '../bench/types.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const KIT = join(ROOT, '.devkit');
/** The tree travels with the kit: the tool's limit is 64 MiB. */
const TREE_LIMIT = 64 * 2 ** 20;

const sh = (cmd: string, args: string[], cwd = ROOT) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });

/**
 * Each module's `import.meta.url` (and .dirname, .filename) as if it still sat in its source tree: src/ resolves under
 * the bundle's own folder (its shaders/ copy), everything else (bench/) under the checkout two levels above the
 * bundle. `rewritten` collects the files it changed: a bundle whose src/gpu/node.ts was not among them would read
 * another tree's shaders, and is refused.
 */
function sourceUrls(tree: string, rewritten: Set<string>): Plugin {
  const root = realpathSync(tree); // esbuild hands real paths
  return {
    name: 'source-urls',
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, (args) => {
        const rel = relative(root, args.path).split('\\').join('/');
        if (rel.startsWith('..') || rel.startsWith('node_modules/')) return undefined; // dependencies: untouched
        const base = rel.startsWith('src/') ? "new URL('./', import.meta.url)" : "new URL('../../', import.meta.url)";
        const url = `new URL(${JSON.stringify(rel)}, ${base})`;
        const meta: Record<string, string> = {
          url: `${url}.href`,
          filename: `decodeURIComponent(${url}.pathname)`,
          dirname: `decodeURIComponent(new URL('.', ${url}).pathname).replace(/\\/$/, '')`,
        };
        const text = readFileSync(args.path, 'utf8');
        const contents = text.replace(/\bimport\.meta\.(url|filename|dirname)\b/g, (_, k: string) => meta[k]);
        if (contents !== text) rewritten.add(rel);
        return { contents, loader: 'ts' };
      });
    },
  };
}

/** Bundles bench/run.ts of `tree` into .devkit/<name>/run.mjs (and its chunks) with that tree's shaders/ beside it. */
async function bundle(tree: string, name: string): Promise<void> {
  const out = join(KIT, name);
  const rewritten = new Set<string>();
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: [join(tree, 'bench/run.ts')],
    outdir: out,
    entryNames: 'run',
    outExtension: { '.js': '.mjs' },
    // A suite is imported when it runs: with chunks, the page suites' externals are imported only then.
    splitting: true,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // The page suites' dev server and browser stay out: the machine has no chromium, and they are not its work.
    external: ['webgpu', 'vite', 'playwright-core', 'onnxruntime-node', 'sharp'],
    // Bundled CommonJS dependencies call require(): give the ES module one.
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
    plugins: [sourceUrls(tree, rewritten)],
    logLevel: 'warning',
  });
  if (!rewritten.has('src/gpu/node.ts')) throw new Error(`device-kit: the bundle of ${tree} would not read its own shaders (src/gpu/node.ts's import.meta.url was not rewritten)`);
  cpSync(join(tree, 'shaders'), join(out, 'shaders'), { recursive: true });
}

/** node + webgpu (linux-x64 only), rebuilt when this machine's Node or the installed webgpu package changes. */
function runtime(): void {
  const tar = join(KIT, 'runtime.tar.xz');
  const stamp = join(KIT, 'runtime.stamp');
  const pkg = join(ROOT, 'node_modules/webgpu');
  const version = `node ${process.version}, webgpu ${(JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string }).version}`;
  if (existsSync(tar) && existsSync(stamp) && readFileSync(stamp, 'utf8') === version) return;
  const stage = mkdtempSync(join(tmpdir(), 'devkit-'));
  try {
    mkdirSync(join(stage, 'bin'));
    cpSync(process.execPath, join(stage, 'bin/node'));
    for (const f of ['index.js', 'package.json', 'dist/linux-x64']) cpSync(join(pkg, f), join(stage, 'node_modules/webgpu', f), { recursive: true });
    sh('tar', ['-cJf', tar, '-C', stage, 'bin', 'node_modules'], ROOT);
    writeFileSync(stamp, version);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** Debian's Vulkan loader, for a machine whose image has none (`apt-get download` needs only the apt mirror). */
function vulkanLoader(): void {
  const gl = join(KIT, 'gl');
  if (existsSync(gl) && readdirSync(gl).some((f) => f.endsWith('.deb'))) return;
  mkdirSync(gl, { recursive: true });
  sh('apt-get', ['download', 'libvulkan1'], gl);
}

/** The files that travel without being carried (tracked and present, untracked and not ignored), with their sizes. */
function treeFiles(): { path: string; bytes: number; tracked: boolean }[] {
  const list = (tracked: boolean, args: string[]) =>
    sh('git', ['ls-files', '-z', ...args]).split('\0').filter((f) => f && existsSync(join(ROOT, f))).map((path) => ({ path, bytes: statSync(join(ROOT, path)).size, tracked }));
  return [...list(true, []), ...list(false, ['--others', '--exclude-standard'])];
}

/** Bytes of a file, or of every file under a folder. */
function pathBytes(p: string): number {
  const st = statSync(p);
  return st.isDirectory() ? readdirSync(p).reduce((sum, e) => sum + pathBytes(join(p, e)), 0) : st.size;
}

/** A bench/results-<gpu>.json: a run (bench/types.ts BenchFile) with its note, --ref runs and the run before it. */
type ResultsFile = BenchFile & { note?: string; ab?: Record<string, Row[]> };

/** Folds device-run.sh's results.json ({ "BUNDLE:SUITE": BenchFile }) into bench/results-<gpu>.json. */
function merge(file: string, gpu: string, note: string): void {
  if (!/^[a-z0-9-]+$/.test(gpu)) throw new Error(`device-kit merge: GPU name "${gpu}" must be lower-case letters, digits and dashes (bench/results-<gpu>.json)`);
  const runs = Object.entries(JSON.parse(readFileSync(file, 'utf8')) as Record<string, BenchFile>);
  const head = runs.filter(([key]) => key.startsWith('head:'));
  if (!head.length) throw new Error(`device-kit merge: ${file} holds no head:SUITE run (has ${runs.map(([k]) => k).join(', ') || 'none'})`);
  const results: Record<string, Row[]> = {};
  for (const [, run] of head) for (const [suite, rows] of Object.entries(run.results)) if (suite !== 'peak' || !results.peak) results[suite] = rows;
  const ab: Record<string, Row[]> = {};
  for (const [key, run] of runs.filter(([k]) => !k.startsWith('head:'))) ab[key] = run.results[key.split(':')[1]] ?? [];
  const target = join(ROOT, 'bench', `results-${gpu}.json`);
  const old = existsSync(target) ? (JSON.parse(readFileSync(target, 'utf8')) as ResultsFile) : null;
  const first = head[0][1];
  const merged = {
    date: first.date,
    quick: first.quick,
    adapter: first.adapter,
    peak: first.peak,
    note,
    results,
    ...(Object.keys(ab).length ? { ab } : {}),
    ...(old ? { before: { date: old.date, note: old.note, peak: old.peak, results: old.results, ...(old.ab ? { ab: old.ab } : {}) } } : {}),
  };
  writeFileSync(target, JSON.stringify(merged, null, 1) + '\n');
  console.log(`${relative(ROOT, target)}: ${Object.keys(results).join(', ')}${Object.keys(ab).length ? `; ab ${Object.keys(ab).join(', ')}` : ''}${old ? `; before = the run of ${old.date}` : ''}`);
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'merge') {
    const [, file, gpu, note] = argv;
    if (!file || !gpu || !note) throw new Error('usage: npx tsx scripts/device-kit.ts merge RESULTS GPU "NOTE"');
    return merge(file, gpu, note);
  }
  const refs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--ref' && argv[i + 1]) refs.push(argv[++i]);
    else throw new Error(`device-kit: unknown argument "${argv[i]}" (usage: npx tsx scripts/device-kit.ts [--ref COMMIT ...])`);
  }
  // The tool carries at most 8 paths: the runtime, the loader, HEAD's bundle and one per ref.
  if (refs.length > 5) throw new Error(`device-kit: at most 5 --ref bundles travel in one call (got ${refs.length})`);
  mkdirSync(KIT, { recursive: true });
  runtime();
  vulkanLoader();
  await bundle(ROOT, 'head');
  const names = ['head'];
  sh('git', ['worktree', 'prune']); // an earlier run killed mid-bundle leaves its worktree registered
  for (const ref of refs) {
    const commit = sh('git', ['rev-parse', '--short', `${ref}^{commit}`]).trim();
    const wt = mkdtempSync(join(tmpdir(), `devkit-${commit}-`));
    try {
      sh('git', ['worktree', 'add', '--detach', wt, commit]);
      symlinkSync(join(ROOT, 'node_modules'), join(wt, 'node_modules')); // esbuild resolves this checkout's packages
      await bundle(wt, commit);
      names.push(commit);
    } finally {
      try {
        sh('git', ['worktree', 'remove', '--force', wt]);
      } catch {
        rmSync(wt, { recursive: true, force: true }); // `worktree add` failed: only the folder is left
      }
    }
  }
  const carry = ['.devkit/runtime.tar.xz', '.devkit/gl', ...names.map((n) => `.devkit/${n}`)];
  const files = treeFiles();
  const tree = files.reduce((sum, f) => sum + f.bytes, 0);
  const kit = carry.reduce((sum, c) => sum + pathBytes(join(ROOT, c)), 0);
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  console.log(`.devkit: ${mib(kit)} (bundles: ${names.join(', ')}); tree ${mib(tree)}; together ${mib(tree + kit)} of the ${mib(TREE_LIMIT)} that may travel`);
  if (tree + kit > TREE_LIMIT) {
    const big = files.filter((f) => f.tracked && f.bytes > 4 * 2 ** 20).map((f) => f.path);
    console.log(`too large: move these aside for the call (they come back with \`git checkout -- <path>\`): ${big.join(' ')}`);
  }
  // HEAD's suites in the order of what a lease is for (issue 23's table), then each --ref's step for the before.
  const suites = ['head:gemm:70', 'head:step:100', 'head:profile:70', 'head:attention:40', 'head:sample:50', ...names.slice(1).map((n) => `${n}:step:90`)];
  console.log(`\nrun(carry=${JSON.stringify(carry)}, timeout_s=590, command="BUDGET=540 SUITES='${suites.join(' ')}' bash scripts/device-run.sh")`);
  console.log('then give_back, and: npx tsx scripts/device-kit.ts merge <files_at>/results.json <gpu, e.g. h200> "what ran, which commit"');
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
