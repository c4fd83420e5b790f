// Issue 21, item 4 — ids are integers. A trainer dump's ids and masks are read exactly or refused: a float,
// BF16 or F16 tensor only when every value is an exact integer its dtype holds without rounding (F32 below
// 2^24, F16 below 2^11, BF16 below 2^8, F64 below 2^53), ids in [0, 2^31), I64 values within int32; booleans
// and strings among ids are refused; a string never becomes a number. Every refusal is one line naming the
// file, tensor, sample, position and value (BatchFormatError → CLI exit 2). Cases from the report,
// then a fast-check property over random TRL dumps in every id dtype.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBatch } from '../../src/io/batch.ts';
import { Dump } from '../../src/io/formats/common.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { parseSafeTensors, toI32, writeSafeTensors, type TensorOut } from '../../src/io/safetensors.ts';
import { refusal } from '../helpers/refusal.ts';

const root = path.resolve(import.meta.dirname, '..', '..');

type IdDType = 'I32' | 'I64' | 'F32' | 'F64' | 'BF16' | 'F16';
const DTYPES: IdDType[] = ['I32', 'I64', 'F32', 'F64', 'BF16', 'F16'];
/** The largest id each dtype holds with every integer below it exact (and within [0, 2^31)). */
const EXACT_MAX: Record<IdDType, number> = { I32: 2 ** 31 - 1, I64: 2 ** 31 - 1, F64: 2 ** 31 - 1, F32: 2 ** 24 - 1, F16: 2 ** 11 - 1, BF16: 2 ** 8 - 1 };

// What torch's casts do: round to nearest, ties to even (f32 → bf16; any → f16 for the values used here).
const f32Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];
function bf16(x: number): number {
  const u = f32Bits(x);
  if (Number.isNaN(x)) return 0x7fc0;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}
function f16(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const s = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === 0) return s;
  if (a >= 65520) return s | 0x7c00; // rounds to infinity
  let e = Math.floor(Math.log2(a));
  if (e < -14) return s | Math.round(a / 2 ** -24); // subnormal
  let m = roundEven((a / 2 ** e - 1) * 1024);
  if (m === 1024) (m = 0), e++;
  return s | ((e + 15) << 10) | m;
}
const roundEven = (x: number) => (x - Math.floor(x) === 0.5 ? (Math.floor(x) % 2 === 0 ? Math.floor(x) : Math.ceil(x)) : Math.round(x));
function bf16Value(bits: number): number {
  return new Float32Array(Uint32Array.of(bits << 16).buffer)[0];
}
function f16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}

/** A (rows, cols) tensor of these values in a dtype, as a trainer's hook (or its cast) writes it. */
function tensor(dtype: IdDType, values: number[][]): TensorOut {
  const flat = values.flat();
  const shape = [values.length, values[0]?.length ?? 0];
  switch (dtype) {
    case 'I32': return { dtype, shape, data: Int32Array.from(flat) };
    case 'I64': return { dtype, shape, data: BigInt64Array.from(flat.map((x) => BigInt(x))) };
    case 'F32': return { dtype, shape, data: Float32Array.from(flat) };
    case 'F64': return { dtype, shape, data: Float64Array.from(flat) };
    case 'BF16': return { dtype, shape, data: Uint16Array.from(flat.map(bf16)) };
    case 'F16': return { dtype, shape, data: Uint16Array.from(flat.map(f16)) };
  }
}

/** The value a reader sees after the dtype stored x (f32 / bf16 / f16 rounding), as the refusal writes it. */
function stored(dtype: IdDType, x: number): string {
  if (dtype === 'F32') return String(Math.fround(x));
  if (dtype === 'BF16') return String(bf16Value(bf16(x)));
  if (dtype === 'F16') return String(f16Value(f16(x)));
  return String(x);
}

/** A TRL dict (tests/grpo/settings_one_answer.test.ts's trlDump) with ids and masks in one dtype; I64 tensors may be given as bigint rows. */
function trlDump(dtype: IdDType, ids: { prompt_ids: number[][]; completion_ids: number[][] }, override: Record<string, TensorOut> = {}): Uint8Array {
  const ones = (r: number[][]) => r.map((x) => x.map(() => 1));
  const B = ids.completion_ids.length;
  return writeSafeTensors(
    {
      prompt_ids: tensor(dtype, ids.prompt_ids),
      prompt_mask: tensor(dtype, ones(ids.prompt_ids)),
      completion_ids: tensor(dtype, ids.completion_ids),
      completion_mask: tensor(dtype, ones(ids.completion_ids)),
      advantages: { dtype: 'F32', shape: [B], data: new Float32Array(B) },
      ...override,
    },
    { config: JSON.stringify({ num_generations: 1 }), pad_token_id: '0', eos_token_ids: '[2]' },
  );
}

