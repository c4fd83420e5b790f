// Shared pieces of the trainer readers (src/io/formats/*.ts): typed access to a safetensors dump that
// names the file and key in every error, rows of a padded (B, T) tensor as plain number rows, the
// split of a trainer's single loss mask into completion_mask and tool_mask, group labels, and the
// pad / EOS ids a dump may lack. Everything is linear in the tensor size: one typed-array view per
// tensor, one Array.from per row, no per-element objects.
import { BatchFormatError, parsePythonJson, type GrpoBatch, type InferredIds } from '../batch.ts';
import { elementAt, INT32_RANGE, isTokenId, shapeOf, TOKEN_ID_RANGE, toF32, toF64, toI32, wholeNumbers, type SafeTensors } from '../safetensors.ts';
import { shown } from '../shown.ts';

/** What a reader returns: the canonical batch plus what the page and `convert` tell the user. */
export interface ImportResult {
  batch: GrpoBatch;
  /** Detected format id ('trl', 'verl', 'openrlhf', 'prime-rl', 'grpo-batch'). */
  format: string;
  /** The trainer, in words ("TRL GRPOTrainer", ...). */
  trainer: string;
  /** Keys the reader does not know: listed, never silently dropped. */
  unknownKeys: string[];
  /** What the reader inferred, assumed or read but did not map. */
  notes: string[];
  /**
   * Each row's sample position in the step's rollout batch, where the format records one (OpenRLHF `index`):
   * mergeImports refuses two files that claim one position.
   */
  positions?: number[];
  /**
   * Each row's group key as the trainer names it (verl's uid), where the batch's group_ids are labels local to
   * this file: mergeImports labels the merged rows from the keys, so one uid is one group across files and two
   * files' first groups do not become one.
   */
  group_keys?: unknown[];
  /**
   * The pad / EOS ids the reader inferred rather than read (from the dump's carriers or the caller's tokenizer),
   * each with what it was inferred from ("inferred from …"): handed to the Doctor (doctorOptions), whose findings
   * that rest on an inferred id are warnings naming it, never errors.
   */
  inferred?: InferredIds;
}

/** Ids a dump may not carry (prime-rl, verl): from a tokenizer when the caller has one. */
export interface ImportOptions {
  pad_token_id?: number;
  eos_token_ids?: number[];
}

/** A 2-D tensor as one flat typed array. Integer tensors are Int32Array, floating ones Float32/64. */
export interface Tensor2D<A extends Int32Array | Float32Array | Float64Array> {
  key: string;
  rows: number;
  cols: number;
  data: A; // (rows, cols)
}

/** A safetensors dump with errors that name the file and key. */
export class Dump {
  constructor(readonly st: SafeTensors, readonly file: string) {}

  /** Each metadata entry parsed once (rewards, prompts and configs can be large, and several readers ask for one key). */
  private readonly parses = new Map<string, { value: unknown } | { error: string }>();

  has(key: string): boolean {
    return this.st.tensors.has(key);
  }

  fail(message: string): never {
    throw new BatchFormatError(`${this.file}: ${message}`);
  }

  shape(key: string): number[] {
    return shapeOf(this.st, key);
  }

  /**
   * A whole-number tensor of rank 2 (ids, or a mask when the key names one) as Int32, read exactly or refused
   * (wholeData), with its dimensions.
   */
  ints(key: string, kind: 'ids' | 'mask' = /mask/i.test(key) ? 'mask' : 'ids'): Tensor2D<Int32Array> {
    const [rows, cols] = this.dims(key, 2);
    return { key, rows, cols, data: this.wholeData(key, kind) };
  }

