// Issue 21, "Done when": a fast-check property writes random valid dumps of EACH format the importer reads, in
// every id dtype, and asserts the imported ids equal the originals — or a refusal (BatchFormatError, one line)
// naming the first bad value by tensor / key, sample and position, and the value. tests/io/ids_exact.test.ts
// covers the TRL dict; this file covers the others:
// - safetensors: verl DataProto (prompts, responses, input_ids, attention_mask, response_mask + uid metadata) and
//   OpenRLHF Experience (sequences, action_mask, attention_mask + index / n_samples_per_prompt metadata), ids and
//   masks in I32, I64, F32, F64, BF16, F16 with values inside each dtype's exact-integer range (edges included);
//   planted values past the exact range, fractional, NaN / ±Inf, negative ids, I64 ≥ 2^31 are refused;
// - JSON: prime-rl token-export JSONL, NeMo-RL train_data_step jsonl, slime's rollout dump as JSON: ids as JSON
//   integers; fractions, booleans, strings, null, ≥ 2^31 and negative ids refused (NaN / ±Infinity too where the
//   reader takes Python's bare words: NeMo-RL, slime).
// Every dump goes through importBatch (src/io/formats/index.ts), as the page and the CLI read files.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { importBatch } from '../../src/io/formats/index.ts';
import { writeSafeTensors, type TensorOut } from '../../src/io/safetensors.ts';
import { BatchFormatError, type GrpoBatch } from '../../src/io/batch.ts';
import { refusal } from '../helpers/refusal.ts';

type IdDType = 'I32' | 'I64' | 'F32' | 'F64' | 'BF16' | 'F16';
const DTYPES: IdDType[] = ['I32', 'I64', 'F32', 'F64', 'BF16', 'F16'];
/** The largest id each dtype holds with every integer below it exact (and within [0, 2^31)). */
const EXACT_MAX: Record<IdDType, number> = { I32: 2 ** 31 - 1, I64: 2 ** 31 - 1, F64: 2 ** 31 - 1, F32: 2 ** 24 - 1, F16: 2 ** 11 - 1, BF16: 2 ** 8 - 1 };
/** Floating dtypes: integers of magnitude below 2^bits are exact (a mask value may be negative; it must stay below). */
const FLOAT_LIMIT: Partial<Record<IdDType, number>> = { F64: 2 ** 53, F32: 2 ** 24, F16: 2 ** 11, BF16: 2 ** 8 };
const RUNS = 150;

// ---- safetensors encodings (as torch's casts round: nearest, ties to even) ----
const f32Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];
function bf16(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  const u = f32Bits(x);
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}
const roundEven = (x: number) => (x - Math.floor(x) === 0.5 ? (Math.floor(x) % 2 === 0 ? Math.floor(x) : Math.ceil(x)) : Math.round(x));
function f16(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const s = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === 0) return s;
  if (a >= 65520) return s | 0x7c00;
  let e = Math.floor(Math.log2(a));
  if (e < -14) return s | Math.round(a / 2 ** -24);
  let m = roundEven((a / 2 ** e - 1) * 1024);
  if (m === 1024) (m = 0), e++;
  return s | ((e + 15) << 10) | m;
}
const bf16Value = (bits: number) => new Float32Array(Uint32Array.of(bits << 16).buffer)[0];
function f16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}

type Val = number | bigint;
/** A (rows, cols) tensor of these values in a dtype (bigints only for I64). */
function tensor(dtype: IdDType, rows: Val[][], cols = rows[0]?.length ?? 0): TensorOut {
  const flat = rows.flat();
  const shape = [rows.length, cols];
  const num = (x: Val) => Number(x);
  switch (dtype) {
    case 'I32': return { dtype, shape, data: Int32Array.from(flat.map(num)) };
    case 'I64': return { dtype, shape, data: BigInt64Array.from(flat.map((x) => BigInt(x))) };
    case 'F32': return { dtype, shape, data: Float32Array.from(flat.map(num)) };
    case 'F64': return { dtype, shape, data: Float64Array.from(flat.map(num)) };
    case 'BF16': return { dtype, shape, data: Uint16Array.from(flat.map((x) => bf16(num(x)))) };
    case 'F16': return { dtype, shape, data: Uint16Array.from(flat.map((x) => f16(num(x)))) };
  }
}