const read = (bytes: Uint8Array, name = 'dump.safetensors') => readAnyBatch(bytes, name).batch;

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(root, 'bin/grpo-studio.mjs'), ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('the ids the issue saw changed silently are refused, naming file, tensor, sample, position and value', () => {
  it('F64 id 2^32 + 40: was 0 (the pad id) and exit 0; now exit 2 naming it', () => {
    const bytes = trlDump('F64', { prompt_ids: [[5, 6]], completion_ids: [[7, 2 ** 32 + 40, 2]] });
    expect(refusal(() => read(bytes))).toBe(
      'dump.safetensors: completion_ids[0][1] (sample 0, position 1) = 4294967336 (dtype F64) is not a token id in [0, 2^31)',
    );
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'ids-')), 'f64.safetensors');
    writeFileSync(file, bytes);
    const r = cli('doctor', file);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n').filter((l) => !/^Warning|Dawn/i.test(l))).toHaveLength(1);
    expect(r.stderr).toContain('f64.safetensors: completion_ids[0][1] (sample 0, position 1) = 4294967336 (dtype F64) is not a token id');
  });

  it('F32 id 16,777,217 (stored as 16,777,216): refused, since F32 cannot hold every integer from 2^24 on', () => {
    const msg = refusal(() => read(trlDump('F32', { prompt_ids: [[5, 6]], completion_ids: [[7, 8, 2], [9, 16_777_217, 2]] })));
    expect(msg).toMatch(/^dump\.safetensors: completion_ids\[1\]\[1\] \(sample 1, position 1\) = 16777216 \(dtype F32\) is at or beyond 2\^24 = 16777216, where F32 no longer holds every integer/);
    // 2^24 − 1 is the largest id F32 is known to hold exactly.
    expect(read(trlDump('F32', { prompt_ids: [[5, 6]], completion_ids: [[7, 16_777_215, 2]] })).completion_ids).toEqual([[7, 16_777_215, 2]]);
  });

  it('ids cast to BF16 by a hook (1001 → 1000): refused; small BF16 ids are read exactly', () => {
    const msg = refusal(() => read(trlDump('BF16', { prompt_ids: [[5, 6]], completion_ids: [[7, 1001, 2]] })));
    expect(msg).toMatch(/^dump\.safetensors: completion_ids\[0\]\[1\] \(sample 0, position 1\) = 1000 \(dtype BF16\) is at or beyond 2\^8 = 256/);
    expect(read(trlDump('BF16', { prompt_ids: [[5, 255]], completion_ids: [[7, 100, 2]] })).prompt_ids).toEqual([[5, 255]]);
    // F16 likewise from 2^11.
    expect(refusal(() => read(trlDump('F16', { prompt_ids: [[5, 2049]], completion_ids: [[7, 2]] })))).toMatch(/prompt_ids\[0\]\[1\] \(sample 0, position 1\) = 2048 \(dtype F16\) is at or beyond 2\^11 = 2048/);
  });

  it('non-integer, NaN and negative ids in float tensors are refused', () => {
    expect(refusal(() => read(trlDump('F32', { prompt_ids: [[5, 6.5]], completion_ids: [[7, 2]] })))).toBe('dump.safetensors: prompt_ids[0][1] (sample 0, position 1) = 6.5 (dtype F32) is not an integer');
    expect(refusal(() => read(trlDump('F64', { prompt_ids: [[5, 6]], completion_ids: [[NaN, 2]] })))).toMatch(/completion_ids\[0\]\[0\] \(sample 0, position 0\) = NaN \(dtype F64\) is not an integer/);
    expect(refusal(() => read(trlDump('F32', { prompt_ids: [[-1, 6]], completion_ids: [[7, 2]] })))).toMatch(/prompt_ids\[0\]\[0\] \(sample 0, position 0\) = -1 \(dtype F32\) is not a token id in \[0, 2\^31\)/);
  });

  it('I64 ids beyond 2^31 − 1 and I64 mask values beyond int32 are refused, naming sample and position', () => {
    const big = { dtype: 'I64' as const, shape: [1, 3], data: BigInt64Array.of(7n, 2n ** 31n, 2n) };
    expect(refusal(() => read(trlDump('I64', { prompt_ids: [[5, 6]], completion_ids: [[7, 8, 2]] }, { completion_ids: big })))).toBe(
      'dump.safetensors: completion_ids[0][1] (sample 0, position 1) = 2147483648 (dtype I64) is not a token id in [0, 2^31)',
    );
    const mask = { dtype: 'I64' as const, shape: [1, 3], data: BigInt64Array.of(1n, 1n, 2n ** 40n) };
    expect(refusal(() => read(trlDump('I64', { prompt_ids: [[5, 6]], completion_ids: [[7, 8, 2]] }, { completion_mask: mask })))).toBe(
      'dump.safetensors: completion_mask[0][2] (sample 0, position 2) = 1099511627776 (dtype I64) is not an int32 in [-2^31, 2^31)',
    );
    // toI32 (the loss / advantage case readers) names the element too.
    const st = parseSafeTensors(writeSafeTensors({ completion_ids: big }));
    expect(() => toI32(st, 'completion_ids')).toThrow(/tensor "completion_ids" \(I64\) holds 2147483648 at flat index 1 \(element \[0\]\[1\]\)/);
  });

  it('masks saved as float read as their integers; a fractional mask value is refused', () => {
    const ok = trlDump('I32', { prompt_ids: [[5, 6]], completion_ids: [[7, 2]] }, { completion_mask: tensor('BF16', [[1, 0]]) });
    expect(read(ok).completion_mask).toEqual([[1, 0]]);
    const half = trlDump('I32', { prompt_ids: [[5, 6]], completion_ids: [[7, 2]] }, { completion_mask: tensor('F16', [[1, 0.5]]) });
    expect(refusal(() => read(half))).toBe('dump.safetensors: completion_mask[0][1] (sample 0, position 1) = 0.5 (dtype F16) is not an integer');
  });

  it('every reader of safetensors ids goes through the same check (verl responses, OpenRLHF sequences: ids by name)', () => {
    const st = parseSafeTensors(writeSafeTensors({ responses: tensor('F64', [[3, 2 ** 31]]), sequences: tensor('BF16', [[3, 300]]), attention_mask: tensor('F32', [[1, -1]]) }));
    const d = new Dump(st, 'verl.safetensors');
    expect(refusal(() => d.ints('responses'))).toBe('verl.safetensors: responses[0][1] (sample 0, position 1) = 2147483648 (dtype F64) is not a token id in [0, 2^31)');
    expect(refusal(() => d.ints('sequences'))).toMatch(/^verl\.safetensors: sequences\[0\]\[1\] \(sample 0, position 1\) = 300 \(dtype BF16\) is at or beyond 2\^8/);
    expect(Array.from(d.ints('attention_mask').data)).toEqual([1, -1]); // a mask value of -1 is the Doctor's to report
  });
});

