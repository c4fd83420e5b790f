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
import { build, type Plugin } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const KIT = join(ROOT, '.devkit');
/** The tree travels with the kit: the tool's limit is 64 MiB. */
const TREE_LIMIT = 64 * 2 ** 20;

const sh = (cmd: string, args: string[], cwd = ROOT) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });

/**
 * Each module's `import.meta.url` as if it still sat in its source tree: src/ resolves under the bundle's own
 * folder (its shaders/ copy), everything else (bench/) under the checkout two levels above the bundle.
 */
function sourceUrls(tree: string): Plugin {
  return {
    name: 'source-urls',
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, (args) => {
        const rel = relative(tree, args.path).split('\\').join('/');
        if (rel.startsWith('..')) return undefined; // node_modules: untouched
        const base = rel.startsWith('src/') ? "new URL('./', import.meta.url)" : "new URL('../../', import.meta.url)";
        const contents = readFileSync(args.path, 'utf8').replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, ${base}).href`);
        return { contents, loader: 'ts' };
      });
    },
  };
}

/** Bundles bench/run.ts of `tree` into .devkit/<name>/run.mjs (and its chunks) with that tree's shaders/ beside it. */
async function bundle(tree: string, name: string): Promise<void> {
  const out = join(KIT, name);
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
    plugins: [sourceUrls(tree)],
    logLevel: 'warning',
  });
  cpSync(join(tree, 'shaders'), join(out, 'shaders'), { recursive: true });
}

/** node + webgpu (linux-x64 only), once: they change only with this machine's Node or the lockfile. */
function runtime(): void {
  const tar = join(KIT, 'runtime.tar.xz');
  if (existsSync(tar)) return;
  const stage = mkdtempSync(join(tmpdir(), 'devkit-'));
  mkdirSync(join(stage, 'bin'));
  cpSync(process.execPath, join(stage, 'bin/node'));
  const pkg = join(ROOT, 'node_modules/webgpu');
  for (const f of ['index.js', 'package.json', 'dist/linux-x64']) cpSync(join(pkg, f), join(stage, 'node_modules/webgpu', f), { recursive: true });
  sh('tar', ['-cJf', tar, '-C', stage, 'bin', 'node_modules'], ROOT);
  rmSync(stage, { recursive: true, force: true });
}

/** Debian's Vulkan loader, for a machine whose image has none (`apt-get download` needs only the apt mirror). */
function vulkanLoader(): void {
  const gl = join(KIT, 'gl');
  if (existsSync(gl) && readdirSync(gl).some((f) => f.endsWith('.deb'))) return;
  mkdirSync(gl, { recursive: true });
  sh('apt-get', ['download', 'libvulkan1'], gl);
}

function treeBytes(): number {
  const tracked = sh('git', ['ls-files', '-z']).split('\0').filter((f) => f && existsSync(join(ROOT, f)));
  const untracked = sh('git', ['ls-files', '-z', '--others', '--exclude-standard']).split('\0').filter(Boolean);
  let bytes = 0;
  for (const f of [...tracked, ...untracked]) bytes += statSync(join(ROOT, f)).size;
  return bytes;
}

function kitBytes(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((s, e) => s + (e.isDirectory() ? kitBytes(join(dir, e.name)) : statSync(join(dir, e.name)).size), 0);
}

async function main(argv: string[]): Promise<void> {
  const refs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--ref' && argv[i + 1]) refs.push(argv[++i]);
    else throw new Error(`device-kit: unknown argument "${argv[i]}" (usage: npx tsx scripts/device-kit.ts [--ref COMMIT ...])`);
  }
  mkdirSync(KIT, { recursive: true });
  runtime();
  vulkanLoader();
  await bundle(ROOT, 'head');
  const names = ['head'];
  for (const ref of refs) {
    const commit = sh('git', ['rev-parse', '--short', ref]).trim();
    const wt = mkdtempSync(join(tmpdir(), `devkit-${commit}-`));
    sh('git', ['worktree', 'add', '--detach', wt, commit]);
    try {
      symlinkSync(join(ROOT, 'node_modules'), join(wt, 'node_modules')); // esbuild resolves this checkout's packages
      await bundle(wt, commit);
      names.push(commit);
    } finally {
      sh('git', ['worktree', 'remove', '--force', wt]);
    }
  }
  const tree = treeBytes();
  const kit = kitBytes(KIT);
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  console.log(`.devkit: ${mib(kit)} (bundles: ${names.join(', ')}); tree ${mib(tree)}; together ${mib(tree + kit)} of the ${mib(TREE_LIMIT)} that may travel`);
  if (tree + kit > TREE_LIMIT) {
    const big = sh('git', ['ls-files', '-z']).split('\0').filter((f) => f && existsSync(join(ROOT, f)) && statSync(join(ROOT, f)).size > 4 * 2 ** 20);
    console.log(`too large: move these aside for the call (they come back with \`git checkout -- <path>\`): ${big.join(' ')}`);
  }
  const carry = ['.devkit/runtime.tar.xz', '.devkit/gl', ...names.map((n) => `.devkit/${n}`)];
  // HEAD's suites in the order of what a lease is for (issue 23's table), then each --ref's step for the before.
  const suites = ['head:gemm:70', 'head:step:100', 'head:profile:70', 'head:attention:40', 'head:sample:50', ...names.slice(1).map((n) => `${n}:step:90`)];
  console.log(`\nrun(carry=${JSON.stringify(carry)}, timeout_s=590, command="BUDGET=540 SUITES='${suites.join(' ')}' bash scripts/device-run.sh")`);
  console.log('then: give_back; merge $OUT/results.json into bench/results-<gpu>.json (keep the earlier run as `before`)');
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
