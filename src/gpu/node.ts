// Node entry to the GPU (tests, CLI, benchmarks): Dawn through the npm `webgpu` package, WGSL read
// from shaders/ on disk. The object `create()` returns is kept at module level for the life of the
// process: if it is garbage-collected while a device lives, Dawn can crash the process.
import { closeSync, existsSync, fstatSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGpu, requestBestAdapter } from './adapter.ts';
import type { Gpu } from './context.ts';

const SHADER_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shaders');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
let navigatorGpu: any = null; // module-level on purpose (see header)
let shared: Promise<Gpu> | null = null;

function readShader(name: string): string {
  const p = join(SHADER_DIR, `${name}.wgsl`);
  if (!existsSync(p)) throw new Error(`unknown shader "${name}" (no ${p})`);
  return readFileSync(p, 'utf8');
}

/**
 * Dawn's notices about its own limits, printed by its C++ logger (fprintf to stderr, no callback the npm package
 * exposes) while it first enumerates the adapters: on software Vulkan (lavapipe) the driver's 1,000,000 dynamic
 * buffers are cut to Dawn's 16. They say nothing about the run and would precede the CLI's one-line reason.
 */
const DAWN_NOTICE = /^Warning: maxDynamic(Uniform|Storage)BuffersPerPipelineLayout artificially reduced from \d+ to \d+ to fit dynamic offset allocation limit\.$/;

/**
 * Runs `f` with the process's stderr (fd 2) pointed at a temporary file, then restores it and writes back every
 * line but DAWN_NOTICE's: anything else native code printed (a real error) still reaches stderr, in order.
 * Linux only (it reopens fd 2 through /proc/self/fd) and only for a pipe, terminal or device; elsewhere (a regular
 * file, a socket that cannot be reopened) `f` runs as is.
 */
async function withoutDawnNotices<T>(f: () => Promise<T>): Promise<T> {
  if (process.platform !== 'linux' || process.env.GRPO_STUDIO_DAWN_NOTICES === '1') return f();
  let saved: number;
  let dir: string;
  try {
    // A regular file reopened would get its own offset: the shell's later writes would overwrite ours. Pipes,
    // terminals, /dev/null and files opened for appending (2>>log) have none to lose, so only they are redirected.
    if (fstatSync(2).isFile() && !(parseInt(/^flags:\s*([0-7]+)/m.exec(readFileSync('/proc/self/fdinfo/2', 'utf8'))?.[1] ?? '0', 8) & 0o2000)) return f(); // O_APPEND: safe
    saved = openSync('/proc/self/fd/2', 'a');
    dir = mkdtempSync(join(tmpdir(), 'grpo-studio-dawn-'));
  } catch {
    return f();
  }
  const log = join(dir, 'stderr.txt');
  // close + open takes the lowest free descriptor: 2. Checked, and undone when something else took it.
  closeSync(2);
  const fd = openSync(log, 'w');
  if (fd !== 2) {
    closeSync(fd);
    closeSync(saved);
    rmSync(dir, { recursive: true, force: true });
    return f();
  }
  try {
    return await f();
  } finally {
    closeSync(2);
    const back = openSync(`/proc/self/fd/${saved}`, 'a');
    closeSync(saved);
    let text = '';
    try {
      text = readFileSync(log, 'utf8');
    } catch {
      /* nothing captured */
    }
    rmSync(dir, { recursive: true, force: true });
    const kept = text.split('\n').filter((l, i, all) => !DAWN_NOTICE.test(l) && !(l === '' && i === all.length - 1));
    if (kept.length) writeSync(back, kept.join('\n') + '\n');
  }
}

/**
 * The process-wide GPU. Honors GRPO_STUDIO_DAWN_FLAGS (comma-separated Dawn toggles, e.g.
 * "backend=opengles") for machines where only the GL backend works.
 */
export function nodeGpu(): Promise<Gpu> {
  if (!shared) {
    shared = (async () => {
      const { create, globals } = await import('webgpu');
      Object.assign(globalThis, globals);
      const flags = (process.env.GRPO_STUDIO_DAWN_FLAGS ?? '').split(',').filter(Boolean);
      navigatorGpu = create(flags);
      const compat = flags.some((f) => f.includes('opengles'));
      const adapter = await withoutDawnNotices(() => requestBestAdapter(navigatorGpu, compat ? [{ featureLevel: 'compatibility' } as GPURequestAdapterOptions] : []));
      return createGpu(adapter, `dawn-node${flags.length ? ` (${flags.join(',')})` : ''}`, readShader);
    })();
  }
  return shared;
}