  /**
   * A whole-number tensor of any shape (ids, masks) as Int32, read exactly or refused: the one rule of every reader
   * and of the CLI's loss / advantage cases. Any integer dtype as stored (I64 from all 64 bits); a float, BF16 or F16
   * one (a hook's cast) only when every value is an exact integer the dtype holds without rounding (below 2^24 / 2^8
   * / 2^11; F64 below 2^53). Ids must lie in [0, 2^31), masks in int32. The first value that fails is one line
   * naming the file, the tensor, the element (sample and position for rank 1 and 2), the value and the dtype —
   * never an id silently wrapped, rounded or cast.
   */
  wholeData(key: string, kind: 'ids' | 'mask'): Int32Array {
    const { dtype, shape } = this.st.tensors.get(key)!;
    return wholeNumbers(this.st, key, kind === 'ids' ? TOKEN_ID_RANGE : INT32_RANGE, (i, value, why) => {
      const where = shape.length === 1 ? ` (sample ${i})` : shape.length === 2 ? ` (sample ${Math.floor(i / shape[1])}, position ${i % shape[1]})` : '';
      this.fail(`${key}${elementAt(shape, i)}${where} = ${value} (dtype ${dtype}) ${why}`);
    });
  }

  /** A floating tensor of rank 1 or 2 (F64 kept exact, others as f32). */
  floats(key: string, rank: 1 | 2 = 2): Tensor2D<Float32Array | Float64Array> {
    const [rows, cols] = this.dims(key, rank);
    return { key, rows, cols, data: this.floatData(key) };
  }

  /** A floating tensor of any shape (F64 kept exact, F32 / BF16 / F16 as f32); an integer dtype is refused, naming it. */
  floatData(key: string): Float32Array | Float64Array {
    const { dtype } = this.st.tensors.get(key)!;
    if (!['F32', 'F64', 'BF16', 'F16'].includes(dtype)) this.fail(`${key} has dtype ${dtype}, expected a floating tensor`);
    return dtype === 'F64' ? toF64(this.st, key) : toF32(this.st, key);
  }

  /** The first element of a tensor of any shape and dtype (0-d counters such as num_items_in_batch). */
  scalar(key: string): number {
    const info = this.st.tensors.get(key);
    if (!info || info.shape.reduce((a, b) => a * b, 1) === 0) this.fail(`${key} is missing or empty`);
    if (['F32', 'F64', 'BF16', 'F16'].includes(info.dtype)) return toF64(this.st, key)[0];
    try {
      return toI32(this.st, key)[0];
    } catch (e) {
      return this.fail((e as Error).message);
    }
  }

  /** [rows, cols] of a tensor of the given rank (rank 1: cols = 1). */
  dims(key: string, rank: 1 | 2): [number, number] {
    if (!this.has(key)) this.fail(`missing tensor "${key}"`);
    const s = this.shape(key);
    if (s.length !== rank) this.fail(`${key} has shape [${s.join(', ')}], expected ${rank === 1 ? '(B)' : '(B, T)'}`);
    return [s[0], rank === 2 ? s[1] : 1];
  }

  /** Every per-row tensor must have the same number of rows: samples are matched by row. */
  sameRows(keys: string[], B: number, against: string): void {
    for (const k of keys) if (this.has(k) && this.shape(k)[0] !== B) this.fail(`${k} has ${this.shape(k)[0]} rows, ${against} has ${B}`);
  }

  /**
   * A metadata entry parsed as JSON in the dialect Python's json.dumps writes (NaN, Infinity, -Infinity as bare
   * words: TRL's rewards_per_func holds NaN where a reward function returned None), exactly as the grpo-batch
   * reader parses a file (parsePythonJson), or undefined. A value that is no JSON even so stays the string it is
   * (a plain string such as "pt"); a reader that needs a list or an object refuses it with the parser's reason
   * (metaList, metaObject).
   */
  meta(key: string): unknown {
    const p = this.parsed(key);
    return p && 'value' in p ? p.value : this.st.metadata[key];
  }

  /** The JSON list stored under a metadata key, or undefined when absent. */
  metaList(key: string): unknown[] | undefined {
    const v = this.meta(key);
    if (v === undefined || Array.isArray(v)) return v;
    return this.notA(key, 'a JSON list');
  }

