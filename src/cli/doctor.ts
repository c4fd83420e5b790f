// `grpo-studio doctor BATCH... [--tokenizer DIR] [--json]`: check a batch in any supported format
// (grpo-batch/v1, TRL, verl, OpenRLHF, prime-rl; several files of one step are merged) and print the
// findings grouped by severity, after the detected format and the reader's notes. Exit 1 if any error,
// 0 otherwise; an unreadable file or tokenizer folder is exit 2 with one line (BatchFormatError /
// CliError, mapped in main.ts).
import { CliError, parseArgs, readBatchFiles, tokenizerFlag, tokenizerIds } from './args.ts';
import { diagnose, type DoctorReport, type Finding, type Severity } from '../doctor/index.ts';
import type { ImportResult } from '../io/formats/index.ts';

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

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['tokenizer'], switches: ['json'] });
  if (args.positional.length === 0) throw new CliError('usage: grpo-studio doctor BATCH... [--tokenizer DIR] [--json]');
  const tokenizer = await tokenizerFlag(args);
  const imported = readBatchFiles(args.positional, tokenizerIds(tokenizer));
  // The chat template runs in-thread inside the Doctor: first prove in a bounded worker that it finishes.
  if (tokenizer) {
    const { preflightTemplate } = await import('../tokenize/bounded_node.ts');
    await preflightTemplate(tokenizer, imported.batch.messages, imported.batch.config?.chat_template_kwargs);
  }
  const report = diagnose(imported.batch, { tokenizer });
  const source = args.positional.join(' + ');
  if (args.flags.has('json')) {
    const { format, trainer, unknownKeys, notes } = imported;
    console.log(JSON.stringify({ format, trainer, unknownKeys, notes, findings: report.findings, skipped: report.skipped, counts: report.counts, groups: report.groups }, null, 1));
  } else console.log(formatReport(report, source, imported));
  return report.counts.error > 0 ? 1 : 0;
}
