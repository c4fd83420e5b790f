// A big import reaches the page in row slices (src/bridge/rows.ts) through the client
// (src/bridge/client.ts): the result put back together equals the one sent, no message holds more than
// its budget and a huge string arrives in pieces (so no single deserialization holds the page's thread),
// per-request progress reaches its caller, and a cancelled request rejects at once and ignores what the
// worker still sends.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PIECE_CHARS, RowCollector, packParts, packRows, rowPaths, streamRows, unpackParts, unpackRows, type RowPart } from '../../src/bridge/rows.ts';
import { StudioClient, type PortLike } from '../../src/bridge/client.ts';
import { Cancelled } from '../../src/bridge/errors.ts';
import type { RequestEnvelope, WorkerMessage } from '../../src/bridge/protocol.ts';

function fakePort() {
  const sent: RequestEnvelope[] = [];
  const port: PortLike = { postMessage: (m) => void sent.push(m), onmessage: null, onerror: null };
  const reply = (msg: WorkerMessage) => port.onmessage!({ data: msg } as MessageEvent<WorkerMessage>);
  return { port, sent, reply };
}

/** A part's rows, packed or not. */
const rowsOf = (x: RowPart): unknown[] => (x.packed ? unpackRows(x.packed) : x.rows);

const FIELDS = ['completion_ids', 'completion_mask', 'rewards', 'completion_texts', 'prompt_ids'];

const batchOf = (lens: number[], text: string) => ({
  format: 'grpo-batch/v1',
  num_generations: 1,
  completion_ids: lens.map((n, b) => Array.from({ length: n }, (_, t) => b * 1000 + t)),
  completion_mask: lens.map((n) => new Array(n).fill(1)),
  rewards: lens.map((_, b) => b / 2),
  completion_texts: lens.map((_, b) => (b === 0 ? text : `c${b}`)),
  eos_token_ids: [1, 2],
});

describe('row streaming', () => {
  it('round-trips any batch, in parts within the budget, leaving the sender’s result intact', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 60 }), fc.integer({ min: 50, max: 2_000 }), (lens, budget) => {
        const result = { batch: batchOf(lens, 'x'), report: { findings: [] } };
        const before = structuredClone(result);
        const parts: RowPart[][] = [];
        const seen: number[] = [];
        const sent = streamRows(result, rowPaths(result.batch, FIELDS, ['batch']), (p) => parts.push(structuredClone(p)), (done) => seen.push(done), budget);
        expect(result).toEqual(before);
        expect(sent.batch.completion_ids).toEqual([]);
        expect(sent.batch.eos_token_ids).toEqual([1, 2]); // not per-row: sent whole
        for (const p of parts) {
          // Rows of numbers travel packed (ids, masks), the rest as they are (texts, per-sample rewards).
          expect(p.find((x) => x.path[1] === 'completion_ids')!.packed).toBeDefined();
          expect(p.find((x) => x.path[1] === 'completion_texts')!.packed).toBeUndefined();
          const rows = rowsOf(p[0]).length;
          const cost = p.reduce((s, x) => s + rowsOf(x).reduce<number>((c, r) => c + (Array.isArray(r) ? r.length + 1 : 1), 0), 0);
          // A part goes over the budget only by its last sample (a sample is never split).
          if (rows > 1) expect(cost - (lens[seen[parts.indexOf(p)] + rows - 1] * 2 + 4)).toBeLessThan(budget);
        }
        const c = new RowCollector();
        for (const p of parts) c.add(p);
        expect(c.restore(structuredClone(sent))).toEqual(before);
      }),
      { numRuns: 200 },
    );
  });

  it('sends 200,000 rows in many bounded messages, and huge strings in pieces', () => {
    const lens = new Array(200_000).fill(3);
    // Not one repeated letter: pieces put back in the wrong order would not compare equal.
    const big = Array.from({ length: 5_000_003 }, (_, i) => String.fromCharCode(97 + ((i * 7) % 26))).join('');
    const batch = batchOf(lens, big);
    batch.completion_texts[100_000] = big.slice(3) + 'z';
    const before = structuredClone(batch);
    let messages = 0;
    let longest = 0;
    const c = new RowCollector();
    const sent = streamRows({ batch }, rowPaths(batch, FIELDS, ['batch']), (parts) => {
      messages++;
      for (const p of parts) for (const r of rowsOf(p)) if (typeof r === 'string') longest = Math.max(longest, r.length);
      c.add(structuredClone(parts));
    }, () => {}, 100_000);
    expect(messages).toBeGreaterThan(10 + 2 * 4);
    expect(longest).toBe(PIECE_CHARS);
    const back = c.restore(sent).batch;
    expect(back.completion_ids.length).toBe(200_000);
    expect(back.completion_ids[199_999]).toEqual([199_999_000, 199_999_001, 199_999_002]);
    expect(back.completion_texts[0] === big).toBe(true);
    expect(back.completion_texts[100_000] === before.completion_texts[100_000]).toBe(true);
    expect(back).toEqual(before);
  });

  it('packs rows of numbers exactly (−0, NaN, ±inf, fractions, empty rows) and leaves anything else to structured clone', () => {
    const num = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(-0, NaN, Infinity, -Infinity, 2 ** 53 + 2, 1.5));
    fc.assert(
      fc.property(fc.array(fc.array(num, { maxLength: 30 }), { maxLength: 20 }), (rows) => {
        const p = packRows(rows)!;
        expect(p.values.length).toBe(rows.reduce((n, r) => n + r.length, 0));
        expect(unpackRows(structuredClone(p))).toEqual(rows);
        // Object.is: −0 stays −0, NaN stays NaN.
        unpackRows(p).forEach((r, i) => r.forEach((v, j) => expect(Object.is(v, rows[i][j])).toBe(true)));
      }),
    );
    for (const bad of [[[1, 2], [3, null]], [[1], 'text'], [[1], undefined], [[1, '2']], [[1], [[2]]]]) expect(packRows(bad)).toBeNull();
  });

  it('hands a whole batch between workers packed: one message, buffers to transfer, the same batch back', () => {
    const batch = { ...batchOf([3, 0, 5], 'hello'), prompt_ids: [[1, 2], [3, null as unknown as number], [4]] };
    const before = structuredClone(batch);
    const { value, parts, transfer } = packParts({ read: { batch } }, rowPaths(batch, FIELDS, ['read', 'batch']));
    expect(batch).toEqual(before);
    expect(value.read.batch.completion_ids).toEqual([]);
    // completion_ids and completion_mask packed (2 buffers each); prompt_ids (a null in it), texts and rewards are not.
    expect(parts.filter((x) => x.packed).map((x) => x.path[2]).sort()).toEqual(['completion_ids', 'completion_mask']);
    expect(transfer.length).toBe(4);
    const back = unpackParts(structuredClone(value), structuredClone(parts));
    expect(back.read.batch).toEqual(before);
  });

  it('keeps arrays of different lengths as they were, a huge string on a row past the shorter ones included', () => {
    const batch = { completion_ids: [[1], [2], [3]], completion_mask: [[1]], completion_texts: ['a', 'b', 'x'.repeat(PIECE_CHARS + 5)] };
    const before = structuredClone(batch);
    const c = new RowCollector();
    const sent = streamRows({ batch }, rowPaths(batch, FIELDS, ['batch']), (p) => c.add(structuredClone(p)), () => {}, 1);
    expect(c.restore(sent).batch).toEqual(before);
  });
});

