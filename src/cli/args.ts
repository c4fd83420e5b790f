// Tiny argument parser shared by every CLI verb: positionals plus `--flag value` / `--switch`, and the
// input / output plumbing every verb repeats (read an input file, write the JSON result).
// Bad input raises CliError, which main() turns into a one-line reason and exit code 2.
import { accessSync, closeSync, constants, fstatSync, mkdirSync, openSync, readSync, statSync, writeFileSync } from 'node:fs';
import { BatchFormatError, widestCompletion, type GrpoBatch } from '../io/batch.ts';
import { checkScorable, padBatch, type PaddedBatch } from '../grpo/batch.ts';
import { importBatch, type ImportOptions, type ImportResult } from '../io/formats/index.ts';
import { assertComputable, modelLimits, type ValidateOptions } from '../io/validate.ts';
import { ModelLoadError, type ModelConfig } from '../model/config.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import { basename, dirname, resolve } from 'node:path';
import { stepConfigOf, type StepConfig } from '../grpo/step_config.ts';
import { effectiveSettings, fileLayer, trainerOfBatch, type EffectiveSettings } from '../grpo/settings/effective.ts';

export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

export interface ParsedArgs {
  positional: string[];
  flags: Map<string, string | true>;
}

/**
 * Positionals and flags. No verb takes a flag twice (several files are positionals: `doctor A B`), so a repeated
 * flag is refused, naming it: keeping one of two `--batch` values would compute on a file the user may not mean.
 */
export function parseArgs(argv: string[], spec: { values: string[]; switches?: string[] }): ParsedArgs {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  const seen = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2);
    if (seen.has(name)) throw new CliError(`--${name} is given twice: give it once`);
    seen.add(name);
    if (spec.switches?.includes(name)) {
      if (inline !== undefined) throw new CliError(`--${name} takes no value (got --${name}=${inline})`);
      flags.set(name, true);
    } else if (spec.values.includes(name)) {
      // The next word is the value unless it is another option (`--out --json` is a forgotten value, not a file
      // named "--json"); a value that starts with -- can be given as --name=--value.
      const v = inline ?? (argv[i + 1]?.startsWith('--') ? undefined : argv[++i]);
      if (v === undefined) throw new CliError(`--${name} needs a value`);
      // `--out -` is standard output, where every verb writes without --out (not a file named "-").
      if (name === 'out' && v === '-') flags.delete(name);
      else flags.set(name, v);
    } else {
      throw new CliError(`unknown option --${name}`);
    }
  }
  return { positional, flags };
}

export function flag(p: ParsedArgs, name: string): string | undefined {
  const v = p.flags.get(name);
  return typeof v === 'string' ? v : undefined;
}

/**
 * `--model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]`: the arguments of `score` and `step`;
 * a verb's own options (`more`) are in `args`.
 */
export function modelBatchArgs(
  argv: string[],
  verb: string,
  more: { values?: string[]; switches?: string[] } = {},
): { model: string; batch: string; refModel?: string; out?: string; args: ParsedArgs } {
  const args = parseArgs(argv, { values: ['model', 'batch', 'ref-model', 'out', ...(more.values ?? [])], switches: more.switches });
  const model = flag(args, 'model');
  const batch = flag(args, 'batch');
  if (!model || !batch) throw new CliError(`${verb} needs --model DIR and --batch BATCH (grpo-batch/v1 JSON, or a TRL / verl / OpenRLHF / prime-rl dump)`);
  if (args.positional.length) throw new CliError(`unexpected argument "${args.positional[0]}"`);
  checkOutPath(flag(args, 'out'));
  return { model, batch, refModel: flag(args, 'ref-model'), out: flag(args, 'out'), args };
}

/**
 * Inputs that are not regular files (a pipe, a device such as /dev/zero, a /proc file) have no size to trust:
 * they are read up to this many bytes and refused beyond. 2 GiB - 1 is also the most a regular file can be read
 * in one piece (Node's readFileSync), so no input the studio can use is turned away by it. Tests lower it.
 */
export const inputLimits = { nonRegularBytes: 2 ** 31 - 1 };

const errCode = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? (e as Error).message.split('\n')[0];

/**
 * An input file's bytes; a missing or unreadable file is a CliError naming it, not a stack trace. A regular
 * file is read at its size; anything else (pipe, device) at most inputLimits.nonRegularBytes, in bounded chunks.
 */