  private parsed(key: string): { value: unknown } | { error: string } | undefined {
    const text = this.st.metadata[key];
    if (text === undefined) return undefined;
    let p = this.parses.get(key);
    if (!p) {
      const source = `__metadata__ "${key}"`;
      try {
        p = { value: parsePythonJson(text, source) };
      } catch (e) {
        // parsePythonJson names its own refusals (nesting too deep) after `source`; JSON.parse's are syntax errors.
        const m = (e as Error).message.split('\n')[0];
        p = { error: e instanceof BatchFormatError ? m.slice(source.length + 2) : `not valid JSON, even as Python's json writes it (${m})` };
      }
      this.parses.set(key, p);
    }
    return p;
  }

  /** Refuses the metadata value at `key` as not `what`, with the parser's reason when it is no JSON at all. */
  private notA(key: string, what: string): never {
    const p = this.parsed(key);
    return this.fail(`__metadata__ "${key}" must be ${what}${p && 'error' in p ? `: ${p.error}` : ''}`);
  }

  /** What the trainer logged for the step, from a "metrics" JSON object in the metadata (numbers only). */
  metrics(): Record<string, number> | undefined {
    const m = Object.entries(this.metaObject('metrics')).filter(([, v]) => typeof v === 'number');
    return m.length ? (Object.fromEntries(m) as Record<string, number>) : undefined;
  }

  /** The JSON object stored under a metadata key (e.g. "config"), {} when absent. */
  metaObject(key: string): Record<string, unknown> {
    const v = this.meta(key);
    if (v === undefined) return {};
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.notA(key, 'a JSON object');
    return v as Record<string, unknown>;
  }
}

/** Row b of a (rows, cols) tensor, columns [lo, hi), as numbers. */
export function row(t: Tensor2D<Int32Array | Float32Array | Float64Array>, b: number, lo = 0, hi = t.cols): number[] {
  return Array.from(t.data.subarray(b * t.cols + lo, b * t.cols + hi));
}

/** Every row of a tensor. */
export function rows(t: Tensor2D<Int32Array | Float32Array | Float64Array>): number[][] {
  const out = new Array<number[]>(t.rows);
  for (let b = 0; b < t.rows; b++) out[b] = row(t, b);
  return out;
}

/**
 * A trainer's single loss mask over a completion → TRL's pair, from what the trainer's forward attends:
 * `attended(t)` (verl's and OpenRLHF's attention_mask over the response; every token of an unpadded row — prime-rl,
 * NeMo-RL within input_lengths, slime). completion_mask is 1 on attended tokens (the mask's own value where it
 * trains), tool_mask 0 on attended tokens it does not train (tool / environment output, also a tool result that
 * ends the row: the rollout stopped after it) and 1 elsewhere, as TRL pads it. So completion_mask · tool_mask is the
 * trainer's mask exactly and an attended, untrained token is never mistaken for text after the EOS. Without an
 * attention record, `attended` is "up to the last trained token" (the interior zeros only). A trained token outside
 * `attended` stays in completion_mask (the caller refuses it where the format says it cannot be). No attended,
 * untrained token, or no trained token at all: the mask as is, no tool_mask. Lengths are the mask's, so a mask longer or shorter than its ids
 * stays so.
 */
export function splitLossMask(mask: number[], attended: (t: number) => boolean = (t) => t >= mask.indexOf(1) && t <= mask.lastIndexOf(1)): { completion_mask: number[]; tool_mask?: number[] } {
  // A row that trains nothing has no assistant turn for a tool result to follow: kept as is, completion_mask 0, as
  // TRL writes a row it drops whole (mask_truncated_completions) and slime's remove_sample zeroes it.
  if (!mask.some((m) => m !== 0)) return { completion_mask: mask };
  const tool = mask.map((m, t) => (m === 0 && attended(t) ? 0 : 1));
  if (!tool.includes(0)) return { completion_mask: mask };
  return { completion_mask: mask.map((m, t) => (m !== 0 ? m : tool[t] === 0 ? 1 : 0)), tool_mask: tool };
}