describe('ids at any alignment, from any byte container', () => {
  it('I64 tensors at offsets that are 4 mod 8 (as Python writes them) read the same from a Node Buffer as from a copy', () => {
    // readFileSync gives a Buffer, whose slice() is a view: a misaligned tensor must be copied, not re-viewed.
    const file = path.join(root, 'tests/fixtures/formats/verl-interleaved.safetensors');
    const fromBuffer = read(readFileSync(file), 'verl.safetensors');
    const fromCopy = read(new Uint8Array(readFileSync(file)), 'verl.safetensors');
    expect(fromBuffer.completion_ids).toEqual(fromCopy.completion_ids);
    expect(fromBuffer.prompt_ids).toEqual(fromCopy.prompt_ids);
    expect(fromBuffer.completion_ids.flat().every((id) => id >= 0 && id < 1000)).toBe(true);
  });
});

describe('prime-rl token_ids: integers only', () => {
  const record = (over: Record<string, unknown>) =>
    JSON.stringify({ schema_version: 1, step: 0, rank: 0, token_ids: [11, 12, 40, 2], loss_mask: [false, false, true, true], ...over });
  const jsonl = (...lines: string[]) => new TextEncoder().encode(lines.join('\n') + '\n');

  it('true / false among token_ids: were read as 1 / 0; now refused naming the record and position', () => {
    expect(refusal(() => read(jsonl(record({}), record({ token_ids: [11, true, 40, false] })), 'rank_0.jsonl'))).toBe(
      'rank_0.jsonl: record 1: token_ids[1] (sample 1, position 1) = true is a boolean, not an integer',
    );
  });

  it('strings, fractions, huge and negative ids are refused; the writer\'s boolean loss_mask is read as 0 / 1', () => {
    expect(refusal(() => read(jsonl(record({ token_ids: [11, '12', 40, 2] })), 'r.jsonl'))).toBe('r.jsonl: record 0: token_ids[1] (sample 0, position 1) = "12" is a string, not an integer');
    expect(refusal(() => read(jsonl(record({ token_ids: [11, 12.5, 40, 2] })), 'r.jsonl'))).toMatch(/token_ids\[1\] \(sample 0, position 1\) = 12\.5 is not an integer/);
    expect(refusal(() => read(jsonl(record({ token_ids: [11, 12, 4294967336, 2] })), 'r.jsonl'))).toMatch(/token_ids\[2\] \(sample 0, position 2\) = 4294967336 is not a token id in \[0, 2\^31\)/);
    expect(refusal(() => read(jsonl(record({ token_ids: [11, -3, 40, 2] })), 'r.jsonl'))).toMatch(/token_ids\[1\] \(sample 0, position 1\) = -3 is not a token id/);
    expect(refusal(() => read(jsonl(record({ loss_mask: [0, '0', 1, 1] })), 'r.jsonl'))).toMatch(/loss_mask\[1\] \(sample 0, position 1\) = "0" is a string, not an integer/);
    const b = read(jsonl(record({ token_ids: [11, 12, 16_777_217, 2] })), 'r.jsonl');
    expect([...b.prompt_ids[0], ...b.completion_ids[0]]).toEqual([11, 12, 16_777_217, 2]);
    expect(b.completion_mask).toEqual([[1, 1]]);
  });
});

