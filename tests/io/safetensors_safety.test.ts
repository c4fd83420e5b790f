// Issue 13, safetensors and model folders: a header entry that does not describe its bytes exactly (a null
// header, negative / overlapping / short offsets, a huge u64 length, an I64 id beyond int32) is a
// SafeTensorsError naming the tensor, never zeros or aliased bytes read as data; a model folder never
// reads outside itself and never drops a layer silently. Property tests (fast-check) fuzz the header and
// the bytes: whatever comes in, the reader either refuses with SafeTensorsError or returns tensors whose
// byte ranges are inside the data section, exactly sized and disjoint.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSafeTensors, SafeTensorsError, toF32, toI32, writeSafeTensors, type SafeTensors } from '../../src/io/safetensors.ts';
import { loadCheckpoint } from '../../src/model/loader.ts';
import { ModelLoadError } from '../../src/model/config.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { tinyModel } from '../fixtures/models.ts';

const ELEM: Record<string, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

/** A file from a raw header value (any JSON) and a data section. */
function rawFile(header: unknown, data: Uint8Array, headerLength?: bigint): Uint8Array {
  const h = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, headerLength ?? BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

const refuse = (bytes: Uint8Array) => () => parseSafeTensors(bytes, 'x.safetensors');

/** What every accepted file must satisfy. */
function expectSound(st: SafeTensors): void {
  const spans: [number, number][] = [];
  for (const [name, t] of st.tensors) {
    const [s, e] = t.data_offsets;
    expect(Number.isInteger(s) && s >= 0 && s <= e && e <= st.data.byteLength, name).toBe(true);
    expect(e - s, name).toBe(t.shape.reduce((a, b) => a * b, 1) * ELEM[t.dtype]);
    if (e > s) spans.push([s, e]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i++) expect(spans[i][0]).toBeGreaterThanOrEqual(spans[i - 1][1]);
}

describe('safetensors header checks', () => {
  const data = new Uint8Array(32);
  it('a null / array / string header is an error, not a crash', () => {
    expect(refuse(rawFile(null, data))).toThrow(/x.safetensors: header must be a JSON object of tensors, got null/);
    expect(refuse(rawFile([1], data))).toThrow(/got an array/);
    expect(refuse(rawFile('a', data))).toThrow(SafeTensorsError);
  });

  it('negative, reversed, short, past-the-end and overlapping offsets name the tensor', () => {
    const t = (data_offsets: unknown, shape = [2]) => ({ dtype: 'F32', shape, data_offsets });
    expect(refuse(rawFile({ a: t([-8, 0]) }, data))).toThrow(/tensor "a" has data_offsets \[-8,0\]/);
    expect(refuse(rawFile({ a: t([8, 0]) }, data))).toThrow(/tensor "a" has data_offsets/);
    expect(refuse(rawFile({ a: t([0, 4]) }, data))).toThrow(/tensor "a" \(F32 \[2\]\) needs 8 bytes but data_offsets \[0, 4\] hold 4/);
    expect(refuse(rawFile({ a: t([32, 40]) }, data))).toThrow(/data truncated: tensor "a" needs bytes \[\d+, \d+\), file has \d+/);
    expect(refuse(rawFile({ a: t([0, 8]), b: t([4, 12]) }, data))).toThrow(/tensors "a" \[0, 8\] and "b" \[4, 12\] overlap/);
    expect(refuse(rawFile({ a: t([0, 8], [-2]) }, data))).toThrow(/shape \[-2\]/);
    expect(refuse(rawFile({ a: { ...t([0, 8]), dtype: 'U32' } }, data))).toThrow(/unsupported dtype "U32"/);
    expect(parseSafeTensors(rawFile({ a: t([0, 8]), b: t([8, 16]) }, data)).tensors.size).toBe(2);
  });

  it('a u64 header length beyond the file (or 2^63) is refused', () => {
    expect(refuse(rawFile({}, data, 1n << 63n))).toThrow(/header length 9223372036854775808 exceeds the file \(\d+ bytes\)/);
    expect(refuse(rawFile({}, data, 1000n))).toThrow(/exceeds the file/);
  });

  it('I64 ids at or beyond 2^31 (and 2^32) are an error naming the tensor, not a wrapped id', () => {
    for (const big of [2n ** 31n, 2n ** 32n + 5n, -(2n ** 31n) - 1n]) {
      const ids = new BigInt64Array([3n, big]);
      const st = parseSafeTensors(rawFile({ completion_ids: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } }, new Uint8Array(ids.buffer)));
      expect(() => toI32(st, 'completion_ids')).toThrow(new RegExp(`tensor "completion_ids" \\(I64\\) holds ${big} at flat index 1`));
    }
    const ok = parseSafeTensors(rawFile({ m: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } }, new Uint8Array(new BigInt64Array([2n ** 31n - 1n, -(2n ** 31n)]).buffer)));
    expect(Array.from(toI32(ok, 'm'))).toEqual([2 ** 31 - 1, -(2 ** 31)]);
  });
});