/** Per-row tool masks where some rows have none: rows without tool tokens get all 1. */
export function toolMasks(split: { completion_mask: number[]; tool_mask?: number[] }[]): number[][] | undefined {
  if (!split.some((s) => s.tool_mask)) return undefined;
  return split.map((s) => s.tool_mask ?? s.completion_mask.map(() => 1));
}

/**
 * The rows of an unpadded prompt + completion dump (prime-rl, slime, NeMo-RL): row b's first `P[b]` tokens are its
 * prompt, the rest its completion, and `loss[b]` (the trainer's loss mask over that completion) is split into
 * completion_mask and tool_mask by splitLossMask over the tokens the trainer's forward sees: all of them, or the
 * first `real[b]` of the row where the dump records a real length (NeMo-RL's input_lengths; the rest is pad). A
 * mask whose length is not its completion's is split by its interior zeros only: which of its positions the
 * trainer attends is unknown, and the Doctor names the length (mask-length-mismatch).
 */
export function completionRows(tokens: readonly number[][], P: readonly number[], loss: readonly number[][], real?: readonly number[]): { prompt_ids: number[][]; completion_ids: number[][]; completion_mask: number[][]; tool_mask: number[][] | undefined } {
  const split = loss.map((m, b) => (m.length === tokens[b].length - P[b] ? splitLossMask(m, (t) => P[b] + t < (real?.[b] ?? tokens[b].length)) : splitLossMask(m)));
  return {
    prompt_ids: tokens.map((ids, b) => ids.slice(0, P[b])),
    completion_ids: tokens.map((ids, b) => ids.slice(P[b])),
    completion_mask: split.map((s) => s.completion_mask),
    tool_mask: toolMasks(split),
  };
}

/**
 * Scalar advantages from per-token ones when every row is constant over its loss mask (GRPO's outcome
 * advantage broadcast over tokens, as verl and OpenRLHF store it); undefined when some row varies.
 */
export function scalarAdvantages(perToken: number[][], lossMask: number[][]): number[] | undefined {
  const out: number[] = [];
  for (let b = 0; b < perToken.length; b++) {
    let v: number | undefined;
    const m = lossMask[b] ?? [];
    for (let t = 0; t < perToken[b].length; t++) {
      if (m[t] !== 1) continue;
      if (v === undefined) v = perToken[b][t];
      else if (perToken[b][t] !== v) return undefined;
    }
    out.push(v ?? 0);
  }
  return out;
}

/** Group labels from arbitrary keys (verl uids): 0, 1, ... in order of first appearance. */
export function labelsFromKeys(keys: readonly unknown[]): number[] {
  const at = new Map<string, number>();
  return keys.map((k) => {
    const s = String(k);
    if (!at.has(s)) at.set(s, at.size);
    return at.get(s)!;
  });
}

/** The size of the largest group. */
export function largestGroup(labels: readonly number[]): number {
  const n = new Map<number, number>();
  let max = 0;
  for (const g of labels) max = Math.max(max, n.set(g, (n.get(g) ?? 0) + 1).get(g)!);
  return max;
}

/** An integer from metadata / config (numbers or numeric strings), else undefined. */
export function intOf(v: unknown): number | undefined {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) ? n : undefined;
}

/** EOS ids given as an int, a list or a numeric string. */
export function idListOf(v: unknown): number[] | undefined {
  if (Array.isArray(v)) return v.every((x) => Number.isInteger(x)) ? (v as number[]) : undefined;
  const n = intOf(v);
  return n === undefined ? undefined : [n];
}

/** A carrier's "no id": absent, JSON null, or Python's str(None) / "" as a hook's str() writes it. */
const noId = (v: unknown): boolean => v === undefined || v === null || (typeof v === 'string' && /^\s*(none|null)?\s*$/i.test(v));

