// `grpo-batch/v1`: one GRPO batch as JSON, with TRL's field names, so a batch dumped from a Python trainer
// (docs/trl-export.md) and the studio's own batch are the same thing. This file holds the types, the reader
// and the writer. The reader only refuses what it cannot read at all (not JSON, wrong format tag, a required
// field missing or of the wrong kind) with a BatchFormatError; everything else — lengths that disagree, masks
// that are not 0/1, NaN — is left as read, for validateBatch (src/io/validate.ts) and the Doctor to report.
// Nothing is ever padded, truncated or repaired here.

import { TRAINERS, type TrainerId } from '../grpo/settings/types.ts';

export const BATCH_FORMAT = 'grpo-batch/v1';

/** A structurally unreadable batch file. The CLI maps this class name to exit code 2. */
export class BatchFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BatchFormatError';
  }
}

/** One chat message as the chat template sees it (role/content plus any template-specific keys). */
export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

/**
 * The special ids a reader inferred rather than read (no carrier in the file, no tokenizer given), each with what it
 * was inferred from ("inferred from the 12 masked-out positions of attention_mask, all id 0"). The Doctor's findings
 * that rest on such an id are warnings naming it, never errors (src/doctor/padding.ts inferredCaveat).
 */
export interface InferredIds {
  pad_token_id?: string;
  eos_token_ids?: string;
}

/** The ids a reader may infer: InferredIds' keys, as a list to check a file's field against. */
export const INFERABLE_IDS = ['pad_token_id', 'eos_token_ids'] as const satisfies readonly (keyof InferredIds & keyof GrpoBatch)[];

/** Config keys under which trainers record the model a batch was sampled from (the Doctor compares it with the tokenizer's), in the order read. */
export const MODEL_NAME_KEYS = ['model_name_or_path', 'name_or_path', '_name_or_path', 'model_name'] as const;

/**
 * Config keys that describe a batch rather than set a computation, so no trainer's settings table has them: the model's
 * name, the chat template's arguments (a TRL row; the Doctor renders with them for any trainer's batch), the training
 * step a dump was written at (`step`: NeMo-RL / prime-rl / slime), verl's group size as its hook writes it
 * (`rollout_n`, read as num_generations). Any other key no table of the batch's trainer has is listed as not read
 * (src/io/formats/index.ts), never dropped without a word.
 */
export const BATCH_FACT_KEYS: ReadonlySet<string> = new Set([...MODEL_NAME_KEYS, 'chat_template_kwargs', 'step', 'rollout_n']);

/** How advantages are scaled (TRL's `scale_rewards`; `true` = "group", `false` = "none" in older TRL). */
export type ScaleRewards = 'group' | 'batch' | 'none';

/** `cumsum(attention_mask) − 1` with pads set to 1 (HF generate), or plain `arange(L)` (a forward with no position_ids). */
export type PositionIdsMode = 'from_attention_mask' | 'arange';

