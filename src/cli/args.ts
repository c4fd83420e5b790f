// Tiny argument parser shared by every CLI verb: positionals plus `--flag value` / `--switch`, and the
// input / output plumbing every verb repeats (read an input file, write the JSON result).
// Bad input raises CliError, which main() turns into a one-line reason and exit code 2.
import { readFileSync, writeFileSync } from 'node:fs';
import type { GrpoBatch } from '../io/batch.ts';
import { importBatch, type ImportOptions, type ImportResult } from '../io/formats/index.ts';
import { assertComputable, modelLimits, type ValidateOptions } from '../io/validate.ts';
import type { ModelConfig } from '../model/config.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import { basename } from 'node:path';
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

export function parseArgs(argv: string[], spec: { values: string[]; switches?: string[] }): ParsedArgs {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2);
    if (spec.switches?.includes(name)) {
      flags.set(name, true);
    } else if (spec.values.includes(name)) {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new CliError(`--${name} needs a value`);
      flags.set(name, v);
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
  return { model, batch, refModel: flag(args, 'ref-model'), out: flag(args, 'out'), args };
}

/** An input file's bytes; a missing or unreadable file is a CliError naming it, not a stack trace. */
export function readInput(path: string): Uint8Array {
  try {
    // A fresh copy: a pooled Buffer may sit at an offset typed-array views of its contents cannot use.
    return new Uint8Array(readFileSync(path));
  } catch (e) {
    throw new CliError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
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
 * anything it cannot use is an InputError (exit 2) naming field, sample and position.
 */
export function readBatchFor(path: string, purpose: NonNullable<ValidateOptions['purpose']>): { batch: GrpoBatch; format: string } {
  const { batch, format } = readBatchFiles([path]);
  assertComputable(batch, { purpose }, path);
  return { batch, format };
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
  if (out) writeFileSync(out, json);
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
  const C = batch.completion_ids.reduce((m, r) => Math.max(m, r.length), 0);
  try {
    const settings = effectiveSettings(trainerOfBatch(batch), [fileLayer(batch, basename(source))]);
    return { settings, config: stepConfigOf(settings, C) };
  } catch (e) {
    const err = e as Error;
    if (err.name === 'GrpoLossError' || err.name === 'OptimizerConfigError' || err.name === 'SettingsError' || err.name === 'BatchFormatError') throw new CliError(`${source}: ${err.message}`);
    throw e;
  }
}