/**
 * A pad / EOS id read from the place `where` names (a metadata key, a path inside a metadata object): an integer in
 * [0, 2^31), given as a number or a numeric string, or an EOS list of them; undefined when the carrier holds none
 * (absent, null, "None"). Anything else — 2^32, −1, 1.5, true, "abc", a list with such an entry — is one line naming
 * the key and the value: an id is never wrapped, rounded or dropped on the way to the Doctor.
 */
export function idsAt(d: { fail(message: string): never }, where: string, v: unknown, list: boolean): number[] | undefined {
  if (noId(v)) return undefined;
  const items = Array.isArray(v) && list ? v : [v];
  if (items.length === 0) d.fail(`__metadata__ ${where} = [] holds no token id`);
  return items.map((x) => {
    const n = typeof x === 'string' && /^\s*\d+\s*$/.test(x) ? Number(x) : x;
    if (!isTokenId(n)) d.fail(`__metadata__ ${where} = ${shown(v)} is not a token id (an integer in [0, 2^31)${list ? ', or a list of them' : ''})`);
    return n;
  });
}

/** One place a dump carries the trainer's pad or EOS id: its key as messages name it ("pad_token_id", "generation_config.eos_token_id") and the value there. */
export interface IdCarrier {
  kind: 'pad' | 'eos';
  where: string;
  value: unknown;
}

/** The carriers of an object found at `where` (a tokenizer's or generation config's to_dict()): its pad_token_id and eos_token_id. */
export function carriersIn(where: string, o: unknown): IdCarrier[] {
  if (!isPlainObject(o)) return [];
  return [{ kind: 'pad', where: `${where}.pad_token_id`, value: o.pad_token_id }, { kind: 'eos', where: `${where}.eos_token_id`, value: o.eos_token_id }];
}

/** What a reader knows of its rows, for ids no carrier holds. */
export interface IdEvidence {
  /** The id at every masked-out position of a padding mask (TRL prompt_mask = 0, verl / OpenRLHF attention_mask = 0), and the mask's name. */
  masked?: { mask: string; ids: Iterable<number> };
  /** The writer trims all padding (prime-rl's token export): rows carry no pad to read or to check. */
  unpadded?: boolean;
  /** The last trained token of every trained span (each assistant turn's end, and each completion's). */
  turnEnds: number[];
}

/** The last trained token of every trained span of `ids` under `mask` (a 1 followed by a non-1 or the row's end). */
export function turnEnds(ids: readonly number[], mask: readonly number[], out: number[] = []): number[] {
  const n = Math.min(ids.length, mask.length);
  for (let t = 0; t < n; t++) if (mask[t] === 1 && (t + 1 === n || mask[t + 1] !== 1)) out.push(ids[t]);
  return out;
}

/** The EOS a batch's rows vote for: the most common last trained token of its trained spans (turnEnds), and its count. */
export function votedEos(ends: readonly number[]): { id: number; n: number } {
  const count = new Map<number, number>();
  for (const id of ends) count.set(id, (count.get(id) ?? 0) + 1);
  const [id, n] = [...count].sort((a, b) => b[1] - a[1])[0] ?? [0, 0];
  return { id, n };
}

/**
 * pad / EOS ids, in this order: the dump's carriers (the first that holds one; one that disagrees with it is
 * named in notes), else the caller's tokenizer (convert --tokenizer), else inferred — and then said so in
 * `notes` and in `inferred`, the reason the Doctor names:
 * - pad: the id at every masked-out position of a padding mask, when they are all one id (exact: the trainer
 *   padded with it); none masked out and the writer keeps no padding: the EOS id (nothing to check); otherwise
 *   (several ids under the mask, or no mask to read) the EOS id as a stand-in, named as such;
 * - EOS: the most common last trained token over every trained span (each assistant turn ends with it); with no
 *   trained span there is nothing to infer it from: id 0 stands in, named a stand-in (never "inferred from 0 of 0").
 * Carrier values are range-checked (idsAt): a bad one is a refusal naming its key.
 */