/** Trainer settings carried with the batch. All optional; unknown keys are kept. */
export interface BatchConfig {
  loss_type?: string;
  beta?: number;
  epsilon?: number;
  epsilon_high?: number;
  delta?: number | null;
  temperature?: number;
  kl_estimator?: 'k1' | 'k2' | 'k3';
  importance_sampling_level?: 'token' | 'sequence';
  scale_rewards?: ScaleRewards | boolean;
  /** "trl" (std + 1e-4), "verl" (std + 1e-6) or "openrlhf" (group_norm: std + 1e-9). */
  advantage_estimator?: 'trl' | 'verl' | 'openrlhf';
  /** null: TRL's None (no cap; its dr_grpo cannot run with it). */
  max_completion_length?: number | null;
  max_prompt_length?: number;
  position_ids?: PositionIdsMode;
  /** HF model_type of the policy (gpt2 has absolute positions; llama/qwen use RoPE). */
  model_type?: string;
  /** Chat-template keyword arguments used when rendering `messages` (e.g. enable_thinking). */
  chat_template_kwargs?: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * One GRPO batch. B = number of samples (rows), G = num_generations. Without `group_ids`, rows of a group
 * are consecutive (sample i belongs to group ⌊i / G⌋); with them, sample i belongs to group group_ids[i],
 * rows of a group may sit anywhere (verl's _balance_batch) and a group may hold fewer than G rows (one
 * rank's slice of TRL's process_slice, one OpenRLHF experience). Per-token fields are ragged `number[][]`
 * (one row per sample): either unpadded, or padded to a common width, in which case prompt_mask /
 * completion_mask say which positions are real.
 */
export interface GrpoBatch {
  format: typeof BATCH_FORMAT;
  num_generations: number;
  pad_token_id: number;
  eos_token_ids: number[];
  prompt_ids: number[][]; // (B, P_i)
  completion_ids: number[][]; // (B, C_i)
  completion_mask: number[][]; // (B, C_i) 1 up to and including the first EOS
  tool_mask?: number[][]; // (B, C_i) 0 on tool-output tokens
  prompt_mask?: number[][]; // (B, P_i) 0 on (left) padding
  rewards?: number[]; // (B)
  rewards_per_func?: number[][]; // (B, F), NaN where a reward function does not apply
  reward_weights?: number[]; // (F)
  advantages?: number[]; // (B)
  /** Per-token advantages (verl, OpenRLHF, TRL subclasses with (B, T) advantages), aligned with completion_ids. */
  per_token_advantages?: number[][]; // (B, C_i)
  /** Group label per sample (any integers); absent = groups of G consecutive rows. */
  group_ids?: number[]; // (B)
  old_per_token_logps?: number[][]; // (B, C_i)
  ref_per_token_logps?: number[][]; // (B, C_i)
  sampling_per_token_logps?: number[][]; // (B, C_i) from the inference engine (vLLM)
  /**
   * The trainer's effective loss mask as the studio computed it (completion × truncation × tool × entropy ×
   * off-policy × importance-sampling masks; written on export, read back as data — the loss recomputes it).
   */
  effective_loss_mask?: number[][]; // (B, C_i)
  /**
   * Conversation per sample (length B) or per prompt (length B / G). A per-sample conversation may hold the
   * generated turns too: assistant messages with `tool_calls` and `reasoning_content`, and `tool` messages
   * (the round-trip proof, src/tokenize/roundtrip.ts, renders them against prompt_ids ⧺ completion_ids).
   */
  messages?: ChatMessage[][];
  /**
   * The JSON function schemas the chat template was rendered with (`tools=` of apply_chat_template: TRL's
   * GRPOTrainer `tools`, verl's tool config schemas), beside config.chat_template_kwargs.
   */
  tools?: Record<string, unknown>[];
  prompt_texts?: string[];
  completion_texts?: string[];
  /**
   * The trainer whose field names `config` and `run` use and whose objective the batch follows (absent:
   * TRL). The importers set it from the dump's format, so a converted verl or OpenRLHF batch stays theirs.
   */
  trainer?: TrainerId;
  config?: BatchConfig;
  /**
   * Run context in the trainer's names (TRL: num_processes, rank, gradient_accumulation_steps,
   * num_items_in_batch); a key absent here is read from `config`, where the importers put it.
   */
  run?: Record<string, unknown>;
  /** What the trainer logged for this batch, in its own names (TRL / OpenRLHF "kl", verl "actor/kl_loss"). */
  metrics?: Record<string, number>;
  /**
   * Which of pad_token_id / eos_token_ids the batch's first reader inferred, and from what: written by `convert` (and
   * any writer of an import), so the file keeps saying the ids are a guess and its Doctor verdicts stay the source
   * file's. Read back into ImportResult.inferred (src/io/formats/index.ts), which is where a read batch holds it.
   */
  inferred_ids?: InferredIds;
}

/** The widest completion C (the padded width; the studio loss's L_max where a trainer's table has none). */
export function widestCompletion(batch: Pick<GrpoBatch, 'completion_ids'>): number {
  return batch.completion_ids.reduce((m, r) => Math.max(m, r.length), 0);
}

/** The per-token (B, C_i) fields that must line up with completion_ids. */
export const PER_TOKEN_FIELDS = ['completion_mask', 'tool_mask', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps', 'per_token_advantages', 'effective_loss_mask'] as const;

/** The per-sample (B) fields. */
export const PER_SAMPLE_FIELDS = ['rewards', 'advantages', 'group_ids', 'rewards_per_func', 'prompt_texts', 'completion_texts'] as const;

const RAGGED_FIELDS = ['prompt_ids', 'completion_ids', 'completion_mask', 'tool_mask', 'prompt_mask', 'rewards_per_func', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps', 'per_token_advantages', 'effective_loss_mask'] as const;
const VECTOR_FIELDS = ['eos_token_ids', 'rewards', 'reward_weights', 'advantages', 'group_ids'] as const;
const REQUIRED = ['num_generations', 'pad_token_id', 'eos_token_ids', 'prompt_ids', 'completion_ids', 'completion_mask'] as const;

/** Deeper JSON is refused by name (a batch needs ~5 levels; chat `content` parts a few more). */
export const MAX_JSON_DEPTH = 256;

/** Every top-level field grpo-batch/v1 defines (anything else in a file is reported as unknown). */
export const BATCH_FIELDS: ReadonlySet<string> = new Set(['format', ...REQUIRED, ...RAGGED_FIELDS, ...VECTOR_FIELDS, 'messages', 'tools', 'prompt_texts', 'completion_texts', 'trainer', 'config', 'run', 'metrics', 'inferred_ids']);

/**
 * Python's json.dump writes NaN, Infinity and -Infinity as bare words; JSON.parse refuses them. Rewrite
 * them (outside strings) into tagged strings — "\u0000NaN" — and turn those back into numbers with a
 * reviver. A real string value can start with the tag too (any text can be escaped into JSON), so when a
 * word was rewritten every real string value starting with U+0000 gets one more U+0000 in front, which the
 * reviver takes off again: a string never becomes a number, and a number never becomes a string.
 */
export function parsePythonJson(text: string, source: string): unknown {
  const NONFINITE = new Map<string, number>([['NaN', NaN], ['Infinity', Infinity], ['-Infinity', -Infinity]]);
  let out = '';
  let last = 0;
  let rewritten = false;
  let inString = false;
  let depth = 0;
  /** Where the contents of the current string start, when they start with the tag (-1: they do not). */
  let tagged = -1;
  /** Contents positions of tagged real string values, escaped only if some word was rewritten. */
  const taggedValues: number[] = [];
  // Character codes, not text[i]: this loop sees every character of files of hundreds of MB.
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c /* \ */) i++;
      else if (ch === 0x22 /* " */) {
        inString = false;
        if (tagged >= 0) {
          // A value, not an object key: the next character that is not JSON whitespace is not ':'.
          let j = i + 1;
          while (j < text.length && (text.charCodeAt(j) === 0x20 || text.charCodeAt(j) === 0x0a || text.charCodeAt(j) === 0x0d || text.charCodeAt(j) === 0x09)) j++;
          if (text.charCodeAt(j) !== 0x3a /* : */) taggedValues.push(tagged);
          tagged = -1;
        }
      }
      continue;
    }
    if (ch === 0x22) {
      inString = true;
      if (text.startsWith('\\u0000', i + 1)) tagged = i + 1;
      continue;
    }
    // JSON.parse recurses per level and reports a stack overflow as a syntax error: say what it is instead.
    if (ch === 0x5b /* [ */ || ch === 0x7b /* { */) {
      if (++depth > MAX_JSON_DEPTH) throw new BatchFormatError(`${source}: JSON nesting deeper than ${MAX_JSON_DEPTH} levels (at character ${i}); a grpo-batch/v1 file nests a few levels`);
    } else if (ch === 0x5d /* ] */ || ch === 0x7d /* } */) depth--;
    else if (ch === 0x4e /* N */ || ch === 0x49 /* I */ || ch === 0x2d /* - */) {
      for (const word of ['-Infinity', 'Infinity', 'NaN']) {
        if (text.startsWith(word, i)) {
          rewritten = true;
          out += escapeTagged(text, last, i, taggedValues) + `"\\u0000${word}"`;
          taggedValues.length = 0;
          i += word.length - 1;
          last = i + 1;
          break;
        }
      }
    }
  }
  // The reviver runs once per value: only pay for it when a non-finite word was rewritten.
  if (!rewritten) return JSON.parse(text);
  out += escapeTagged(text, last, text.length, taggedValues);
  return JSON.parse(out, (_k, v) => {
    if (typeof v !== 'string' || v.charCodeAt(0) !== 0) return v;
    if (v.charCodeAt(1) === 0) return v.slice(1); // a real string that starts with U+0000, escaped above
    return NONFINITE.has(v.slice(1)) ? NONFINITE.get(v.slice(1)) : v;
  });
}

