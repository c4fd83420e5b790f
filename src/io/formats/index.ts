// The import registry: one entry per format a trainer actually produces, detected from the content (no
// flag), each read into the canonical grpo-batch/v1. `readAnyBatch` is what the CLI verbs and the page's
// worker call on a file's bytes; `mergeImports` joins the files of one step (TRL ranks, OpenRLHF
// experiences, prime-rl ranks) into one batch whose group labels make split groups whole again, and whose pad / EOS
// ids are those a file read, or, where every file inferred its own, inferred again over all rows.
// Safetensors dumps: TRL dict, verl DataProto, OpenRLHF Experience. Text: grpo-batch/v1 JSON, prime-rl JSONL,
// NeMo-RL train_data_step{N}.jsonl, slime's rollout dump as JSON. A grpo-batch/v1 file reads as another reader's
// result would: its inferred_ids are ImportResult.inferred, its config in a trainer's own layout is mapped by that
// trainer's reader, so a batch gives the same numbers and Doctor verdicts however it was saved.
import { BATCH_FACT_KEYS, BATCH_FIELDS, BatchFormatError, INFERABLE_IDS, parseBatch, type GrpoBatch, type InferredIds } from '../batch.ts';
import { parseSafeTensors } from '../safetensors.ts';
import { shown } from '../shown.ts';
import { Dump, intOf, isPlainObject, labelsFromKeys, LeafValues, turnEnds, votedEos, type ImportOptions, type ImportResult } from './common.ts';
import * as trl from './trl.ts';
import * as verl from './verl.ts';
import * as openrlhf from './openrlhf.ts';
import * as primeRl from './prime-rl.ts';
import * as nemoRl from './nemo_rl.ts';
import * as slime from './slime.ts';
import { configTable, rowOf, runTable, trainerOfBatch } from '../../grpo/settings/effective.ts';
import { withCurrentNames } from '../../grpo/settings/table.ts';
import type { TrainerId } from '../../grpo/settings/types.ts';
import { TRAINER_TABLES } from '../../grpo/settings/trainers.ts';

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
  if (nemoRl.detect(text)) return nemoRl.read(text, name, opts);
  if (slime.detect(text)) return slime.read(text, name, opts);
  if (primeRl.detect(text)) return primeRl.read(text, name, opts);
  return readGrpoBatch(text, name, opts);
}

/**
 * A grpo-batch/v1 file. Its inferred_ids become ImportResult.inferred (the batch itself does not keep them: one place
 * in memory), except an id the caller's tokenizer gives (convert / doctor --tokenizer), which replaces the guess as it
 * would have in the file's first reader (common.ts tokenIds: a tokenizer's id before an inferred one). Its config is
 * read in the trainer's rows' names (trainerLayout, currentNames).
 */
function readGrpoBatch(text: string, name: string, opts: ImportOptions): ImportResult {
  const { inferred_ids, ...parsed } = parseBatch(text, name);
  const notes: string[] = [];
  const ids = tokenizerOverInferred(parsed, inferred_ids, opts, notes);
  groupSizeAgrees(ids.batch, name);
  const batch = currentNames(trainerLayout(ids.batch, name, notes), name, notes);
  return { batch, format: 'grpo-batch', trainer: 'grpo-batch/v1', unknownKeys: [...Object.keys(batch).filter((k) => !BATCH_FIELDS.has(k)), ...settingsNotRead(batch)], notes, inferred: ids.inferred };
}

/**
 * The group size a grpo-batch file's config gives in its trainer's names (TRL num_generations, verl rollout_n or
 * actor_rollout_ref.rollout.n, OpenRLHF n_samples_per_prompt, flat or nested) must be the file's num_generations, which
 * forms the groups: two sizes are one line naming both, as the dump readers refuse them, never one silently kept.
 */