export function tokenIds(d: { fail(message: string): never }, opts: ImportOptions, carriers: readonly IdCarrier[], evidence: IdEvidence, notes: string[]): { pad_token_id: number; eos_token_ids: number[]; inferred?: ImportResult['inferred'] } {
  let filePad: { where: string; id: number } | undefined;
  let fileEos: { where: string; ids: number[] } | undefined;
  for (const c of carriers) {
    const ids = idsAt(d, c.where, c.value, c.kind === 'eos');
    if (ids === undefined) continue;
    if (c.kind === 'pad') {
      if (!filePad) filePad = { where: c.where, id: ids[0] };
      else if (filePad.id !== ids[0]) notes.push(`${c.where} = ${ids[0]} differs from ${filePad.where} = ${filePad.id}: ${filePad.id} kept`);
    } else if (!fileEos) fileEos = { where: c.where, ids };
    else if (fileEos.ids.join() !== ids.join()) notes.push(`${c.where} = [${ids}] differs from ${fileEos.where} = [${fileEos.ids}]: [${fileEos.ids}] kept`);
  }
  // The file's own ids first: they are what the trainer used. A tokenizer's fill only what the file lacks
  // (convert --tokenizer), and one that disagrees is named, never silently written over the file's.
  if (fileEos && opts.eos_token_ids && fileEos.ids.join() !== opts.eos_token_ids.join()) notes.push(`EOS ids [${fileEos.ids}] from the file kept: the tokenizer's are [${opts.eos_token_ids}]`);
  if (filePad && opts.pad_token_id !== undefined && filePad.id !== opts.pad_token_id) notes.push(`pad id ${filePad.id} from the file kept: the tokenizer's is ${opts.pad_token_id}`);
  let eos = fileEos?.ids ?? opts.eos_token_ids;
  let pad = filePad?.id ?? opts.pad_token_id;
  const inferred: NonNullable<ImportResult['inferred']> = {};
  if (!eos && evidence.turnEnds.length === 0) {
    // No trained span to vote: nothing to infer from. The schema needs an EOS id, so id 0 stands in, marked inferred
    // and said to be a stand-in: the Doctor makes every finding resting on it a warning naming that, never an error.
    eos = [0];
    inferred.eos_token_ids = 'a stand-in, not inferred: no trained span (every loss mask is 0) to infer it from';
    notes.push(`no EOS id in the file, and none can be inferred: no trained span (every loss mask is 0); id 0 stands in, and no error rests on it; pass a tokenizer to give the EOS`);
  } else if (!eos) {
    const { id, n } = votedEos(evidence.turnEnds);
    eos = [id];
    inferred.eos_token_ids = `inferred from the last trained token of ${n} of ${evidence.turnEnds.length} trained spans (assistant turns and completions)`;
    notes.push(`no EOS id in the file: ${id} ${inferred.eos_token_ids}; pass a tokenizer to be sure`);
  }
  if (pad === undefined) {
    const seen = new Map<number, number>();
    for (const id of evidence.masked?.ids ?? []) seen.set(id, (seen.get(id) ?? 0) + 1);
    const ids = [...seen.keys()];
    if (ids.length === 1) {
      pad = ids[0];
      inferred.pad_token_id = `inferred from the ${seen.get(pad)} masked-out positions of ${evidence.masked!.mask}, all id ${pad}`;
      notes.push(`no pad id in the file: ${pad}, ${inferred.pad_token_id}`);
    } else {
      pad = eos[0];
      const why = ids.length > 1 ? `the masked-out positions of ${evidence.masked!.mask} hold several ids (${ids.slice(0, 4).join(', ')}${ids.length > 4 ? ', …' : ''}), so none is the pad`
        : evidence.unpadded ? 'the writer trims padding, so the rows carry none to check' : `no masked-out position${evidence.masked ? ` in ${evidence.masked.mask}` : ''} to read one from`;
      inferred.pad_token_id = `inferred as the EOS id, ${why}`;
      notes.push(`no pad id in the file: using the EOS id ${pad} (${why})`);
    }
  }
  return { pad_token_id: pad, eos_token_ids: eos, inferred: Object.keys(inferred).length ? inferred : undefined };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * A trainer's config object (verl's OmegaConf.to_container(config), OpenRLHF's hierarchized args) as
 * [path, value] leaves, its nested objects walked ("a.b.c"): lists, scalars and null are leaves, and so is an
 * object at a path `whole` names (a setting whose value is an object). Nesting deeper than 32 is refused.
 */
export function configLeaves(d: Dump, o: Record<string, unknown>, whole: (path: string) => boolean, prefix = ''): [string, unknown][] {
  if (prefix.split('.').length > 32) d.fail(`__metadata__ config nests deeper than 32 levels at ${prefix.slice(0, 80)}…`);
  return Object.entries(o).flatMap(([k, v]): [string, unknown][] => {
    const path = prefix + k;
    return isPlainObject(v) && !whole(path) ? configLeaves(d, v, whole, `${path}.`) : [[path, v]];
  });
}

/**
 * One file's values of a settings table's leaves, gathered from every place the trainer writes them (verl's
 * nested config, its hook's flat keys and DataProto.meta_info; OpenRLHF's nested and flat args). A leaf given
 * at two places with different values is an error naming both; equal ones are one value.
 */
export class LeafValues {
  readonly values = new Map<string, { where: string; value: unknown }>();
  constructor(private readonly d: Dump) {}

  set(leaf: string, where: string, value: unknown): void {
    const was = this.values.get(leaf);
    if (!was) this.values.set(leaf, { where, value });
    // Compared as shown: JSON.stringify would make NaN, Infinity and null one value.
    else if (shown(was.value) !== shown(value)) this.d.fail(`__metadata__ ${was.where} = ${shown(was.value)} and ${where} = ${shown(value)} both set ${leaf} and disagree`);
  }

  get(leaf: string): unknown {
    return this.values.get(leaf)?.value;
  }

  /**
   * A group size (TRL num_generations, OpenRLHF n_samples_per_prompt, verl rollout.n) as placed here: a positive
   * integer, a number or a numeric string (intOf); undefined when no place gives one (null is none). A value that is
   * there but no group size (0, −4, "two") is refused naming where it was read, never taken as absent: the default or
   * a size guessed from the rows would group the batch differently without a word.
   */
  groupSize(leaf: string): number | undefined {
    const at = this.values.get(leaf);
    if (at === undefined || at.value === null) return undefined;
    const n = intOf(at.value);
    if (n === undefined || n < 1) this.d.fail(`__metadata__ ${at.where} = ${shown(at.value)} is not a group size (a positive integer): groups cannot be formed`);
    return n;
  }

  /** The leaves as one object, in the table's names. */
  object(): Record<string, unknown> {
    return Object.fromEntries([...this.values].map(([k, v]) => [k, v.value]));
  }
}

/**
 * The note of a reader whose dump holds no loss settings (NeMo-RL, slime, prime-rl): what a step then computes, and
 * what the trainer usually does instead (`usual`), so the difference is said where the batch is read.
 */
export function noLossSettings(usual: string): string {
  return `no loss settings in the file: a step takes the studio's (TRL defaults: loss_type dapo, beta 0) and scores at temperature 1 (the file carries no sampling temperature, which the trainer divides the logits by) unless a config says otherwise; ${usual}`;
}

/** A config path as the messages name it: nested "config.a.b", a flat key with dots config["a.b"]. */
export const flatKey = (k: string): string => (k.includes('.') ? `config[${JSON.stringify(k)}]` : `config.${k}`);

export { isPlainObject };
