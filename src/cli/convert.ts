// `grpo-studio convert IN... [--out batch.json] [--tokenizer DIR]`: writes grpo-batch/v1 from any
// supported format (TRL dict, verl DataProto, OpenRLHF Experience, prime-rl token export, or
// grpo-batch/v1 itself); several files of one step (TRL ranks, OpenRLHF experiences) become one batch.
// The detected format, the reader's notes and any unknown keys go to stderr, the batch to --out or
// stdout. Nothing is repaired: a mask longer than its ids stays longer, for the Doctor to report; an element
// outside its domain (a mask of 2) is written as read and makes the exit code 1. Pad / EOS ids the reader
// inferred are written as such (inferred_ids), so the converted file's Doctor verdicts are the source's.
import { serializeBatch } from '../io/batch.ts';
import { validateBatch } from '../io/validate.ts';
import { checkOutPath, CliError, flag, parseArgs, readBatchFiles, tokenizerFlag, tokenizerIds, writeOutput } from './args.ts';

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['out', 'tokenizer'] });
  if (args.positional.length === 0) throw new CliError('usage: grpo-studio convert IN... [--out batch.json] [--tokenizer DIR]');
  checkOutPath(flag(args, 'out'));
  const imported = readBatchFiles(args.positional, tokenizerIds(await tokenizerFlag(args)));
  const { batch } = imported;
  const json = serializeBatch({ ...batch, inferred_ids: imported.inferred });
  const out = flag(args, 'out');
  if (out) writeOutput(out, json);
  else process.stdout.write(json);
  // Without group_ids, groups are consecutive blocks of num_generations: a count only when the samples fill whole
  // blocks (the schema error below says why not).
  const B = batch.completion_ids.length;
  const G = batch.num_generations;
  const groups = batch.group_ids ? `${new Set(batch.group_ids).size} group(s) of up to ${G}` : B % G === 0 ? `${B / G} group(s) of ${G}` : `no whole groups of num_generations = ${G}`;
  console.error(`${args.positional.join(' + ')}: ${imported.trainer} (${imported.format}) → grpo-batch/v1, ${B} samples, ${groups}${out ? ` → ${out}` : ''}`);
  for (const n of imported.notes) console.error(`  note: ${n}`);
  if (imported.unknownKeys.length) console.error(`  unknown keys (not read): ${imported.unknownKeys.join(', ')}`);
  // The batch is written as read (nothing repaired); elements outside their domain make it exit 1, as the Doctor.
  const errors = validateBatch(batch).filter((f) => f.severity === 'error');
  if (errors.length) console.error(`  ${errors.length} schema error(s), first: ${errors[0].message} (grpo-studio doctor lists them all)`);
  return errors.length ? 1 : 0;
}
