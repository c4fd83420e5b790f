// `grpo-studio doctor BATCH... [--tokenizer DIR] [--json]`: check a batch in any supported format
// (grpo-batch/v1, TRL, verl, OpenRLHF, prime-rl; several files of one step are merged) and print the
// findings grouped by severity, after the detected format and the reader's notes. The files are read as the
// page reads them (their own pad / EOS ids) and the Doctor's options come from doctorOptions, as on the page:
// a --tokenizer that does not fit the batch is not applied, and its rules are listed as skipped with the
// reason. Exit 1 if any error, 0 otherwise; an unreadable file or tokenizer folder is exit 2 with one line
// (BatchFormatError / CliError, mapped in main.ts).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CliError, flag, parseArgs, readBatchFiles, tokenizerFlag, type ParsedArgs } from './args.ts';
import { diagnose, doctorOptions, modelFacts, type DoctorReport, type Finding, type KnownModel, type Severity } from '../doctor/index.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { ImportResult } from '../io/formats/index.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';

/** Human output shows this many findings per rule and severity; --json always has all of them. */
const MAX_PER_RULE = 10;

const TITLES: Record<Severity, string> = { error: 'ERRORS', warning: 'WARNINGS', info: 'INFO' };

function formatFinding(f: Finding): string {
  const where = f.span ? ` [${f.field ?? 'completion_ids'} ${f.span[0]}:${f.span[1]}]` : '';
  return `  [${f.rule}]${where} ${f.message}\n      hint: ${f.hint}`;
}

function formatReport(report: DoctorReport, source: string, imported: ImportResult): string {
  const lines: string[] = [];
  for (const sev of ['error', 'warning', 'info'] as Severity[]) {
    const fs = report.findings.filter((f) => f.severity === sev);
    if (fs.length === 0) continue;
    lines.push(`${TITLES[sev]} (${fs.length})`);
    const shown = new Map<string, number>();
    for (const f of fs) {
      const n = (shown.get(f.rule) ?? 0) + 1;
      shown.set(f.rule, n);
      if (n <= MAX_PER_RULE) lines.push(formatFinding(f));
    }
    for (const [rule, n] of shown) if (n > MAX_PER_RULE) lines.push(`  [${rule}] … and ${n - MAX_PER_RULE} more (--json lists all)`);
  }
  if (report.skipped.length) {
    lines.push('SKIPPED');
    for (const s of report.skipped) lines.push(`  [${s.rule}] ${s.reason}`);
  }
  if (imported.format !== 'grpo-batch') lines.unshift(`${source}: ${imported.trainer} (${imported.format}) → grpo-batch/v1`, ...imported.notes.map((n) => `  note: ${n}`));
  if (imported.unknownKeys.length) lines.push(`UNKNOWN KEYS (not read): ${imported.unknownKeys.join(', ')}`);
  const { error, warning, info } = report.counts;
  lines.push(`${source}: ${error} error(s), ${warning} warning(s), ${info} info`);
  return lines.join('\n');
}

/**
 * --tokenizer DIR as the Doctor knows it: the tokenizer, and the facts of the folder's config.json when it is a
 * model folder (the page knows the same of its loaded model). No name: a folder may be named anything.
 */
export async function modelFlag(args: ParsedArgs): Promise<KnownModel | undefined> {
  const tokenizer = await tokenizerFlag(args);
  if (!tokenizer) return undefined;
  const dir = flag(args, 'tokenizer')!;
  const file = path.join(dir, 'config.json');
  let config: unknown;
  if (existsSync(file)) {
    try {
      config = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new CliError(`--tokenizer ${dir}: config.json is not valid JSON (${(e as Error).message})`);
    }
    if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new CliError(`--tokenizer ${dir}: config.json is not a JSON object`);
  }
  return { tokenizer, config: config ? modelFacts(config) : undefined, label: `--tokenizer ${dir}` };
}

/**
 * The Doctor renders the chat template in-thread: prove first, in a bounded worker (time and heap), that
 * every conversation of `batch` renders, so a runaway template is exit 2 with one line naming the
 * --tokenizer folder instead of a V8 fatal error. Shared by `doctor` and `report`.
 */
export async function boundTemplate(args: ParsedArgs, tokenizer: Tokenizer | undefined, batch: Pick<GrpoBatch, 'messages' | 'config'>): Promise<void> {
  if (!tokenizer) return;
  const { preflightTemplate } = await import('../tokenize/bounded_node.ts');
  try {
    await preflightTemplate(tokenizer, batch.messages, batch.config?.chat_template_kwargs);
  } catch (e) {
    // "the chat template did not finish …" alone does not say whose template: name the folder.
    if ((e as Error).name === 'TemplateError') throw new CliError(`--tokenizer ${flag(args, 'tokenizer')}: ${(e as Error).message.split('\n')[0]}`);
    throw e;
  }
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['tokenizer'], switches: ['json'] });
  if (args.positional.length === 0) throw new CliError('usage: grpo-studio doctor BATCH... [--tokenizer DIR] [--json]');
  const model = await modelFlag(args);
  const imported = readBatchFiles(args.positional);
  // The ids the reader inferred travel with the batch's options, as on the page (import_job.ts, inspect.ts).
  const options = doctorOptions(imported.batch, model, imported.inferred);
  // The chat template runs in-thread inside the Doctor: first prove in a bounded worker that it finishes.
  await boundTemplate(args, options.tokenizer, imported.batch);
  const report = diagnose(imported.batch, options);
  const source = args.positional.join(' + ');
  if (args.flags.has('json')) {
    const { format, trainer, unknownKeys, notes } = imported;
    console.log(JSON.stringify({ format, trainer, unknownKeys, notes, findings: report.findings, skipped: report.skipped, counts: report.counts, groups: report.groups }, null, 1));
  } else console.log(formatReport(report, source, imported));
  return report.counts.error > 0 ? 1 : 0;
}