/** The value a reader sees after the dtype stored x, as the refusal writes it. */
function stored(dtype: IdDType, x: Val): string {
  if (typeof x === 'bigint') return String(x);
  if (dtype === 'F32') return String(Math.fround(x));
  if (dtype === 'BF16') return String(bf16Value(bf16(x)));
  if (dtype === 'F16') return String(f16Value(f16(x)));
  return String(x);
}


const importOne = (name: string, bytes: Uint8Array) => importBatch([{ name, bytes }]).batch;
const enc = (s: string) => new TextEncoder().encode(s);

// ---- generators shared by the formats ----
/** Ids inside the dtype's exact range, edges included. */
const idIn = (max: number) => fc.oneof(fc.integer({ min: 0, max }), fc.constantFrom(0, 1, 2, max, max - 1));
const fixedRows = <T>(arb: fc.Arbitrary<T>, B: number, T_: number) => fc.array(fc.array(arb, { minLength: T_, maxLength: T_ }), { minLength: B, maxLength: B });
const bit = fc.constantFrom(0, 1);

/** Values a dtype cannot carry: as an id (beyond its exact range, fractional, non-finite, negative, I64 ≥ 2^31) or as a mask value. */
function badFor(dtype: IdDType, kind: 'ids' | 'mask'): fc.Arbitrary<Val> | undefined {
  if (dtype === 'I32') return kind === 'ids' ? fc.integer({ min: -(2 ** 31), max: -1 }) : undefined; // every I32 is an int32 mask value
  if (dtype === 'I64') {
    const high = fc.bigInt({ min: 2n ** 31n, max: 2n ** 63n - 1n });
    return kind === 'ids' ? fc.oneof(high, fc.bigInt({ min: -(2n ** 63n), max: -1n })) : fc.oneof(high, fc.bigInt({ min: -(2n ** 63n), max: -(2n ** 31n) - 1n }));
  }
  const limit = FLOAT_LIMIT[dtype]!;
  const top = dtype === 'F16' ? 65504 : dtype === 'BF16' ? 2 ** 40 : 2 ** 60;
  const above = fc.oneof(fc.integer({ min: EXACT_MAX[dtype] + 1, max: Math.min(top, Number.MAX_SAFE_INTEGER) }), fc.constantFrom(EXACT_MAX[dtype] + 1, limit, 2 ** 31));
  const belowNeg = fc.nat({ max: dtype === 'F16' ? 60000 : 2 ** 30 }).map((k) => -(limit + k));
  const fraction = fc.integer({ min: dtype === 'BF16' ? -127 : dtype === 'F16' ? -1023 : -(2 ** 20), max: dtype === 'BF16' ? 127 : dtype === 'F16' ? 1023 : 2 ** 20 }).map((x) => x + 0.5);
  const nonFinite = fc.constantFrom(NaN, Infinity, -Infinity);
  if (kind === 'ids') return fc.oneof(above, fc.integer({ min: -(2 ** 20), max: -1 }).filter((x) => dtype !== 'BF16' || x >= -256), fraction, nonFinite);
  // A mask may be negative (int32): it must still be exact in its dtype.
  return fc.oneof(above.filter((x) => x >= limit || x >= 2 ** 31), belowNeg, fraction, nonFinite);
}

/** Plant bad values at 1–3 flat positions of rows; the first planted (in row-major order) is the one a refusal must name. */
const planting = (bad: fc.Arbitrary<Val>) => fc.record({ at: fc.uniqueArray(fc.nat(), { minLength: 1, maxLength: 3 }), bad: fc.array(bad, { minLength: 3, maxLength: 3 }) });
function plant(rows: Val[][], { at, bad }: { at: number[]; bad: Val[] }): { rows: Val[][]; b: number; t: number; value: Val } {
  const T = rows[0].length;
  const flat = rows.flat();
  const spots = [...new Set(at.map((i) => i % flat.length))];
  spots.forEach((i, k) => (flat[i] = bad[k]));
  const first = Math.min(...spots);
  return { rows: rows.map((_, b) => flat.slice(b * T, b * T + T)), b: Math.floor(first / T), t: first % T, value: flat[first] };
}