describe('StudioClient with row parts, progress and cancel', () => {
  it('puts the rows back before resolving and routes progress to the request', async () => {
    const { port, sent, reply } = fakePort();
    const client = new StudioClient(port, { onProgress: () => expect.unreachable('model progress'), onDeviceLost: () => {} });
    const labels: string[] = [];
    const p = client.request({ type: 'import-batch', file: new Blob(['{}']), name: 'b.json' }, { onProgress: (x) => labels.push(x.label) });
    const id = sent[0].id;
    reply({ event: 'progress', id, progress: { label: 'parsing b.json', loaded: 0, total: 4 } });
    reply({ event: 'rows', id, parts: [{ path: ['batch', 'completion_ids'], rows: [[5], [6, 7]] }] });
    reply({ event: 'rows', id, parts: [{ path: ['batch', 'completion_ids'], rows: [[8]] }] });
    reply({ id, ok: true, result: { batch: { completion_ids: [] }, report: { findings: [] } } as never });
    const r = (await p) as unknown as { batch: { completion_ids: number[][] } };
    expect(r.batch.completion_ids).toEqual([[5], [6, 7], [8]]);
    expect(labels).toEqual(['parsing b.json']);
  });

  it('a cancel rejects at once, tells the worker, and drops the late answer', async () => {
    const { port, sent, reply } = fakePort();
    const client = new StudioClient(port, { onProgress: () => {}, onDeviceLost: () => {} });
    const abort = new AbortController();
    const p = client.request({ type: 'import-batch', file: new Blob(['{}']), name: 'b.json' }, { signal: abort.signal });
    abort.abort();
    await expect(p).rejects.toBeInstanceOf(Cancelled);
    expect(sent[1].request).toEqual({ type: 'cancel', target: sent[0].id });
    // Whatever the worker still sends for it goes nowhere (no throw, no resolve).
    reply({ event: 'rows', id: sent[0].id, parts: [{ path: ['batch', 'completion_ids'], rows: [[1]] }] });
    reply({ id: sent[0].id, ok: true, result: {} as never });
    const q = client.request({ type: 'reset' });
    reply({ id: sent[2].id, ok: true, result: {} });
    await expect(q).resolves.toEqual({});
  });
});
