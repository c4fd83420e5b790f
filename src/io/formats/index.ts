// The import registry: one entry per format a trainer actually produces, detected from the content (no
// flag), each read into the canonical grpo-batch/v1. `readAnyBatch` is what the CLI verbs and the page's
// worker call on a file's bytes; `mergeImports` joins the files of one step (TRL ranks, OpenRLHF
// experiences, prime-rl ranks) into one batch whose group labels make split groups whole again.
// Safetensors dumps: TRL dict, verl DataProto, OpenRLHF Experience. Text: grpo-batch/v1 JSON, prime-rl JSONL.
import { BATCH_FIELDS, BatchFormatError, parseBatch, type GrpoBatch } from '../batch.ts';
import { parseSafeTensors } from '../safetensors.ts';
import { Dump, type ImportOptions, type ImportResult } from './common.ts';
import * as trl from './trl.ts';
import * as verl from './verl.ts';
import * as openrlhf from './openrlhf.ts';
import * as primeRl from './prime-rl.ts';

export type { ImportOptions, ImportResult } from './common.ts';

/** Safetensors formats, tried in order (their key sets do not overlap). */
const DUMP_FORMATS: { id: string; detect(d: Dump): boolean; read(d: Dump, opts: ImportOptions): ImportResult }[] = [
  { id: 'trl', detect: trl.detect, read: trl.read },
  { id: 'verl', detect: verl.detect, read: verl.read },
  { id: 'openrlhf', detect: openrlhf.detect, read: openrlhf.read },
];

/**
 * A safetensors file: a u64 little-endian header length, then a JSON header. Text (JSON, JSONL) never holds a NUL
 * byte and a length under 2^56 always does, so a NUL in the first 8 bytes means "safetensors": a header length past
 * the file or a truncated data section is then reported as such by parseSafeTensors, not as text that is not JSON.
 */
function isSafetensors(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8).includes(0);
}

/**
 * Read any supported batch file. Throws BatchFormatError (one line naming the file, key, row and
 * position) when the file cannot be read; element-level problems are left for the Doctor.
 */
export function readAnyBatch(bytes: Uint8Array, name: string, opts: ImportOptions = {}): ImportResult {
  if (isSafetensors(bytes)) {
    let st;
    try {
      st = parseSafeTensors(bytes, name);
    } catch (e) {
      throw new BatchFormatError((e as Error).message);
    }
    const d = new Dump(st, name);
    const f = DUMP_FORMATS.find((x) => x.detect(d));
    if (!f) throw new BatchFormatError(`${name}: a safetensors file with tensors [${[...st.tensors.keys()].slice(0, 8).join(', ')}] is none of TRL (completion_ids), verl (responses) or OpenRLHF (sequences + action_mask)`);
    return f.read(d, opts);
  }
  const text = new TextDecoder().decode(bytes);
  if (primeRl.detect(text)) return primeRl.read(text, name, opts);
  const batch = parseBatch(text, name);
  return { batch, format: 'grpo-batch', trainer: 'grpo-batch/v1', unknownKeys: Object.keys(batch).filter((k) => !BATCH_FIELDS.has(k)), notes: [] };
}

/**
 * The page's entry (call it in the worker on dropped files): one batch from one or more files of one
 * step, with the detected format / trainer, the unknown keys and the reader's notes to show.
 * `onProgress(done, total, name)` is called before each file and once at the end (done = total); a
 * cancelled import is a terminated worker (each file is one synchronous, linear read).
 */
export function importBatch(
  files: readonly { name: string; bytes: Uint8Array }[],
  opts: ImportOptions = {},
  onProgress?: (done: number, total: number, name: string) => void,
): ImportResult {
  if (files.length === 0) throw new BatchFormatError('no file to import');
  const parts = files.map(({ name, bytes }, i) => {
    onProgress?.(i, files.length, name);
    return { name, result: readAnyBatch(bytes, name, opts) };
  });
  const merged = mergeImports(parts);
  onProgress?.(files.length, files.length, '');
  return merged;
}

/** Row-wise fields concatenated when files are merged; everything else must agree or comes from the first. */
const ROW_FIELDS = ['prompt_ids', 'completion_ids', 'completion_mask', 'tool_mask', 'prompt_mask', 'rewards', 'rewards_per_func', 'advantages', 'per_token_advantages', 'group_ids', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps', 'effective_loss_mask', 'prompt_texts', 'completion_texts'] as const;

/**
 * Join the files of one step into one batch, in the given order (TRL: sorted by rank). Files must be of
 * one format with the same num_generations, pad and EOS ids; an optional field must be in all or none.
 */
export function mergeImports(parts: { name: string; result: ImportResult }[]): ImportResult {
  if (parts.length === 1) return parts[0].result;
  const [head] = parts;
  const rank = (p: (typeof parts)[number]) => (typeof p.result.batch.config?.rank === 'number' ? p.result.batch.config.rank : 0);
  const sorted = head.result.format === 'trl' ? [...parts].sort((a, b) => rank(a) - rank(b)) : parts;
  const first = sorted[0].result.batch;
  for (const { name, result } of sorted) {
    const b = result.batch;
    const clash = result.format !== head.result.format ? `format ${result.format}, ${head.name} is ${head.result.format}`
      : b.num_generations !== first.num_generations ? `num_generations ${b.num_generations}, ${head.name} has ${first.num_generations}`
      : b.pad_token_id !== first.pad_token_id ? `pad_token_id ${b.pad_token_id}, ${head.name} has ${first.pad_token_id}`
      : b.eos_token_ids.join() !== first.eos_token_ids.join() ? `eos_token_ids [${b.eos_token_ids}], ${head.name} has [${first.eos_token_ids}]` : '';
    if (clash) throw new BatchFormatError(`${name}: cannot merge: ${clash}`);
  }
  // Conversations join only when every file has one per sample; per-prompt lists cannot be re-aligned.
  const perSample = sorted.every((p) => p.result.batch.messages?.length === p.result.batch.completion_ids.length);
  const dropped = !perSample && sorted.some((p) => p.result.batch.messages);
  const batch: GrpoBatch = { ...first, messages: perSample ? sorted.flatMap((p) => p.result.batch.messages!) : undefined };
  for (const f of ROW_FIELDS) {
    const have = sorted.filter((p) => p.result.batch[f] !== undefined);
    if (have.length === 0) continue;
    if (have.length !== sorted.length) throw new BatchFormatError(`${sorted.find((p) => p.result.batch[f] === undefined)!.name}: cannot merge: has no "${f}", ${have[0].name} has`);
    (batch as unknown as Record<string, unknown[]>)[f] = sorted.flatMap((p) => p.result.batch[f] as unknown[]);
  }
  if (first.config?.rank !== undefined) batch.config = { ...first.config, rank: sorted.map(rank) };
  return {
    batch,
    format: head.result.format,
    trainer: head.result.trainer,
    unknownKeys: [...new Set(sorted.flatMap((p) => p.result.unknownKeys))],
    notes: [`merged ${sorted.length} files: ${sorted.map((p) => p.name).join(', ')}`, ...(dropped ? ['messages dropped: not one conversation per sample in every file'] : []), ...new Set(sorted.flatMap((p) => p.result.notes.filter((n) => !n.startsWith('rank '))))],
  };
}