// ---- verl DataProto ----
interface VerlIds { prompts: number[][]; responses: number[][]; attention_mask: number[][]; response_mask: number[][] }
const verlIds = (dtype: IdDType) =>
  fc.record({ B: fc.integer({ min: 1, max: 4 }), P: fc.integer({ min: 1, max: 4 }), R: fc.integer({ min: 1, max: 4 }) }).chain(({ B, P, R }) =>
    fc
      .record({ prompts: fixedRows(idIn(EXACT_MAX[dtype]), B, P), responses: fixedRows(idIn(EXACT_MAX[dtype]), B, R), attention_mask: fixedRows(bit, B, P + R), response_mask: fixedRows(bit, B, R) })
      // verl trains only attended tokens (compute_response_mask: attention_mask[:, -R:], tool tokens zeroed): a
      // trained token outside the attention is refused by the reader, so valid dumps keep response_mask ⊆ attention.
      .map((v) => ({ ...v, response_mask: v.response_mask.map((r, b) => r.map((m, t) => m & v.attention_mask[b][P + t])) })),
  );
function verlDump(dtype: IdDType, v: VerlIds, override: Record<string, TensorOut> = {}): Uint8Array {
  const B = v.responses.length;
  return writeSafeTensors(
    {
      prompts: tensor(dtype, v.prompts),
      responses: tensor(dtype, v.responses),
      input_ids: tensor(dtype, v.prompts.map((p, b) => [...p, ...v.responses[b]])),
      attention_mask: tensor(dtype, v.attention_mask),
      response_mask: tensor(dtype, v.response_mask),
      token_level_rewards: { dtype: 'F32', shape: [B, v.responses[0].length], data: new Float32Array(B * v.responses[0].length) },
      ...override,
    },
    { uid: JSON.stringify(Array.from({ length: B }, (_, b) => `u${b % 2}`)), pad_token_id: '0', eos_token_id: '2' },
  );
}

// ---- OpenRLHF Experience ----
interface OrlhfIds { sequences: number[][]; action_mask: number[][]; attention_mask: number[][] }
const orlhfIds = (dtype: IdDType) =>
  fc.record({ B: fc.integer({ min: 1, max: 4 }), T: fc.integer({ min: 2, max: 6 }), short: fc.nat({ max: 1 }) }).chain(({ B, T, short }) => {
    const A = Math.max(1, T - 1 - short); // A = T − 1, or one narrower (aligned to the end)
    return fc.record({ sequences: fixedRows(idIn(EXACT_MAX[dtype]), B, T), action_mask: fixedRows(bit, B, A), attention_mask: fixedRows(bit, B, T) });
  });
function orlhfDump(dtype: IdDType, v: OrlhfIds, override: Record<string, TensorOut> = {}): Uint8Array {
  const B = v.sequences.length;
  return writeSafeTensors(
    { sequences: tensor(dtype, v.sequences), action_mask: tensor(dtype, v.action_mask), attention_mask: tensor(dtype, v.attention_mask), ...override },
    { index: JSON.stringify(Array.from({ length: B }, (_, b) => b)), n_samples_per_prompt: '2', pad_token_id: '0', eos_token_id: '2' },
  );
}

const SAFETENSORS = [
  {
    name: 'verl',
    file: 'verl.safetensors',
    ids: verlIds,
    dump: verlDump as (dtype: IdDType, v: never, o?: Record<string, TensorOut>) => Uint8Array,
    /** Each id / mask tensor, its kind and its rows; the imported rows that must equal the originals. */
    tensors: (v: VerlIds) => ({ prompts: ['ids', v.prompts], responses: ['ids', v.responses], input_ids: ['ids', v.prompts.map((p, b) => [...p, ...v.responses[b]])], attention_mask: ['mask', v.attention_mask], response_mask: ['mask', v.response_mask] }) as Record<string, ['ids' | 'mask', number[][]]>,
    check: (v: VerlIds, batch: ReturnType<typeof importOne>) => {
      expect(batch.prompt_ids).toEqual(v.prompts);
      expect(batch.completion_ids).toEqual(v.responses);
      expect(batch.prompt_mask).toEqual(v.attention_mask.map((r) => r.slice(0, v.prompts[0].length)));
    },
  },
  {
    name: 'openrlhf',
    file: 'openrlhf.safetensors',
    ids: orlhfIds,
    dump: orlhfDump as (dtype: IdDType, v: never, o?: Record<string, TensorOut>) => Uint8Array,
    tensors: (v: OrlhfIds) => ({ sequences: ['ids', v.sequences], action_mask: ['mask', v.action_mask], attention_mask: ['mask', v.attention_mask] }) as Record<string, ['ids' | 'mask', number[][]]>,
    check: (v: OrlhfIds, batch: ReturnType<typeof importOne>) => {
      // Row b's prompt is every token before its first action, its completion the rest: together, the sequence.
      expect(batch.prompt_ids.map((p, b) => [...p, ...batch.completion_ids[b]])).toEqual(v.sequences);
      const T = v.sequences[0].length;
      const A = v.action_mask[0].length;
      batch.completion_ids.forEach((c, b) => {
        const first = v.action_mask[b].indexOf(1);
        expect(c).toEqual(v.sequences[b].slice(first < 0 ? T : T - A + first));
      });
      expect(batch.prompt_mask).toEqual(batch.prompt_ids.map((p, b) => v.attention_mask[b].slice(0, p.length)));
    },
  },
] as const;