export function readInput(path: string): Uint8Array {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    throw new CliError(`cannot read ${path}: ${errCode(e)}`);
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new CliError(`cannot read ${path}: it is a directory`);
    const read = (buf: Uint8Array, at: number): number => {
      for (;;) {
        try {
          return readSync(fd, buf, at, buf.byteLength - at, null);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw new CliError(`cannot read ${path}: ${errCode(e)}`);
        }
      }
    };
    // A regular file is read at its size (a /proc file says 0 and is read as a stream).
    if (st.isFile() && st.size > 0) {
      if (st.size > 2 ** 31 - 1) throw new CliError(`cannot read ${path}: ${st.size} bytes, more than the 2 GiB one input may hold`);
      // A fresh buffer owned by this call: typed-array views of its contents start at offset 0.
      const out = new Uint8Array(st.size);
      let got = 0;
      while (got < out.byteLength) {
        const n = read(out, got);
        if (n === 0) break;
        got += n;
      }
      return got === out.byteLength ? out : out.slice(0, got);
    }
    // A pipe or device: bounded chunks, refused past the cap (never an unbounded buffer).
    const cap = inputLimits.nonRegularBytes;
    const chunks: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const buf = new Uint8Array(Math.min(1 << 20, cap + 1 - total));
      const n = read(buf, 0);
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > cap) throw new CliError(`cannot read ${path}: not a regular file, and longer than ${cap} bytes (the most read from a pipe or device)`);
    }
    const out = new Uint8Array(total);
    let off = 0;
    for (const c of chunks) {
      out.set(c, off);
      off += c.byteLength;
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/**
 * `--out FILE` (or another output flag) checked before any work: its folder must exist and the path must not be
 * a folder. A CliError naming the path, so a long run never ends in a failed write.
 */
export function checkOutPath(path: string | undefined, what = '--out'): void {
  if (path === undefined) return;
  if (path === '') throw new CliError(`${what}: empty path`);
  let st;
  try {
    st = statSync(path);
  } catch {
    st = undefined;
  }
  if (st?.isDirectory()) throw new CliError(`${what} ${path}: is a directory, expected a file path`);
  const dir = dirname(resolve(path));
  let d;
  try {
    d = statSync(dir);
  } catch (e) {
    throw new CliError(`${what} ${path}: its folder ${dir} does not exist (${errCode(e)})`);
  }
  if (!d.isDirectory()) throw new CliError(`${what} ${path}: ${dir} is not a folder`);
}

/** Writes an output file; any failure (missing folder, a folder in the way, no permission, full disk) is a CliError naming it. */
export function writeOutput(path: string, data: string | Uint8Array, what = '--out'): void {
  checkOutPath(path, what);
  try {
    writeFileSync(path, data);
  } catch (e) {
    throw new CliError(`${what} ${path}: cannot write (${errCode(e)})`);
  }
}

/**
 * An output folder (`--save-adapter DIR`) checked before any work: an existing folder we may write in, or a path
 * whose nearest existing ancestor is such a folder. No recursive mkdir (Node's loops forever under /proc).
 */
export function checkOutDir(path: string, what: string): void {
  if (path === '') throw new CliError(`${what}: empty path`);
  let p = resolve(path);
  for (;;) {
    let st;
    try {
      st = statSync(p);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') throw new CliError(`${what} ${path}: cannot use ${p} (${errCode(e)})`);
      const up = dirname(p);
      if (up === p) throw new CliError(`${what} ${path}: no existing folder above it`);
      p = up;
      continue;
    }
    if (!st.isDirectory()) throw new CliError(`${what} ${path}: ${p} is not a folder`);
    try {
      accessSync(p, constants.W_OK);
    } catch (e) {
      throw new CliError(`${what} ${path}: ${p} is not writable (${errCode(e)})`);
    }
    // /proc and /sys look writable to root but refuse new entries: say so now, not after the step.
    if (/^\/(proc|sys)(\/|$)/.test(p) && p !== resolve(path)) throw new CliError(`${what} ${path}: cannot create a folder under ${p}`);
    return;
  }
}

/** Creates `path` (and missing parents) one level at a time, then writes the files; failures are a CliError naming the path. */
export function writeOutDir(path: string, files: Record<string, Uint8Array | string>, what: string): void {
  checkOutDir(path, what);
  const missing: string[] = [];
  for (let p = resolve(path); ; p = dirname(p)) {
    try {
      statSync(p);
      break;
    } catch {
      missing.unshift(p);
    }
    if (dirname(p) === p) break;
  }
  try {
    for (const p of missing) mkdirSync(p);
    for (const [name, data] of Object.entries(files)) writeFileSync(resolve(path, name), data);
  } catch (e) {
    throw new CliError(`${what} ${path}: cannot write (${errCode(e)})`);
  }
}

/**
 * One batch from one or more files of any supported format (grpo-batch/v1, TRL, verl, OpenRLHF,
 * prime-rl), merged in order when several (the ranks or experiences of one step).
 */
export function readBatchFiles(paths: string[], opts: ImportOptions = {}): ImportResult {
  return importBatch(paths.map((name) => ({ name, bytes: readInput(name) })), opts);
}

/** pad / EOS ids of a loaded tokenizer, for formats that do not carry them (prime-rl). */
export function tokenizerIds(tok: Tokenizer | undefined): ImportOptions {
  if (!tok) return {};
  return { pad_token_id: tok.pad_token_id ?? tok.eos_token_id, eos_token_ids: tok.eos_token_id === undefined ? undefined : [tok.eos_token_id] };
}

/** Loads --tokenizer DIR when given; a bad folder is a CliError naming it. */
export async function tokenizerFlag(args: ParsedArgs): Promise<Tokenizer | undefined> {
  const dir = flag(args, 'tokenizer');
  if (!dir) return undefined;
  const { loadTokenizerDir } = await import('../tokenize/node.ts');
  try {
    return await loadTokenizerDir(dir);
  } catch (e) {
    throw new CliError(`--tokenizer ${dir}: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * A batch file (any supported format) read and validated for a computation (`score`, `step`) before any number is computed:
 * anything it cannot use is an InputError (exit 2) naming field, sample and position. The reader's notes go to stderr,
 * as `convert` and `doctor` write them: what a format does not carry (its loss settings, its sampling temperature) and
 * the studio therefore takes from its defaults is said where the number is computed, not only where the file is converted.
 */
export function readBatchFor(path: string, purpose: NonNullable<ValidateOptions['purpose']>): { batch: GrpoBatch; format: string } {
  const { batch, format, notes, unknownKeys } = readBatchFiles([path]);
  assertComputable(batch, { purpose }, path);
  // Scoring reads at least one prompt and one completion position (checkScorable, the step pipeline): said here with the file.
  const P = batch.prompt_ids.reduce((m, r) => Math.max(m, r.length), 0);
  const C = widestCompletion(batch);
  if (P < 1 || C < 1) throw new CliError(`${path}: the batch needs at least one prompt token and one completion token (P = ${P}, C = ${C})`);
  // After the checks: a file refused is one line on stderr.
  for (const n of notes) console.error(`note: ${path}: ${n}`);
  // As the page's import and `doctor` list them: a misspelt setting is not taken silently for its default.
  if (unknownKeys.length) console.error(`note: ${path}: keys not read: ${unknownKeys.join(', ')}`);
  return { batch, format };
}

/**
 * The batch padded as the computation reads it (src/grpo/batch.ts padBatch); a per-token row whose length differs
 * from its ids (the Doctor's mask-length-mismatch rule) is one line naming the file, field and sample.
 */
export function padBatchOf(batch: GrpoBatch, path: string): PaddedBatch {
  try {
    return padBatch(batch);
  } catch (e) {
    if (e instanceof BatchFormatError) throw new CliError(`${path}: ${e.message}`);
    throw e;
  }
}

/** checkScorable (src/grpo/batch.ts) against the policy's vocabulary, its refusal one line naming the file. */
export function checkScorableFile(batch: GrpoBatch, padded: PaddedBatch, cfg: ModelConfig, path: string): void {
  try {
    checkScorable(batch, padded, cfg.vocab_size, 'policy');
  } catch (e) {
    if (e instanceof BatchFormatError) throw new CliError(`${path}: ${e.message}`);
    throw e;
  }
}

/**
 * A model loaded from the folder a flag names (`--model`, `--ref-model`): a ModelLoadError (no config.json, an
 * unsupported config) is one line naming the flag and the folder, so the user knows which of the two to fix.
 */
export async function modelOfFlag<T>(name: string, path: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (e) {
    if (!(e instanceof ModelLoadError)) throw e;
    throw new CliError(`--${name} ${path}: ${e.message.startsWith(`${path}: `) ? e.message.slice(path.length + 2) : e.message}`);
  }
}

/** Checkpoint tensors the model does not use are named on stderr (HF warns too): never dropped without a word. */
export function warnUnused(verb: string, source: string, info: { unused: string[] } | null): void {
  const unused = info?.unused ?? [];
  if (unused.length === 0) return;
  const shown = unused.slice(0, 4).map((n) => `"${n}"`).join(', ');
  console.error(`grpo-studio ${verb}: warning: ${source}: ${unused.length} checkpoint tensor(s) not used by config.json: ${shown}${unused.length > 4 ? ', …' : ''}`);
}

/** The batch against the model that will read it: ids and pad/EOS within its vocabulary, rows within its positions. */
export function checkBatchForModel(batch: GrpoBatch, cfg: ModelConfig, path: string, purpose: NonNullable<ValidateOptions['purpose']>, which: string): void {
  assertComputable(batch, { purpose, ...modelLimits(cfg) }, `${path} (${which} ${cfg.model_type}, vocab_size ${cfg.vocab_size})`);
}

/**
 * The reference must read the policy's token ids: one vocabulary (as the step pipeline requires). `score` and
 * `step` refuse another with this one line, naming both folders.
 */
export function checkSameVocabulary(policy: ModelConfig, policyPath: string, ref: ModelConfig, refPath: string): void {
  if (ref.vocab_size !== policy.vocab_size) {
    throw new CliError(`--ref-model ${refPath}: the reference's vocabulary (${ref.vocab_size} tokens) differs from the policy's (${policy.vocab_size}, --model ${policyPath})`);
  }
}

/**
 * The result as one line of JSON, to `out` or else to stdout, resolved once written. NaN and ±Infinity are
 * written as Python's json.dump writes them (NaN, Infinity), never as JSON.stringify's silent `null`, and
 * make the exit code 1 with a line on stderr naming the first field that holds one: a non-finite result is
 * an error finding, not a clean run.
 */
export async function writeResult(out: string | undefined, result: unknown, verb: string): Promise<number> {
  let top = '';
  let bad: string | undefined;
  let count = 0;
  const json =
    JSON.stringify({ result }, function (this: unknown, k: string, v: unknown) {
      if (this === result) top = k;
      if (typeof v !== 'number' || Number.isFinite(v)) return v;
      count++;
      bad ??= `${top} (${v})`;
      return `\u0000${v}`;
    })
      .slice('{"result":'.length, -1)
      .replace(/"\\u0000(NaN|Infinity|-Infinity)"/g, '$1') + '\n';
  if (out) writeOutput(out, json);
  else await new Promise<void>((resolve, reject) => process.stdout.write(json, (e) => (e ? reject(e) : resolve())));
  if (!bad) return 0;
  console.error(`grpo-studio ${verb}: the result holds ${count} non-finite value(s), first in ${bad}; written as NaN / Infinity`);
  return 1;
}

type Nested = number | Nested[];

/** A row-major array as nested plain arrays of the given shape. */
export function nest(a: ArrayLike<number>, shape: number[], offset = 0): Nested[] {
  const [n, ...rest] = shape;
  const stride = rest.reduce((x, y) => x * y, 1);
  return Array.from({ length: n }, (_, i) => (rest.length ? nest(a, rest, offset + i * stride) : a[offset + i]));
}

/**
 * The update's settings: the batch's own (its trainer's defaults under its `config` / `run`, the one resolution
 * the page uses for the same file) and the StepConfig they give. Bad values are input errors: one line, exit 2.
 */
export function stepSettingsOfFile(batch: GrpoBatch, source: string): { settings: EffectiveSettings; config: StepConfig } {
  const C = widestCompletion(batch);
  try {
    const settings = effectiveSettings(trainerOfBatch(batch), [fileLayer(batch, basename(source))]);
    return { settings, config: stepConfigOf(settings, C) };
  } catch (e) {
    const err = e as Error;
    if (err.name === 'GrpoLossError' || err.name === 'OptimizerConfigError' || err.name === 'SettingsError' || err.name === 'BatchFormatError') throw new CliError(`${source}: ${err.message}`);
    throw e;
  }
}