function groupSizeAgrees(batch: GrpoBatch, name: string): void {
  const c = batch.config ?? {};
  const sub = (o: unknown, k: string): unknown => (isPlainObject(o) ? o[k] : undefined);
  const places: Record<TrainerId, [string, unknown][]> = {
    trl: [['config.num_generations', c.num_generations]],
    verl: [['config.rollout_n', c.rollout_n], ['config["actor_rollout_ref.rollout.n"]', c['actor_rollout_ref.rollout.n']], ['config.actor_rollout_ref.rollout.n', sub(sub(c.actor_rollout_ref, 'rollout'), 'n')]],
    openrlhf: [...openrlhf.GROUP_KEYS].flatMap((k): [string, unknown][] => [[`config["${k}"]`, c[k]], ...(k.includes('.') ? [[`config.${k}`, sub(c[k.slice(0, k.indexOf('.'))], k.slice(k.indexOf('.') + 1))] as [string, unknown]] : [])]),
  };
  const leaves = new LeafValues(new ConfigOfFile(name));
  leaves.set('num_generations', 'num_generations', batch.num_generations);
  for (const [where, v] of places[trainerOfBatch(batch)]) if (v !== undefined && v !== null) leaves.set('num_generations', where, intOf(v) ?? v);
}

/**
 * `config.` / `run.` keys of a batch that no settings row of its trainer reads and that describe nothing the studio
 * reads either (BATCH_FACT_KEYS): a misspelt setting ("epsilom") is kept as written and listed, never taken silently
 * for the default it leaves in place.
 */
function settingsNotRead(batch: GrpoBatch): string[] {
  const t = trainerOfBatch(batch);
  const known = (k: string) => rowOf(t, 'config', k) !== undefined || rowOf(t, 'run', k) !== undefined;
  return (['config', 'run'] as const).flatMap((where) => Object.keys(batch[where] ?? {}).filter((k) => !known(k) && !BATCH_FACT_KEYS.has(k)).map((k) => `${where}.${k}`));
}

/** The file's inferred ids, each one the caller's tokenizer gives replaced by the tokenizer's (and no longer inferred). */
function tokenizerOverInferred(batch: GrpoBatch, inferred: InferredIds | undefined, opts: ImportOptions, notes: string[]): { batch: GrpoBatch; inferred?: InferredIds } {
  if (!inferred) return { batch };
  const out = { ...batch };
  const left = { ...inferred };
  const given: Partial<Pick<GrpoBatch, (typeof INFERABLE_IDS)[number]>> = { pad_token_id: opts.pad_token_id, eos_token_ids: opts.eos_token_ids };
  for (const f of INFERABLE_IDS) {
    const v = given[f];
    if (v === undefined || !left[f]) continue;
    if (!same(v, out[f])) notes.push(`${f}: the file's ${shown(out[f])} was ${left[f]}; the tokenizer's ${shown(v)} is used`);
    Object.assign(out, { [f]: v });
    delete left[f];
  }
  return { batch: out, inferred: Object.keys(left).length ? left : undefined };
}

/**
 * A Dump standing for a grpo-batch/v1 file, for the trainer readers' settings functions, whose errors name a dump's
 * config as "__metadata__ config…": in this file the config is the top-level `config` field, so that word is dropped.
 */
class ConfigOfFile extends Dump {
  constructor(file: string) {
    super({ metadata: {}, tensors: new Map(), data: new Uint8Array(0) }, file);
  }

  override fail(message: string): never {
    throw new BatchFormatError(`${this.file}: ${message.replace(/^__metadata__ /, '')}`);
  }
}

/** OpenRLHF's own rows (config and run), not the studio's it shares its config with. */
const OPENRLHF_OWN: ReadonlySet<string> = new Set([...TRAINER_TABLES.openrlhf.config, ...TRAINER_TABLES.openrlhf.run].map((s) => s.name));
/** The groups OpenRLHF's args nest under (the first part of its dotted dests: actor, algo, rollout, train, …). */
const OPENRLHF_ROOTS: ReadonlySet<string> = new Set([...OPENRLHF_OWN].filter((n) => n.includes('.')).map((n) => n.slice(0, n.indexOf('.'))));