describe('safetensors fuzzing (fast-check)', () => {
  const base = writeSafeTensors({
    a: { dtype: 'F32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
    b: { dtype: 'I32', shape: [4], data: new Int32Array([7, 8, 9, 10]) },
  });

  /** Parses and reads every tensor; only SafeTensorsError may escape. */
  const tryRead = (bytes: Uint8Array) => {
    let st: SafeTensors;
    try {
      st = parseSafeTensors(bytes, 'fuzz');
    } catch (e) {
      expect((e as Error).name).toBe('SafeTensorsError');
      return;
    }
    expectSound(st);
    for (const [name, t] of st.tensors) {
      try {
        if (['F64', 'F32', 'F16', 'BF16'].includes(t.dtype)) toF32(st, name);
        else toI32(st, name);
      } catch (e) {
        expect((e as Error).name).toBe('SafeTensorsError');
      }
    }
  };

  it('random header entries: refused, or sound', () => {
    const entry = fc.record({
      dtype: fc.oneof(fc.constantFrom('F32', 'F16', 'BF16', 'F64', 'I64', 'I32', 'I8', 'U8', 'BOOL', 'U32', ''), fc.string()),
      shape: fc.oneof(fc.array(fc.integer({ min: -2, max: 6 }), { maxLength: 3 }), fc.constant(null), fc.double()),
      data_offsets: fc.oneof(fc.tuple(fc.integer({ min: -16, max: 80 }), fc.integer({ min: -16, max: 80 })), fc.array(fc.anything(), { maxLength: 3 })),
    });
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('a', 'b', 'c', '__metadata__'), fc.oneof(entry, fc.anything()), { maxKeys: 4 }), fc.integer({ min: 0, max: 72 }), (header, n) => {
        tryRead(rawFile(header, new Uint8Array(n).map((_, i) => i)));
      }),
      { numRuns: 400 },
    );
  });

  it('random byte flips and truncations of a valid file: refused, or sound', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(base.length - 1), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }), fc.nat(base.length), (flips, cut) => {
        const bytes = base.slice(0, Math.max(cut, 1));
        for (const [i, v] of flips) if (i < bytes.length) bytes[i] = v;
        tryRead(bytes);
      }),
      { numRuns: 400 },
    );
  });
});

describe('model folders', () => {
  it('an index naming a file outside the folder is refused before anything is read', async () => {
    const { dir } = tinyModel('llama', 3, { shards: 2 });
    const index = join(dir, 'model.safetensors.index.json');
    for (const evil of ['../../etc/passwd', '/etc/passwd', '../model.safetensors', 'sub/../../x.safetensors']) {
      writeFileSync(index, JSON.stringify({ weight_map: { 'model.embed_tokens.weight': evil } }));
      await expect(loadCheckpoint(new FolderSource(dir), () => {})).rejects.toThrow(/model.safetensors.index.json maps "model.embed_tokens.weight" to ".*", not a .safetensors file inside the model folder/);
    }
    const src = new FolderSource(dir);
    await expect(src.readBytes('../../etc/passwd')).rejects.toThrow(/"..\/..\/etc\/passwd" is outside the model folder/);
    await expect(src.exists('/etc/passwd')).rejects.toThrow(ModelLoadError);
  });

  it('num_hidden_layers: 1 with 2-layer weights is an error naming the extra layer', async () => {
    const { dir } = tinyModel('llama', 4);
    const cfgPath = join(dir, 'config.json');
    const { readFileSync } = await import('node:fs');
    const hf = JSON.parse(readFileSync(cfgPath, 'utf8'));
    expect(hf.num_hidden_layers).toBeGreaterThan(1);
    writeFileSync(cfgPath, JSON.stringify({ ...hf, num_hidden_layers: 1 }));
    await expect(loadCheckpoint(new FolderSource(dir), () => {})).rejects.toThrow(/num_hidden_layers = 1 but the checkpoint holds "model.layers.1\./);
  });
});
