// Sends a big result from the worker to the page in row slices. Structured clone deserializes a message
// on the receiving thread in one go: a 1,024 × 2,560-token batch as nested arrays takes the page's main
// thread for about half a second in one task. Split into parts of a bounded number of elements, each part
// is its own task, so the page keeps painting and answering input between them. The worker posts the
// parts, then the result with those arrays emptied; the client puts the rows back before resolving.
// Rows of plain numbers (ids, masks, log-probs) travel packed: one Float64Array and the row offsets,
// transferred, not cloned (measured in chromium: 100,000 numbers as nested arrays cost the receiving
// thread 3.8–7.4 ms to deserialize, packed 0.05 ms plus 1.3 ms to rebuild the rows). Float64 holds every
// JS number exactly (−0, NaN, ±inf, 1.5 in an id column); a row holding anything else (null, a string, a
// missing row) sends its whole part as it is, so a malformed batch arrives exactly as it was read.

import { PER_SAMPLE_FIELDS, PER_TOKEN_FIELDS } from '../io/batch.ts';

/** A batch's fields with one entry per sample: what travels as rows between the workers and the page. */
export const BATCH_ROW_FIELDS = ['prompt_ids', 'completion_ids', 'prompt_mask', 'messages', ...PER_TOKEN_FIELDS, ...PER_SAMPLE_FIELDS];

/**
 * Rows [k, k + rows.length) of the per-row array at `path` of a result (appended in order); with `append`,
 * rows[0] is the next piece of the last row's string (a huge text travels in pieces).
 */
export interface RowPart {
  path: string[];
  rows: unknown[];
  /** Instead of `rows`: number rows packed (see packRows). */
  packed?: PackedRows;
  append?: true;
}

/** Rows of numbers as one buffer: row r is values[offsets[r] … offsets[r + 1]). */
export interface PackedRows {
  values: Float64Array;
  offsets: Float64Array;
}

/** `rows` packed, or null when a row is not an array of numbers (it is then sent as it is). */
export function packRows(rows: readonly unknown[]): PackedRows | null {
  let n = 0;
  for (const row of rows) {
    if (!Array.isArray(row)) return null;
    for (let i = 0; i < row.length; i++) if (typeof row[i] !== 'number') return null;
    n += row.length;
  }
  const values = new Float64Array(n);
  const offsets = new Float64Array(rows.length + 1);
  let o = 0;
  rows.forEach((row, r) => {
    offsets[r] = o;
    values.set(row as number[], o);
    o += (row as number[]).length;
  });
  offsets[rows.length] = o;
  return { values, offsets };
}

/** The rows of packRows, as plain arrays again. */
export function unpackRows({ values, offsets }: PackedRows): number[][] {
  const rows: number[][] = [];
  for (let r = 0; r + 1 < offsets.length; r++) {
    const row: number[] = [];
    for (let i = offsets[r]; i < offsets[r + 1]; i++) row.push(values[i]);
    rows.push(row);
  }
  return rows;
}

/** A part to post: number rows packed (their buffers added to `transfer`), anything else as it is. */
function packed(path: string[], rows: unknown[], transfer: ArrayBuffer[]): RowPart {
  const p = packRows(rows);
  if (!p) return { path, rows };
  transfer.push(p.values.buffer as ArrayBuffer, p.offsets.buffer as ArrayBuffer);
  return { path, rows: [], packed: p };
}

/**
 * Replaces the arrays at `paths` of `obj` by packed parts for one message (a worker handing a whole batch
 * to another); `unpackParts` on the other side puts them back. Returns the copy to post, its parts and
 * the buffers to transfer.
 */
export function packParts<T extends object>(obj: T, paths: string[][]): { value: T; parts: RowPart[]; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  const parts = paths.map((path) => packed(path, at(obj, path) as unknown[], transfer));
  return { value: emptied(obj, paths), parts, transfer };
}

export function unpackParts<T>(value: T, parts: readonly RowPart[]): T {
  const c = new RowCollector();
  c.add(parts);
  return c.restore(value);
}

/** A string longer than this is sent in pieces: one 200 MB string is a ~120 ms copy in a single task. */
export const PIECE_CHARS = 1 << 20;

const huge = (row: unknown) => typeof row === 'string' && row.length > PIECE_CHARS;

/** Elements per message: a few milliseconds to receive on a slow machine (packed numbers ~1.3 ms per 100,000). */
export const ROWS_BUDGET = 300_000;

/** Structured clone costs the receiver ~3× the packed path per element: what is not packed weighs 3×. */
const CLONED = 3;