describe('grpo-batch/v1 JSON: no string becomes a number', () => {
  const base = { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [2], prompt_ids: [[5]], completion_ids: [[2]], completion_mask: [[1]] };
  it('the text "\\u0000NaN" stays a string beside a bare NaN (was read as the number NaN)', () => {
    const text = JSON.stringify({ ...base, prompt_texts: ['\u0000NaN'], completion_texts: ['\u0000Infinity'] }).replace('"completion_mask"', '"rewards": [NaN], "completion_mask"');
    const b = parseBatch(text, 'b.json');
    expect(b.rewards).toEqual([NaN]);
    expect(b.prompt_texts).toEqual(['\u0000NaN']);
    expect(b.completion_texts).toEqual(['\u0000Infinity']);
  });

  it('strings starting with U+0000 keep their exact text, as values and as keys, with or without bare words', () => {
    const strings = ['\u0000', '\u0000\u0000NaN', '\u0000toString', '\u0000-Infinity', 'NaN', '\\u0000NaN'];
    for (const words of [false, true]) {
      const obj = { ...base, prompt_texts: strings, config: { '\u0000NaN': '\u0000NaN', nested: ['\u0000NaN', { k: '\u0000Infinity' }] } };
      const text = JSON.stringify(obj, null, 1).replace('"completion_mask"', words ? '"rewards": [NaN, -Infinity, Infinity], "completion_mask"' : '"completion_mask"');
      const b = parseBatch(text, 'b.json');
      expect(b.prompt_texts).toEqual(strings);
      expect(b.config).toEqual(obj.config);
      if (words) expect(b.rewards).toEqual([NaN, -Infinity, Infinity]);
    }
  });

  it('any string survives beside non-finite words (fast-check)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string(), fc.string().map((s) => '\u0000' + s), fc.constantFrom('\u0000NaN', '\u0000Infinity', '\u0000-Infinity')), { maxLength: 6 }), (texts) => {
        const text = JSON.stringify({ ...base, prompt_texts: texts }).replace('"completion_mask"', '"rewards": [NaN], "completion_mask"');
        const b = parseBatch(text, 'b.json');
        expect(b.prompt_texts).toEqual(texts);
        expect(b.rewards).toEqual([NaN]);
      }),
      { numRuns: 300 },
    );
  });
});

