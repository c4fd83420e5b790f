// Sends a big result from the worker to the page in row slices. Structured clone deserializes a message
// on the receiving thread in one go: a 1,024 × 2,560-token batch as nested arrays takes the page's main
// thread for about half a second in one task. Split into parts of a bounded number of elements, each part
// is its own task, so the page keeps painting and answering input between them. The worker posts the
// parts, then the result with those arrays emptied; the client puts the rows back before resolving.

/**
 * Rows [k, k + rows.length) of the per-row array at `path` of a result (appended in order); with `append`,
 * rows[0] is the next piece of the last row's string (a huge text travels in pieces).
 */
export interface RowPart {
  path: string[];
  rows: unknown[];
  append?: true;
}

/** A string longer than this is sent in pieces: one 200 MB string is a ~120 ms copy in a single task. */
export const PIECE_CHARS = 1 << 20;

const huge = (row: unknown) => typeof row === 'string' && row.length > PIECE_CHARS;

/** Elements per message: a few milliseconds of deserialization on a slow machine. */
export const ROWS_BUDGET = 100_000;

/** What one row costs to deserialize, in elements: its length for an array, a string's length / 64 (a copy). */
function weight(row: unknown): number {
  if (Array.isArray(row)) return row.length + 1;
  if (typeof row === 'string') return 1 + (row.length >> 6);
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
export function streamRows<T extends object>(result: T, paths: string[][], post: (parts: RowPart[]) => void, progress: (done: number, total: number) => void, budget = ROWS_BUDGET): T {
  const arrays = paths.map((p) => at(result, p) as unknown[]);
  const B = arrays.length ? Math.max(...arrays.map((a) => a.length)) : 0;
  let b0 = 0;
  while (b0 < B) {
    // A sample with a huge string goes alone: its first piece in the part, the rest appended after it.
    if (arrays.some((a) => huge(a[b0]))) {
      progress(b0, B);
      const first = (a: unknown[]) => (b0 >= a.length ? [] : [huge(a[b0]) ? (a[b0] as string).slice(0, PIECE_CHARS) : a[b0]]);
      post(paths.map((path, i) => ({ path, rows: first(arrays[i]) })));
      paths.forEach((path, i) => {
        const row = arrays[i][b0];
        if (!huge(row)) return;
        for (let k = PIECE_CHARS; k < (row as string).length; k += PIECE_CHARS) post([{ path, rows: [(row as string).slice(k, k + PIECE_CHARS)], append: true }]);
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
    post(paths.map((path, i) => ({ path, rows: arrays[i].slice(b0, b1) })));
    b0 = b1;
  }
  // Copy the objects along each path so the caller's result keeps its arrays.
  const out = { ...result } as Record<string, unknown>;
  for (const p of paths) {
    for (let d = 1; d < p.length; d++) setAt(out, p.slice(0, d), { ...(at(out, p.slice(0, d)) as object) });
    setAt(out, p, []);
  }
  return out as T;
}

/** Page side: collects the parts of one request and puts them back into its result. */
export class RowCollector {
  private readonly got = new Map<string, RowPart>();

  add(parts: RowPart[]): void {
    for (const part of parts) {
      const key = JSON.stringify(part.path);
      let into = this.got.get(key);
      if (!into) this.got.set(key, (into = { path: part.path, rows: [] }));
      if (part.append) {
        // String pieces join into a rope (V8 cons strings); it is flattened once, where it is first read whole.
        into.rows[into.rows.length - 1] += part.rows[0] as string;
        continue;
      }
      // push(...rows) would overflow the stack on a part of 100,000 short rows.
      for (let i = 0; i < part.rows.length; i++) into.rows.push(part.rows[i]);
    }
  }

  restore<T>(result: T): T {
    for (const { path, rows } of this.got.values()) setAt(result, path, rows);
    return result;
  }
}