describe.each(SAFETENSORS)('property (fast-check): random $name safetensors dumps in every id dtype', (fmt) => {
  it.each(DTYPES)('%s: valid dumps import with ids equal to the originals', (dtype) => {
    fc.assert(
      fc.property(fmt.ids(dtype), (v) => {
        const batch = importOne(fmt.file, fmt.dump(dtype, v as never));
        fmt.check(v as never, batch);
      }),
      { numRuns: RUNS },
    );
  });

  it.each(DTYPES)('%s: a planted bad id or mask value is refused, naming the first one by tensor, sample, position and value', (dtype) => {
    const cases = fmt.ids(dtype).chain((v) => {
      const tensors = fmt.tensors(v as never);
      const names = Object.keys(tensors).filter((k) => badFor(dtype, tensors[k][0]) !== undefined);
      return fc.constantFrom(...names).chain((key) => fc.record({ v: fc.constant(v), key: fc.constant(key), p: planting(badFor(dtype, tensors[key][0])!) }));
    });
    fc.assert(
      fc.property(cases, ({ v, key, p }) => {
        const [, rows] = fmt.tensors(v as never)[key];
        const { rows: bad, b, t, value } = plant(rows, p);
        const msg = refusal(() => importOne(fmt.file, fmt.dump(dtype, v as never, { [key]: tensor(dtype, bad) })));
        const want = `${fmt.file}: ${key}[${b}][${t}] (sample ${b}, position ${t}) = ${stored(dtype, value)} (dtype ${dtype}) `;
        expect(msg.startsWith(want), `${msg}\n  expected to start with\n${want}`).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });
});

// ---- JSON formats ----
/** A JSON list as Python's json writes it: NaN / Infinity as bare words. */
const pyList = (xs: readonly unknown[]) => `[${xs.map((x) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : JSON.stringify(x))).join(', ')}]`;
/** The value as a refusal should name it (NaN and ±Infinity as themselves, not JSON's null). */
const shown = (x: unknown) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : JSON.stringify(x));

const MAX_ID = 2 ** 31 - 1;
const jsonRows = fc.record({ B: fc.integer({ min: 1, max: 4 }) }).chain(({ B }) =>
  fc.array(
    fc.integer({ min: 1, max: 6 }).chain((L) =>
      fc.record({ ids: fc.array(idIn(MAX_ID), { minLength: L, maxLength: L }), mask: fc.array(fc.oneof(bit, fc.boolean()), { minLength: L, maxLength: L }), R: fc.integer({ min: 0, max: L }) }),
    ),
    { minLength: B, maxLength: B },
  ),
);
type JsonRow = { ids: unknown[]; mask: unknown[]; R: number };

/** JSON values that are not token ids / not int32 mask values (nonFinite: the reader takes Python's bare NaN / Infinity). */
function jsonBad(kind: 'ids' | 'mask', nonFinite: boolean): fc.Arbitrary<unknown> {
  const common = [
    fc.integer({ min: -(2 ** 20), max: 2 ** 20 }).map((x) => x + 0.5),
    fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true }).filter((x) => !Number.isInteger(x)),
    fc.string({ maxLength: 4 }),
    fc.integer({ min: 0, max: 99 }).map(String),
    fc.constant(null),
    fc.constant([] as unknown[]),
    ...(nonFinite ? [fc.constantFrom(NaN, Infinity, -Infinity)] : []),
  ];
  if (kind === 'ids') return fc.oneof(...common, fc.boolean(), fc.integer({ min: 2 ** 31, max: Number.MAX_SAFE_INTEGER }), fc.constantFrom(2 ** 31, 2 ** 32 + 40), fc.integer({ min: -(2 ** 40), max: -1 }));
  return fc.oneof(...common, fc.integer({ min: 2 ** 31, max: Number.MAX_SAFE_INTEGER }), fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: -(2 ** 31) - 1 }));
}

