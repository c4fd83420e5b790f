// `grpo-studio report BATCH [--out report.html] [--tokenizer DIR]`: one self-contained offline HTML
// file with the batch's token grid, the Doctor's findings linked to cells, the settings (the batch's
// config) and nothing fetched from anywhere: attach it to an issue so a maintainer sees the exact tokens.
// With a --tokenizer that fits the batch (src/doctor/tokenizer_fit.ts, as `doctor`) the grid shows decoded
// tokens and the Doctor also runs its tokenizer rules. A batch with both the sampler's and the trainer's
// log-probs (sampling_per_token_logps, old_per_token_logps) gets the train–inference mismatch section, from
// the analysis `grpo-studio mismatch` prints (src/grpo/mismatch/analysis.ts, default options). Writes to
// --out, else to stdout. Exit 0 when written (the findings are in the report; `doctor` is the CI gate);
// 2 for an unreadable batch or tokenizer, or a chat template that overruns its time or memory bound (one line).
import { checkOutPath, CliError, flag, parseArgs, readBatchFiles, writeOutput } from './args.ts';
import { boundTemplate, modelFlag } from './doctor.ts';
import { diagnose, doctorOptions } from '../doctor/index.ts';
import { analyseMismatch, logRatioRows, mismatchInputOf } from '../grpo/mismatch/analysis.ts';
import type { MismatchInput } from '../grpo/mismatch/types.ts';
import type { GrpoBatch } from '../io/batch.ts';
import { InputError } from '../io/validate.ts';
import { renderReport } from '../report/html.ts';

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['out', 'tokenizer'] });
  if (args.positional.length !== 1) throw new CliError('usage: grpo-studio report BATCH [--out report.html] [--tokenizer DIR]');
  const file = args.positional[0];
  checkOutPath(flag(args, 'out'));
  // As `doctor` reads it: any format, a trainer's former names mapped, ids the reader inferred named as such.
  const imported = readBatchFiles([file]);
  const { batch } = imported;
  const options = doctorOptions(batch, await modelFlag(args), imported.inferred);
  const tokenizer = options.tokenizer;
  // The Doctor renders the chat template in-thread: bound it first, as `doctor` does (exit 2, one line).
  await boundTemplate(args, tokenizer, batch);
  const specialIds = tokenizer ? [...tokenizer.special_token_ids] : [];
  const report = diagnose(batch, options);
  const texts = tokenizer ? tokenizer.textsById(batch.prompt_ids, batch.completion_ids) : null;
  const input = batch.sampling_per_token_logps && batch.old_per_token_logps ? mismatchInput(batch, file, specialIds, texts) : null;
  const html = renderReport({
    name: file.split('/').pop() ?? file,
    batch,
    report,
    tokenTexts: texts ? { by_id: texts } : null,
    specialIds,
    heat: batch.old_per_token_logps ? { label: 'old_per_token_logps', rows: batch.old_per_token_logps } : null,
    mismatch: input ? { report: analyseMismatch(input), log_ratio: logRatioRows(input) } : null,
    generator: 'grpo-studio report',
  });
  const out = flag(args, 'out');
  if (out) {
    writeOutput(out, html);
    console.error(`grpo-studio report: wrote ${out} (${(html.length / 1024).toFixed(1)} KiB)`);
  } else process.stdout.write(html);
  // As the Doctor: the report is written either way; error findings in it are exit 1.
  if (report.counts.error) console.error(`grpo-studio report: ${report.counts.error} error finding(s) in the batch (shown in the report)`);
  return report.counts.error ? 1 : 0;
}

/**
 * The mismatch analysis' input, or null with a line on stderr when the sides cannot be compared (a side with
 * other rows than completion_ids): the report is still written, the Doctor's findings show the fault.
 */
function mismatchInput(batch: GrpoBatch, file: string, specialIds: readonly number[], texts: Record<number, string> | null): MismatchInput | null {
  try {
    return mismatchInputOf(batch, { special_ids: new Set(specialIds), tokenText: texts ? (id) => texts[id] ?? String(id) : undefined, source: file });
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    console.error(`grpo-studio report: no mismatch section: ${e.message}`);
    return null;
  }
}