/**
 * What one row costs to receive, in packed numbers: its length for a row of numbers (packed), 3× that for
 * any other array, a string's length / 64 (a copy) 3×.
 */
function weight(row: unknown): number {
  if (Array.isArray(row)) return (row.length + 1) * (row.length === 0 || typeof row[0] === 'number' ? 1 : CLONED);
  if (typeof row === 'string') return CLONED * (1 + (row.length >> 6));
  if (ArrayBuffer.isView(row)) return 1 + (row.byteLength >> 8);
  return 1;
}

function at(obj: unknown, path: string[]): unknown {
  return path.reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), obj);
}

function setAt(obj: unknown, path: string[], value: unknown): void {
  const parent = at(obj, path.slice(0, -1)) as Record<string, unknown>;
  parent[path[path.length - 1]] = value;
}

/** The paths of the arrays among `keys` of `obj` (a batch's per-sample fields, token texts…). */
export function rowPaths(obj: object, keys: readonly string[], prefix: string[] = []): string[][] {
  return keys.filter((k) => Array.isArray((obj as Record<string, unknown>)[k])).map((k) => [...prefix, k]);
}

/**
 * Posts the arrays at `paths` of `result` as row parts of about `budget` elements each (rows of every path
 * advance together, so a part holds whole samples), then returns a copy of the result that shares
 * everything else and holds [] at those paths. `progress(done, B)` is called before each part.
 */
export function streamRows<T extends object>(result: T, paths: string[][], post: (parts: RowPart[], transfer: ArrayBuffer[]) => void, progress: (done: number, total: number) => void, budget = ROWS_BUDGET): T {
  const arrays = paths.map((p) => at(result, p) as unknown[]);
  const B = arrays.length ? Math.max(...arrays.map((a) => a.length)) : 0;
  let b0 = 0;
  while (b0 < B) {
    // A sample with a huge string goes alone: its first piece in the part, the rest appended after it.
    if (arrays.some((a) => huge(a[b0]))) {
      progress(b0, B);
      const first = (a: unknown[]) => (b0 >= a.length ? [] : [huge(a[b0]) ? (a[b0] as string).slice(0, PIECE_CHARS) : a[b0]]);
      post(paths.map((path, i) => ({ path, rows: first(arrays[i]) })), []);
      paths.forEach((path, i) => {
        const row = arrays[i][b0];
        if (!huge(row)) return;
        for (let k = PIECE_CHARS; k < (row as string).length; k += PIECE_CHARS) post([{ path, rows: [(row as string).slice(k, k + PIECE_CHARS)], append: true }], []);
      });
      b0++;
      continue;
    }
    let b1 = b0;
    let cost = 0;
    while (b1 < B && (b1 === b0 || (cost < budget && !arrays.some((a) => huge(a[b1]))))) {
      for (const a of arrays) cost += weight(a[b1]);
      b1++;
    }
    progress(b0, B);
    const transfer: ArrayBuffer[] = [];
    post(paths.map((path, i) => packed(path, arrays[i].slice(b0, b1), transfer)), transfer);
    b0 = b1;
  }
  return emptied(result, paths);
}

/** A copy of `obj` holding [] at `paths` (the objects along each path are copied, so the caller's keep their arrays). */
function emptied<T extends object>(obj: T, paths: string[][]): T {
  const out = { ...obj } as Record<string, unknown>;
  for (const p of paths) {
    for (let d = 1; d < p.length; d++) setAt(out, p.slice(0, d), { ...(at(out, p.slice(0, d)) as object) });
    setAt(out, p, []);
  }
  return out as T;
}

/** Page side: collects the parts of one request and puts them back into its result. */
export class RowCollector {
  private readonly got = new Map<string, RowPart>();

  add(parts: readonly RowPart[]): void {
    for (const part of parts) {
      const key = JSON.stringify(part.path);
      let into = this.got.get(key);
      if (!into) this.got.set(key, (into = { path: part.path, rows: [] }));
      if (part.append) {
        // String pieces join into a rope (V8 cons strings); it is flattened once, where it is first read whole.
        into.rows[into.rows.length - 1] += part.rows[0] as string;
        continue;
      }
      const rows = part.packed ? unpackRows(part.packed) : part.rows;
      // push(...rows) would overflow the stack on a part of 100,000 short rows.
      for (let i = 0; i < rows.length; i++) into.rows.push(rows[i]);
    }
  }

  restore<T>(result: T): T {
    for (const { path, rows } of this.got.values()) setAt(result, path, rows);
    return result;
  }
}