/**
 * A config holding a trainer's settings in the trainer's own layout rather than its rows' names. verl's nested or
 * dotted paths ("actor_rollout_ref": {"rollout": {"temperature": 0.7}}, "actor_rollout_ref.rollout.temperature") are
 * read by the verl reader's own function (verl.ts settingsOfConfig) with the keys that are rows, so the forms must
 * agree (else one line naming both); keys outside verl's layout and its rows are kept as written. OpenRLHF's args
 * nested as hierarchize holds them ({"rollout": {"temperature": 0.7}}) are read by the OpenRLHF reader's function
 * (openrlhf.ts openrlhfSettings) with its own rows' flat dests, the same way: read as written they would be
 * ignored — a step at another temperature than the file's.
 */
function trainerLayout(batch: GrpoBatch, name: string, notes: string[]): GrpoBatch {
  const config = batch.config;
  if (!config) return batch;
  const trainer = trainerOfBatch(batch);
  const isRow = (k: string) => rowOf(trainer, 'config', k) !== undefined || rowOf(trainer, 'run', k) !== undefined;
  if (trainer === 'verl') {
    if (!Object.keys(config).some(verl.layoutKey)) return batch;
    // Objects and dotted keys that are neither rows nor verl's layout (chat_template_kwargs) stay as written: the
    // reader would walk them as driver config it does not read. Every other key goes through it, so a flat key
    // (rollout_n) and its path in the layout (actor_rollout_ref.rollout.n) are checked against each other.
    const aside = ([k, v]: [string, unknown]) => !isRow(k) && !verl.layoutKey(k) && (isPlainObject(v) || k.includes('.'));
    const own = Object.fromEntries(Object.entries(config).filter((e) => !aside(e)));
    const kept = Object.fromEntries(Object.entries(config).filter(aside));
    return { ...batch, config: { ...kept, ...verl.settingsOfConfig(new ConfigOfFile(name), own, notes) } };
  }
  if (trainer === 'openrlhf') {
    // Objects under another key (chat_template_kwargs, which the Doctor reads) stay as written, as beside verl.
    const nested = ([k, v]: [string, unknown]) => isPlainObject(v) && !isRow(k) && OPENRLHF_ROOTS.has(k);
    if (!Object.entries(config).some(nested)) return batch;
    // OpenRLHF's args nested as the trainer holds them go through its reader with its own rows' flat dests, so a dest
    // and its nested path are checked against each other. The studio's rows stay as written (advantage_estimator is
    // also OpenRLHF's name before ed62d0e2, which the reader would take as algo.advantage.estimator).
    const through = ([k, v]: [string, unknown]) => nested([k, v]) || OPENRLHF_OWN.has(k);
    const own = Object.fromEntries(Object.entries(config).filter(through));
    const kept = Object.fromEntries(Object.entries(config).filter((e) => !through(e)));
    return { ...batch, config: { ...kept, ...openrlhf.openrlhfSettings(new ConfigOfFile(name), own, notes) } };
  }
  return batch;
}

/**
 * A grpo-batch/v1 file's config under a trainer's former names (SettingSpec.formerly: OpenRLHF's flat args before
 * ed62d0e2, `init_kl_coef`) read as today's rows, with a note, as its importer reads a dump; both names with
 * different values is a BatchFormatError naming the file.
 */