describe('property (fast-check): random TRL dumps in every id dtype', () => {
  /** Ids inside the dtype's exact range, edges included. */
  const idIn = (dtype: IdDType) => fc.oneof(fc.integer({ min: 0, max: EXACT_MAX[dtype] }), fc.constantFrom(0, 1, 2, EXACT_MAX[dtype], EXACT_MAX[dtype] - 1));
  const rowsOf = (dtype: IdDType, B: number) => fc.integer({ min: 1, max: 4 }).chain((T) => fc.array(fc.array(idIn(dtype), { minLength: T, maxLength: T }), { minLength: B, maxLength: B }));
  const dump = fc.record({ dtype: fc.constantFrom(...DTYPES), B: fc.integer({ min: 1, max: 4 }) }).chain(({ dtype, B }) =>
    fc.record({ dtype: fc.constant(dtype), prompt_ids: rowsOf(dtype, B), completion_ids: rowsOf(dtype, B) }),
  );

  it('valid dumps import with ids equal to the originals', () => {
    fc.assert(
      fc.property(dump, ({ dtype, prompt_ids, completion_ids }) => {
        const b = read(trlDump(dtype, { prompt_ids, completion_ids }));
        expect(b.prompt_ids).toEqual(prompt_ids);
        expect(b.completion_ids).toEqual(completion_ids);
        expect(b.completion_mask).toEqual(completion_ids.map((r) => r.map(() => 1)));
        expect(b.prompt_mask).toEqual(prompt_ids.map((r) => r.map(() => 1)));
      }),
      { numRuns: 300 },
    );
  });

  /** Values a dtype cannot carry as an id: beyond its exact range, fractional, non-finite, negative or ≥ 2^31. */
  const badFor = (dtype: IdDType): fc.Arbitrary<number | bigint> => {
    const above = fc.integer({ min: EXACT_MAX[dtype] + 1, max: dtype === 'F16' ? 65504 : dtype === 'BF16' ? 2 ** 40 : 2 ** 50 });
    const negative = fc.integer({ min: -(2 ** 20), max: -1 });
    const fraction = fc.integer({ min: 0, max: dtype === 'BF16' ? 127 : dtype === 'F16' ? 1023 : 2 ** 20 }).map((x) => x + 0.5);
    if (dtype === 'I32') return negative;
    if (dtype === 'I64') return fc.oneof(fc.bigInt({ min: 2n ** 31n, max: 2n ** 63n - 1n }), fc.bigInt({ min: -(2n ** 63n), max: -1n }));
    return fc.oneof(above, negative, fraction, fc.constantFrom(NaN, Infinity, -Infinity));
  };

  it('an out-of-range or non-integer value is refused, naming the first bad one', () => {
    const planted = dump.chain(({ dtype, prompt_ids, completion_ids }) =>
      fc.record({
        dtype: fc.constant(dtype),
        prompt_ids: fc.constant(prompt_ids),
        completion_ids: fc.constant(completion_ids),
        field: fc.constantFrom('prompt_ids' as const, 'completion_ids' as const),
        at: fc.uniqueArray(fc.nat(), { minLength: 1, maxLength: 3 }),
        bad: fc.array(badFor(dtype), { minLength: 3, maxLength: 3 }),
      }),
    );
    fc.assert(
      fc.property(planted, ({ dtype, prompt_ids, completion_ids, field, at, bad }) => {
        const rows = { prompt_ids, completion_ids }[field];
        const T = rows[0].length;
        const n = rows.length * T;
        const flat: (number | bigint)[] = rows.flat();
        const spots = [...new Set(at.map((i) => i % n))];
        spots.forEach((i, k) => (flat[i] = bad[k]));
        const first = Math.min(...spots);
        const value = flat[first];
        const t: TensorOut =
          dtype === 'I64' ? { dtype, shape: [rows.length, T], data: BigInt64Array.from(flat.map((x) => BigInt(x))) } : tensor(dtype, Array.from({ length: rows.length }, (_, b) => flat.slice(b * T, b * T + T) as number[]));
        const msg = refusal(() => read(trlDump(dtype, { prompt_ids, completion_ids }, { [field]: t })));
        const [b, p] = [Math.floor(first / T), first % T];
        const shown = typeof value === 'bigint' ? String(value) : stored(dtype, value);
        expect(msg.startsWith(`dump.safetensors: ${field}[${b}][${p}] (sample ${b}, position ${p}) = ${shown} (dtype ${dtype}) `), msg).toBe(true);
      }),
      { numRuns: 400 },
    );
  });
});