const num = (x: unknown) => (typeof x === 'boolean' ? +x : (x as number));

const JSON_FORMATS = [
  {
    name: 'prime-rl',
    file: 'rank_0.jsonl',
    nonFinite: false, // JSON.parse: a bare NaN is no JSON line (prime-rl's writer puts null for non-finite floats)
    keys: { ids: 'token_ids', mask: 'loss_mask' },
    write: (rows: JsonRow[]) => rows.map((r) => `{"schema_version": 1, "step": 3, "rank": 0, "token_ids": ${pyList(r.ids)}, "loss_mask": ${pyList(r.mask)}}`).join('\n') + '\n',
    where: (key: string, b: number, t: number) => `record ${b}: ${key}[${t}] (sample ${b}, position ${t})`,
  },
  {
    name: 'nemo-rl',
    file: 'train_data_step3.jsonl',
    nonFinite: true,
    keys: { ids: 'token_ids', mask: 'token_loss_mask' },
    write: (rows: JsonRow[]) => rows.map((r, i) => `{"token_ids": [${pyList(r.ids)}], "token_loss_mask": [${pyList(r.mask)}], "input_lengths": [${r.ids.length}], "rewards": [0.0], "idx": ${i}}`).join('\n') + '\n',
    where: (key: string, b: number, t: number) => `line ${b + 1}: ${key} (sample ${b})[${t}] (position ${t})`,
  },
  {
    name: 'slime',
    file: 'rollout_3.json',
    nonFinite: true,
    keys: { ids: 'tokens', mask: 'loss_mask' },
    // loss_mask covers the response (the last response_length tokens).
    write: (rows: JsonRow[]) => `{"rollout_id": 3, "samples": [${rows.map((r, b) => `{"group_index": ${b >> 1}, "index": ${b}, "tokens": ${pyList(r.ids)}, "response_length": ${r.R}, "loss_mask": ${pyList(r.mask.slice(0, r.R))}, "reward": 1.0}`).join(', ')}]}`,
    where: (key: string, b: number, t: number) => `samples[${b}].${key} (sample ${b})[${t}] (position ${t})`,
  },
] as const;