/** text[from, to) with one more "\u0000" at the start of each tagged real string value (positions ascending, inside the span). */
function escapeTagged(text: string, from: number, to: number, at: readonly number[]): string {
  let s = '';
  let p = from;
  for (const q of at) {
    s += text.slice(p, q) + '\\u0000';
    p = q;
  }
  return s + text.slice(p, to);
}

/**
 * Read a grpo-batch/v1 JSON text. Throws BatchFormatError (one line, naming the field) when the file is
 * not JSON, has another format tag, or lacks a required field / has one of the wrong container kind.
 * Element-level problems (a string inside an id row, a short mask) are NOT thrown: see validateBatch.
 * A JSON `null` inside a numeric row reads as NaN (TRL writes None rewards as NaN).
 */
export function parseBatch(text: string, source = 'batch'): GrpoBatch {
  let raw: unknown;
  try {
    raw = parsePythonJson(text, source);
  } catch (e) {
    if (e instanceof BatchFormatError) throw e;
    throw new BatchFormatError(`${source}: not valid JSON (${(e as Error).message.split('\n')[0]})`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new BatchFormatError(`${source}: top level must be a JSON object`);
  const obj = raw as Record<string, unknown>;
  if (obj.format !== BATCH_FORMAT) {
    throw new BatchFormatError(`${source}: field "format" is ${JSON.stringify(obj.format) ?? 'missing'}, expected "${BATCH_FORMAT}"`);
  }
  for (const f of REQUIRED) if (!(f in obj) || obj[f] === null) throw new BatchFormatError(`${source}: missing required field "${f}"`);
  for (const f of ['num_generations', 'pad_token_id'] as const) {
    if (typeof obj[f] !== 'number' || !Number.isInteger(obj[f])) throw new BatchFormatError(`${source}: field "${f}" must be an integer, got ${JSON.stringify(obj[f])}`);
  }
  if ((obj.num_generations as number) < 1) throw new BatchFormatError(`${source}: field "num_generations" must be ≥ 1, got ${obj.num_generations}`);
  for (const f of VECTOR_FIELDS) {
    if (f in obj && obj[f] !== null && !Array.isArray(obj[f])) throw new BatchFormatError(`${source}: field "${f}" must be an array`);
  }
  for (const f of RAGGED_FIELDS) {
    if (!(f in obj) || obj[f] === null) continue;
    const v = obj[f];
    if (!Array.isArray(v)) throw new BatchFormatError(`${source}: field "${f}" must be an array of rows`);
    const bad = v.findIndex((row) => !Array.isArray(row));
    if (bad >= 0) throw new BatchFormatError(`${source}: field "${f}" sample ${bad} is not an array`);
  }
  for (const f of ['messages', 'tools', 'prompt_texts', 'completion_texts'] as const) {
    if (f in obj && obj[f] !== null && !Array.isArray(obj[f])) throw new BatchFormatError(`${source}: field "${f}" must be an array`);
  }
  if ('trainer' in obj && obj.trainer !== null && !(TRAINERS as readonly unknown[]).includes(obj.trainer)) {
    throw new BatchFormatError(`${source}: field "trainer" = ${JSON.stringify(obj.trainer)}: expected one of ${TRAINERS.join(', ')}`);
  }
  for (const f of ['config', 'run', 'metrics'] as const) {
    if (f in obj && obj[f] !== null && (typeof obj[f] !== 'object' || Array.isArray(obj[f]))) throw new BatchFormatError(`${source}: field "${f}" must be an object`);
  }
  if ('inferred_ids' in obj && obj.inferred_ids !== null) checkInferredIds(obj.inferred_ids, source);
  // Optional fields given as null are treated as absent.
  for (const k of Object.keys(obj)) if (obj[k] === null) delete obj[k];
  nullsToNaN(obj);
  return obj as unknown as GrpoBatch;
}

/**
 * `inferred_ids`: an object whose keys are INFERABLE_IDS and whose values say, as text, what the id was inferred from.
 * Anything else is refused naming the field: a malformed one could not be told from "read", and an inferred id read
 * as a certain one turns the Doctor's warnings into errors.
 */
function checkInferredIds(v: unknown, source: string): void {
  const field = `${source}: field "inferred_ids"`;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new BatchFormatError(`${field} must be an object {"pad_token_id"?: reason, "eos_token_ids"?: reason}, got ${JSON.stringify(v)}`);
  for (const [k, why] of Object.entries(v)) {
    if (!(INFERABLE_IDS as readonly string[]).includes(k)) throw new BatchFormatError(`${field} has key "${k}": expected ${INFERABLE_IDS.join(' or ')}`);
    if (typeof why !== 'string' || why.trim() === '') throw new BatchFormatError(`${field}.${k} must be a non-empty string saying what the id was inferred from, got ${JSON.stringify(why)}`);
  }
}

function nullsToNaN(obj: Record<string, unknown>): void {
  const fix = (row: unknown[]) => {
    for (let i = 0; i < row.length; i++) if (row[i] === null) row[i] = NaN;
  };
  for (const f of VECTOR_FIELDS) if (Array.isArray(obj[f])) fix(obj[f] as unknown[]);
  for (const f of RAGGED_FIELDS) if (Array.isArray(obj[f])) for (const row of obj[f] as unknown[][]) fix(row);
}

/**
 * Write a batch as grpo-batch/v1 JSON, one row per line so diffs stay readable. Non-finite numbers are
 * written the way Python's json.dump does (NaN, Infinity), which parseBatch reads back; with
 * `strictJson` (the studio's export: a file any JSON parser reads) they are written as null, which
 * parseBatch reads as NaN, and the top-level field NONFINITE_NOTE lists each one's path and value.
 */
export function serializeBatch(batch: GrpoBatch, opts: { strictJson?: boolean } = {}): string {
  const nonfinite: string[] = [];
  const value = (v: unknown, at: string): string => {
    if (typeof v === 'number') {
      if (Number.isFinite(v)) return JSON.stringify(v);
      const word = Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
      if (!opts.strictJson) return word;
      nonfinite.push(`${at}: ${word}`);
      return 'null';
    }
    if (Array.isArray(v)) return `[${v.map((x, i) => value(x, `${at}[${i}]`)).join(', ')}]`;
    if (v !== null && typeof v === 'object') return `{${Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => `${JSON.stringify(k)}: ${value(x, `${at}.${k}`)}`).join(', ')}}`;
    return JSON.stringify(v);
  };
  const lines = Object.entries(batch)
    .filter(([k, v]) => v !== undefined && k !== NONFINITE_NOTE)
    .map(([k, v]) => {
      const isRows = Array.isArray(v) && v.length > 0 && v.every((r) => Array.isArray(r) || (r !== null && typeof r === 'object'));
      const body = isRows ? `[\n  ${(v as unknown[]).map((r, i) => value(r, `${k}[${i}]`)).join(',\n  ')}\n ]` : value(v, k);
      return ` ${JSON.stringify(k)}: ${body}`;
    });
  if (nonfinite.length > 0) lines.push(` ${JSON.stringify(NONFINITE_NOTE)}: ${JSON.stringify(nonfinite)}`);
  return `{\n${lines.join(',\n')}\n}\n`;
}

/** The note a strict-JSON export adds: "field[i][j]: NaN" for every non-finite number it wrote as null. */
export const NONFINITE_NOTE = 'nonfinite_written_as_null';

/** Sample b's group as reports name it: its label when the batch has group_ids, else ⌊b / G⌋. */
export function groupLabel(batch: Pick<GrpoBatch, 'group_ids' | 'num_generations'>, b: number): number {
  return batch.group_ids?.[b] ?? Math.floor(b / batch.num_generations);
}

/** The configured scale_rewards as one of "group" | "batch" | "none" (TRL's older booleans mapped). */
export function scaleRewardsOf(config: BatchConfig | undefined): ScaleRewards {
  const s = config?.scale_rewards;
  if (s === undefined || s === true) return 'group';
  if (s === false) return 'none';
  return s;
}