function currentNames(batch: GrpoBatch, name: string, notes: string[]): GrpoBatch {
  if (!batch.config) return batch;
  let r: ReturnType<typeof withCurrentNames>;
  try {
    r = withCurrentNames(configTable(trainerOfBatch(batch)), batch.config);
  } catch (e) {
    throw new BatchFormatError(`${name}: ${(e as Error).message}`);
  }
  if (r.renamed.length === 0) return batch;
  notes.push(`config: ${r.renamed.length} setting(s) under their former names, read as today's (${r.renamed.map(([was, now]) => `${was} → ${now}`).join(', ')})`);
  // OpenRLHF's former names are its code before ed62d0e2, whose loss differs in places: kept as openrlhf_code.
  if (trainerOfBatch(batch) === 'openrlhf') {
    return { ...batch, config: openrlhf.markedFormerNames(r.values, batch.config, r.renamed, (m) => { throw new BatchFormatError(`${name}: ${m}`); }) };
  }
  return { ...batch, config: r.values };
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
 * A file without tool_mask has no tool token (the readers leave it out when no row has one): all 1, as common.ts
 * toolMasks fills such a row, so a rank file with multi-turn rows merges with one without.
 */
const noToolTokens = (b: GrpoBatch): number[][] => b.completion_mask.map((m) => m.map(() => 1));

/** Batch fields the files of one step share: the group size, the trainer, the reward weights. */
const SHARED_FIELDS = ['num_generations', 'trainer', 'reward_weights'] as const;

/** Settings rows that belong to one file, not to the step: TRL's rank (each file is one process's slice). */
const PER_FILE: ReadonlySet<string> = new Set(['rank']);

/**
 * The settings the files must agree on: every row of the trainer's tables (src/grpo/settings/effective.ts
 * runTable: num_processes, gradient_accumulation_steps, num_items_in_batch, global_step, max_steps, …; and
 * configTable), looked up in both `config` and `run` (the importers put run context in config, as TRL's args do).
 */
function sharedSettings(trainer: TrainerId): string[] {
  return [...new Set([...runTable(trainer), ...configTable(trainer)].map((s) => s.name))].filter((k) => !PER_FILE.has(k));
}

/** One value, the same in two files (numbers by value, NaN equal to NaN; lists and objects by content). */
function same(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Join the files of one step into one batch, in the given order (TRL: sorted by rank). Nothing is taken from
 * the first file on trust: the files must be of one format and agree on every run-context and config field
 * either carries (SHARED_FIELDS and the trainer's table rows, a field absent in one and present in another
 * included), else a BatchFormatError names both files and both values; an optional row field must be in all
 * or none. TRL ranks must be distinct with the same number of rows (process_slice), a subset of
 * 0 … num_processes − 1 (the missing ones named in a note); sample positions a format records (OpenRLHF
 * `index`) must not be claimed by two files (their groups would mix prompts).
 */
export function mergeImports(parts: { name: string; result: ImportResult }[]): ImportResult {
  if (parts.length === 1) return parts[0].result;
  const [head] = parts;
  const rank = (p: (typeof parts)[number]) => (typeof p.result.batch.config?.rank === 'number' ? p.result.batch.config.rank : 0);
  const sorted = head.result.format === 'trl' ? [...parts].sort((a, b) => rank(a) - rank(b)) : parts;
  const ref = sorted[0];
  const first = ref.result.batch;
  const fail = (name: string, clash: string): never => {
    throw new BatchFormatError(`${name}: cannot merge: ${clash}`);
  };
  for (const p of sorted) {
    if (p.result.format !== ref.result.format) fail(p.name, `format ${p.result.format}, ${ref.name} is ${ref.result.format}`);
  }
  const settings = sharedSettings(trainerOfBatch(first));
  for (const { name, result } of sorted.slice(1)) {
    const b = result.batch;
    for (const f of SHARED_FIELDS) if (!same(b[f], first[f])) fail(name, `${f} ${shown(b[f])}, ${ref.name} has ${shown(first[f])}`);
    // The special ids (INFERABLE_IDS) are shared too, but only where a file read them (its carriers, or the tokenizer
    // given): one a reader inferred (prime-rl's vote over its own rows) is a guess, never a reason to refuse; mergedIds settles them.
    for (const f of INFERABLE_IDS) {
      const read = sorted.find((p) => !p.result.inferred?.[f]);
      if (read && read.result !== result && !result.inferred?.[f] && !same(b[f], read.result.batch[f])) fail(name, `${f} ${shown(b[f])}, ${read.name} has ${shown(read.result.batch[f])}`);
    }
    for (const where of ['config', 'run'] as const) {
      for (const k of settings) {
        const [mine, theirs] = [b[where]?.[k], first[where]?.[k]];
        if (!same(mine, theirs)) fail(name, `${where}.${k} ${shown(mine)}, ${ref.name} has ${shown(theirs)}`);
      }
    }
  }
  const notes: string[] = [];
  if (ref.result.format === 'trl') notes.push(...trlRanks(sorted, rank));
  // Sample positions (OpenRLHF index): a position claimed twice would put two prompts' samples in one group.
  const owner = new Map<number, string>();
  for (const { name, result } of sorted) {
    result.positions?.forEach((pos, row) => {
      const other = owner.get(pos);
      if (other !== undefined) fail(name, `sample position ${pos} (row ${row}) is also in ${other}: two files claim one sample, so their groups would mix prompts`);
      owner.set(pos, name);
    });
  }
  // Conversations join only when every file has one per sample; per-prompt lists cannot be re-aligned.
  const perSample = sorted.every((p) => p.result.batch.messages?.length === p.result.batch.completion_ids.length);
  const dropped = !perSample && sorted.some((p) => p.result.batch.messages);
  const batch: GrpoBatch = { ...first, messages: perSample ? sorted.flatMap((p) => p.result.batch.messages!) : undefined };
  for (const f of ROW_FIELDS) {
    const have = sorted.filter((p) => p.result.batch[f] !== undefined);
    if (have.length === 0) continue;
    const fill = f === 'tool_mask' ? noToolTokens : undefined;
    if (have.length !== sorted.length && !fill) throw new BatchFormatError(`${sorted.find((p) => p.result.batch[f] === undefined)!.name}: cannot merge: has no "${f}", ${have[0].name} has`);
    (batch as unknown as Record<string, unknown[]>)[f] = sorted.flatMap((p) => (p.result.batch[f] ?? fill!(p.result.batch)) as unknown[]);
  }
  if (first.config?.rank !== undefined) batch.config = { ...first.config, rank: sorted.map(rank) };
  // File-local group labels (verl's uid → 0, 1, … in each file) are relabelled from the trainer's own keys.
  const group_keys = sorted.every((p) => p.result.group_keys) ? sorted.flatMap((p) => p.result.group_keys!) : undefined;
  if (group_keys) batch.group_ids = labelsFromKeys(group_keys);
  const positions = sorted.every((p) => p.result.positions) ? sorted.flatMap((p) => p.result.positions!) : undefined;
  const ids = mergedIds(sorted, batch, notes);
  Object.assign(batch, { pad_token_id: ids.pad_token_id, eos_token_ids: ids.eos_token_ids });
  return {
    batch,
    format: ref.result.format,
    trainer: ref.result.trainer,
    unknownKeys: [...new Set(sorted.flatMap((p) => p.result.unknownKeys))],
    inferred: ids.inferred,
    notes: [`merged ${sorted.length} files: ${sorted.map((p) => p.name).join(', ')}`, ...notes, ...(dropped ? ['messages dropped: not one conversation per sample in every file'] : []), ...new Set(sorted.flatMap((p) => p.result.notes.filter((n) => !n.startsWith('rank '))))],
    ...(positions ? { positions } : {}),
    ...(group_keys ? { group_keys } : {}),
  };
}

/**
 * The merged batch's pad / EOS ids (INFERABLE_IDS). An id some file read (they agree: mergeImports checked) is the
 * step's, for the files that inferred theirs too (one step, one tokenizer). An id every file inferred stays as
 * inferred where they agree; where they differ it is inferred again over the merged rows as common.ts tokenIds
 * infers it from one file's: EOS = the most common last trained token of every trained span
 * (completion_mask · tool_mask), pad = the EOS id standing in (the files' pads are several ids, so none is the pad).
 */
function mergedIds(sorted: { name: string; result: ImportResult }[], batch: GrpoBatch, notes: string[]): { pad_token_id: number; eos_token_ids: number[]; inferred?: ImportResult['inferred'] } {
  const inferred: NonNullable<ImportResult['inferred']> = {};
  const settle = <F extends (typeof INFERABLE_IDS)[number]>(f: F, again: () => { value: GrpoBatch[F]; why: string }): GrpoBatch[F] => {
    const read = sorted.find((p) => !p.result.inferred?.[f]);
    const guesses = sorted.filter((p) => p.result.inferred?.[f]);
    if (read) {
      const off = guesses.filter((p) => !same(p.result.batch[f], read.result.batch[f]));
      if (off.length) notes.push(`${f}: ${off.map((p) => `${p.name} inferred ${shown(p.result.batch[f])}`).join(', ')}; ${read.name} reads ${shown(read.result.batch[f])}: that is kept for all`);
      return read.result.batch[f];
    }
    if (guesses.every((p) => same(p.result.batch[f], guesses[0].result.batch[f]))) {
      const whys = [...new Set(guesses.map((p) => p.result.inferred![f]!))];
      inferred[f] = whys.length === 1 ? whys[0] : `${whys[0]} in ${guesses[0].name}, and the same id in the other files`;
      return guesses[0].result.batch[f];
    }
    const { value, why } = again();
    inferred[f] = why;
    notes.push(`${f}: the files inferred different ids (${guesses.map((p) => `${p.name}: ${shown(p.result.batch[f])}`).join(', ')}); ${shown(value)}, ${why}`);
    return value;
  };
  const eos_token_ids = settle('eos_token_ids', () => {
    const ends: number[] = [];
    batch.completion_ids.forEach((ids, b) => turnEnds(ids, batch.completion_mask[b].map((m, t) => m * (batch.tool_mask?.[b]?.[t] ?? 1)), ends));
    const { id, n } = votedEos(ends);
    return { value: [id], why: `inferred from the last trained token of ${n} of ${ends.length} trained spans of the ${sorted.length} merged files` };
  });
  const pad_token_id = settle('pad_token_id', () => ({ value: eos_token_ids[0], why: 'inferred as the EOS id, the files\' own pad inferences differing' }));
  return { pad_token_id, eos_token_ids, inferred: Object.keys(inferred).length ? inferred : undefined };
}

/**
 * TRL rank files (sorted by rank): distinct ranks, each with the same number of rows (process_slice gives every
 * process B rows, and the reader's group labels assume it). A subset of the num_processes ranks is allowed: the
 * note names the missing ones.
 */
function trlRanks(sorted: { name: string; result: ImportResult }[], rank: (p: { name: string; result: ImportResult }) => number): string[] {
  const ref = sorted[0];
  const B = ref.result.batch.completion_ids.length;
  const seen = new Map<number, string>();
  for (const p of sorted) {
    const r = rank(p);
    const other = seen.get(r);
    if (other !== undefined) throw new BatchFormatError(`${p.name}: cannot merge: rank ${r}, ${other} is rank ${r} too (one file per process)`);
    seen.set(r, p.name);
    const n = p.result.batch.completion_ids.length;
    if (n !== B) throw new BatchFormatError(`${p.name}: cannot merge: rank ${r} has ${n} rows, ${ref.name} (rank ${rank(ref)}) has ${B} (TRL's process_slice gives every process the same number of rows)`);
  }
  const P = typeof ref.result.batch.config?.num_processes === 'number' ? ref.result.batch.config.num_processes : seen.size;
  const missing = Array.from({ length: P }, (_, r) => r).filter((r) => !seen.has(r));
  const held = [...seen.keys()];
  if (missing.length === 0) return [];
  return [`ranks ${held.join(', ')} of ${P}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} missing (global samples ${missing.map((r) => `${r * B}…${r * B + B - 1}`).join(', ')} are not here; groups they cut stay partial)`];
}