describe.each(JSON_FORMATS)('property (fast-check): random $name dumps, ids as JSON numbers', (fmt) => {
  it('valid dumps import with ids equal to the originals (and masks as 0 / 1, booleans read as numbers)', () => {
    fc.assert(
      fc.property(jsonRows, (rows) => {
        let batch: GrpoBatch;
        try {
          batch = importOne(fmt.file, enc(fmt.write(rows)));
        } catch (e) {
          // NeMo-RL: a row with no trained token whose prompt two other rows' prompts could be (one extends the
          // other) is refused in one line, never grouped by a guess.
          if (fmt.name === 'nemo-rl' && e instanceof BatchFormatError && /has no trained token/.test(e.message) && !e.message.includes('\n')) return;
          throw e;
        }
        expect(batch.prompt_ids.map((p, b) => [...p, ...batch.completion_ids[b]])).toEqual(rows.map((r) => r.ids));
        if (fmt.name === 'slime') expect(batch.completion_ids).toEqual(rows.map((r) => r.ids.slice(r.ids.length - r.R)));
        else {
          // prime-rl / NeMo-RL: the prompt is every token before the first trained one. A row with none: prime-rl's
          // prompt is all of it (up to the shorter of its ids and mask); NeMo-RL's is the prompt of a trained row that
          // begins it (its group's), else its whole ids.
          const P = rows.map((r) => r.mask.map(num).indexOf(1));
          rows.forEach((r, b) => {
            if (P[b] >= 0) expect(batch.prompt_ids[b]).toEqual(r.ids.slice(0, P[b]));
            else if (fmt.name === 'prime-rl') expect(batch.prompt_ids[b]).toEqual(r.ids.slice(0, Math.min(r.mask.length, r.ids.length)));
            else expect([r.ids.length, ...P.filter((p, c) => p >= 0 && p <= r.ids.length && rows[c].ids.slice(0, p).every((id, t) => id === r.ids[t]))]).toContain(batch.prompt_ids[b].length);
          });
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('a planted non-id (fraction, boolean, string, null, list, ≥ 2^31, negative, NaN / ±Infinity) is refused, naming the first', () => {
    const cases = jsonRows.chain((rows) =>
      fc.record({
        rows: fc.constant(rows),
        kind: fc.constantFrom('ids' as const, 'mask' as const),
        p: fc.record({ at: fc.uniqueArray(fc.nat(), { minLength: 1, maxLength: 3 }) }),
      }).chain(({ rows, kind, p }) => fc.record({ rows: fc.constant(rows), kind: fc.constant(kind), at: fc.constant(p.at), bad: fc.array(jsonBad(kind, fmt.nonFinite), { minLength: 3, maxLength: 3 }) })),
    );
    fc.assert(
      fc.property(cases, ({ rows, kind, at, bad }) => {
        // Positions over every record's list in order (slime's loss_mask: the response part only).
        const lists: unknown[][] = rows.map((r) => (kind === 'ids' ? [...r.ids] : fmt.name === 'slime' ? r.mask.slice(0, r.R) : [...r.mask]));
        const flat = lists.flatMap((l, b) => l.map((_, t) => [b, t] as const));
        if (flat.length === 0) return; // slime rows with no response: no loss_mask to plant in
        const spots = [...new Set(at.map((i) => i % flat.length))].sort((x, y) => x - y);
        spots.forEach((i, k) => (lists[flat[i][0]][flat[i][1]] = bad[k]));
        const planted = rows.map((r, b) => (kind === 'ids' ? { ...r, ids: lists[b] } : { ...r, mask: fmt.name === 'slime' ? [...lists[b], ...r.mask.slice(r.R)] : lists[b] }));
        const [b, t] = flat[spots[0]];
        const value = lists[b][t];
        const msg = refusal(() => importOne(fmt.file, enc(fmt.write(planted))));
        const want = `${fmt.file}: ${fmt.where(fmt.keys[kind], b, t)} = ${shown(value)} `;
        expect(msg.startsWith(want), `${msg}\n  expected to start with\n${want}`).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('NeMo-RL and slime: Python’s bare NaN / Infinity among ids and masks', () => {
  const nemo = (ids: string, mask = '[0, 1, 1]') => `{"token_ids": [${ids}], "token_loss_mask": [${mask}], "input_lengths": [3], "idx": 0}\n`;
  const slime = (ids: string, mask = '[1, 1]') => `{"rollout_id": 3, "samples": [{"group_index": 0, "tokens": ${ids}, "response_length": 2, "loss_mask": ${mask}, "reward": 1.0}]}`;
  const cases = (word: string) => [
    ['train_data_step3.jsonl', nemo(`[5, ${word}, 7]`), `train_data_step3.jsonl: line 1: token_ids (sample 0)[1] (position 1) = ${word} is not an integer`],
    ['train_data_step3.jsonl', nemo('[5, 6, 7]', `[0, 1, ${word}]`), `train_data_step3.jsonl: line 1: token_loss_mask (sample 0)[2] (position 2) = ${word} is not an integer`],
    ['rollout_3.json', slime(`[5, ${word}, 7]`), `rollout_3.json: samples[0].tokens (sample 0)[1] (position 1) = ${word} is not an integer`],
    ['rollout_3.json', slime('[5, 6, 7]', `[1, ${word}]`), `rollout_3.json: samples[0].loss_mask (sample 0)[1] (position 1) = ${word} is not an integer`],
  ] as const;

  it('are refused at the right sample and position', () => {
    for (const word of ['NaN', 'Infinity', '-Infinity']) {
      for (const [file, text, want] of cases(word)) {
        const msg = refusal(() => importOne(file, enc(text)));
        expect([want, want.replace(` = ${word} `, ' = null ')]).toContain(msg); // the value as written, or (known bug) null
      }
    }
  });

  // JSON.stringify would write NaN and ±Infinity as "null", which reads like a real null: the value as written.
  it('name the value as written (NaN, Infinity, -Infinity), not as "null"', () => {
    for (const word of ['NaN', 'Infinity', '-Infinity']) for (const [file, text, want] of cases(word)) expect(refusal(() => importOne(file, enc(text)))).toBe(want);
  });
});
