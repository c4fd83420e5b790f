// Rows of a JSON dump (NeMo-RL train_data_step{N}.jsonl, slime's rollout dump as JSON) read exactly: token ids
// are integers in [0, 2^31), mask values int32 (true / false as 1 / 0, a bool tensor's .tolist()), floats are
// numbers (null, NaN, ±Infinity as Python's json writes them, kept as NaN / ±Infinity). A boolean or a string
// among ids, a fraction, an id out of range: one line naming the file, record, key, position and value — an id is
// never rounded, wrapped or read from text. Also the records of a JSON Lines dump (NeMo-RL, prime-rl), one parse.
import { BatchFormatError, parsePythonJson } from '../batch.ts';
import { INT32_RANGE, TOKEN_ID_RANGE } from '../safetensors.ts';
import { shown } from '../shown.ts';

export type Fail = (message: string) => never;

/**
 * The JSON objects of a JSON Lines dump, each with its 1-based line number (blank lines skipped), parsed as
 * Python's json writes them (NaN, Infinity). A line that is no JSON object, or no line at all: a refusal naming
 * the line.
 */
export function jsonLines(text: string, file: string, fail: Fail): { line: number; r: Record<string, unknown> }[] {
  const records: { line: number; r: Record<string, unknown> }[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let r: unknown;
    try {
      r = parsePythonJson(line, `${file}: line ${i + 1}`);
    } catch (e) {
      if (e instanceof BatchFormatError) throw e;
      fail(`line ${i + 1} is not JSON (${(e as Error).message.split('\n')[0]})`);
    }
    if (r === null || typeof r !== 'object' || Array.isArray(r)) fail(`line ${i + 1} is not a JSON object`);
    records.push({ line: i + 1, r: r as Record<string, unknown> });
  });
  return records.length ? records : fail('no records');
}

/** `v` as a list, or a refusal naming where it sits. */
export function listAt(fail: Fail, v: unknown, at: string): unknown[] {
  return Array.isArray(v) ? v : fail(`${at} must be a list, got ${v === null ? 'null' : typeof v}`);
}

/**
 * Whole numbers: token ids in [0, 2^31) or mask values in int32 (booleans allowed for masks only); the ranges are
 * the safetensors reader's (TOKEN_ID_RANGE, INT32_RANGE). `sample`, when given, is named with the position.
 */
export function intList(fail: Fail, v: unknown, at: string, kind: 'ids' | 'mask', sample?: number): number[] {
  const range = kind === 'ids' ? TOKEN_ID_RANGE : INT32_RANGE;
  return listAt(fail, v, at).map((x, t) => {
    if (typeof x === 'boolean' && kind === 'mask') return +x;
    const here = `${at}[${t}] (${sample === undefined ? '' : `sample ${sample}, `}position ${t}) = ${shown(x)}`;
    if (typeof x !== 'number') return fail(`${here} is ${x === null ? 'null' : `a ${Array.isArray(x) ? 'list' : typeof x}`}, not an integer`);
    if (!Number.isInteger(x)) return fail(`${here} is not an integer`);
    if (x < range.min || x > range.max) return fail(`${here} is not ${range.what}`);
    return x;
  });
}

/** Numbers (null → NaN); a string or boolean is refused, never parsed. */
export function floatList(fail: Fail, v: unknown, at: string): number[] {
  return listAt(fail, v, at).map((x, t) => {
    if (x === null) return NaN;
    if (typeof x !== 'number') return fail(`${at}[${t}] (position ${t}) = ${JSON.stringify(x)} is not a number`);
    return x;
  });
}

/** One number (null → NaN), or a refusal. */
export function numberAt(fail: Fail, v: unknown, at: string): number {
  if (v === null) return NaN;
  return typeof v === 'number' ? v : fail(`${at} = ${JSON.stringify(v)} is not a number`);
}
