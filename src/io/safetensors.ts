// safetensors read/write (https://huggingface.co/docs/safetensors): u64 LE header length, JSON header,
// little-endian data. Used for checkpoints, golden fixtures and loss cases. Reading is zero-copy where
// the tensor's offset is aligned; F16/BF16 are widened to f32 on request (`toF32`).

export type DType = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

export interface TensorInfo {
  dtype: DType;
  shape: number[];
  data_offsets: [number, number];
}

export interface SafeTensors {
  metadata: Record<string, string>;
  tensors: Map<string, TensorInfo>;
  /** The raw bytes of the data section (after the header). */
  data: Uint8Array;
}

const ELEM_BYTES: Record<DType, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

/** A message fit for one terminal line: control and other non-printable characters (a binary header's bytes) escaped. */
const printable = (s: string): string => s.replace(/[\p{C}\u2028\u2029]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

export class SafeTensorsError extends Error {
  constructor(message: string) {
    super(printable(message));
    this.name = 'SafeTensorsError';
  }
}

/** The format's own bound on the header (safetensors: 100 MB); a larger u64 is a corrupt or hostile file. */
const MAX_HEADER_BYTES = 100_000_000;

const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;

/**
 * Reads the header and checks every entry against the file: a JSON object header, known dtypes, shapes of
 * non-negative integers, offsets inside the data section that cover exactly shape × dtype size, and no two
 * tensors sharing bytes. Anything else is a SafeTensorsError naming the tensor — never a zero-filled or
 * aliased tensor read as if it were data.
 */
export function parseSafeTensors(bytes: Uint8Array, source = 'safetensors'): SafeTensors {
  if (bytes.byteLength < 8) throw new SafeTensorsError(`${source}: file too short (${bytes.byteLength} bytes) for a safetensors header`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n64 = dv.getBigUint64(0, true);
  if (n64 === 0n || n64 > BigInt(Math.min(MAX_HEADER_BYTES, bytes.byteLength - 8))) {
    throw new SafeTensorsError(
      n64 === 0n ? `${source}: header length 0: no header`
        : n64 > BigInt(bytes.byteLength - 8) ? `${source}: header length ${n64} exceeds the file (${bytes.byteLength} bytes)`
        : `${source}: header length ${n64} exceeds the format's ${MAX_HEADER_BYTES}-byte bound`,
    );
  }
  const n = Number(n64);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    throw new SafeTensorsError(`${source}: header is not valid JSON (${(e as Error).message.split('\n')[0]})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) {
    throw new SafeTensorsError(`${source}: header must be a JSON object of tensors, got ${header === null ? 'null' : Array.isArray(header) ? 'an array' : typeof header}`);
  }
  const data = bytes.subarray(8 + n);
  const entries = header as Record<string, unknown>;
  const meta = entries.__metadata__ ?? {};
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta) || Object.values(meta).some((v) => typeof v !== 'string')) {
    throw new SafeTensorsError(`${source}: __metadata__ must be an object of strings`);
  }
  const tensors = new Map<string, TensorInfo>();
  for (const [name, v] of Object.entries(entries)) {
    if (name === '__metadata__') continue;
    const t = v as Partial<TensorInfo> | null;
    const bad = (what: string) => new SafeTensorsError(`${source}: tensor "${name}" ${what}`);
    if (!t || typeof t !== 'object') throw bad('has a malformed entry (expected {dtype, shape, data_offsets})');
    if (typeof t.dtype !== 'string' || !Object.hasOwn(ELEM_BYTES, t.dtype)) throw bad(`has unsupported dtype ${JSON.stringify(t.dtype)} (supported: ${Object.keys(ELEM_BYTES).join(', ')})`);
    if (!Array.isArray(t.shape) || !t.shape.every(isCount)) throw bad(`has shape ${JSON.stringify(t.shape)}: expected a list of non-negative integers`);
    const o = t.data_offsets;
    if (!Array.isArray(o) || o.length !== 2 || !isCount(o[0]) || !isCount(o[1]) || o[0] > o[1]) {
      throw bad(`has data_offsets ${JSON.stringify(o)}: expected [begin, end] with 0 ≤ begin ≤ end`);
    }
    const size = t.shape.reduce((a, b) => a * b, 1) * ELEM_BYTES[t.dtype];
    if (o[1] - o[0] !== size) throw bad(`(${t.dtype} ${JSON.stringify(t.shape)}) needs ${size} bytes but data_offsets [${o[0]}, ${o[1]}] hold ${o[1] - o[0]}`);
    if (o[1] > data.byteLength) throw new SafeTensorsError(`${source}: data truncated: tensor "${name}" needs bytes [${8 + n + o[0]}, ${8 + n + o[1]}), file has ${bytes.byteLength}`);
    tensors.set(name, { dtype: t.dtype, shape: t.shape, data_offsets: [o[0], o[1]] });
  }
  // No two tensors may share bytes: sorted by begin, each must start at or after the previous end.
  const spans = [...tensors].filter(([, t]) => t.data_offsets[1] > t.data_offsets[0]).sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]);
  for (let i = 1; i < spans.length; i++) {
    const [prev, p] = spans[i - 1];
    const [name, t] = spans[i];
    if (t.data_offsets[0] < p.data_offsets[1]) {
      throw new SafeTensorsError(`${source}: tensors "${prev}" [${p.data_offsets.join(', ')}] and "${name}" [${t.data_offsets.join(', ')}] overlap`);
    }
  }
  return { metadata: meta as Record<string, string>, tensors, data };
}

function view(st: SafeTensors, name: string): { info: TensorInfo; bytes: Uint8Array } {
  const info = st.tensors.get(name);
  if (!info) throw new SafeTensorsError(`missing tensor "${name}"`);
  return { info, bytes: st.data.subarray(info.data_offsets[0], info.data_offsets[1]) };
}

function aligned<T>(bytes: Uint8Array, size: number, make: (b: ArrayBufferLike, o: number, n: number) => T): T {
  const n = bytes.byteLength / size;
  if (bytes.byteOffset % size === 0) return make(bytes.buffer, bytes.byteOffset, n);
  // A real copy: on a Node Buffer (readFileSync), slice() is a view of the same memory, not a copy.
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return make(copy.buffer, 0, n);
}

/** A tensor's stored bytes (a view into the file's buffer). */
export function tensorBytes(st: SafeTensors, name: string): Uint8Array {
  return view(st, name).bytes;
}

/** bfloat16 bits → f32: the top 16 bits of an f32. */
export function bf16ToF32(bits: Uint16Array): Float32Array {
  const out = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = bits[i] << 16;
  return new Float32Array(out.buffer);
}

/** f32 → bfloat16 bits, round to nearest even (the inverse of bf16ToF32 on values a bf16 holds). */
export function f32ToBf16(x: Float32Array): Uint16Array {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const out = new Uint16Array(x.length);
  for (let i = 0; i < u.length; i++) out[i] = (u[i] + 0x7fff + ((u[i] >>> 16) & 1)) >>> 16;
  return out;
}

/** IEEE half bits → f32. */
export function f16ToF32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i];
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    out[i] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return out;
}

/** Any floating tensor as f32 (F32 zero-copy when aligned; F16/BF16/F64 converted). */
export function toF32(st: SafeTensors, name: string): Float32Array {
  const { info, bytes } = view(st, name);
  switch (info.dtype) {
    case 'F32':
      return aligned(bytes, 4, (b, o, n) => new Float32Array(b, o, n));
    case 'F64':
      return Float32Array.from(aligned(bytes, 8, (b, o, n) => new Float64Array(b, o, n)));
    case 'BF16':
      return bf16ToF32(aligned(bytes, 2, (b, o, n) => new Uint16Array(b, o, n)));
    case 'F16':
      return f16ToF32(aligned(bytes, 2, (b, o, n) => new Uint16Array(b, o, n)));
    default:
      throw new SafeTensorsError(`tensor "${name}" has dtype ${info.dtype}, expected a floating type`);
  }
}

/** Any floating tensor as f64 (for references). */
export function toF64(st: SafeTensors, name: string): Float64Array {
  const { info, bytes } = view(st, name);
  if (info.dtype === 'F64') return aligned(bytes, 8, (b, o, n) => new Float64Array(b, o, n));
  return Float64Array.from(toF32(st, name));
}

/** Any integer tensor as i32 (floating dtypes refused): a value outside int32 is an error naming its element, never a wrap. */
export function toI32(st: SafeTensors, name: string): Int32Array {
  const { info } = view(st, name);
  if (!INT_DTYPES.has(info.dtype)) throw new SafeTensorsError(`tensor "${name}" has dtype ${info.dtype}, expected an integer type`);
  return wholeNumbers(st, name, INT32_RANGE, (i, value, why) => {
    throw new SafeTensorsError(`tensor "${name}" (${info.dtype}) holds ${value} at flat index ${i} (element ${elementAt(info.shape, i) || '[]'}), which ${why}: ids and masks are read as int32`);
  });
}

const INT_DTYPES: ReadonlySet<DType> = new Set(['I64', 'I32', 'I16', 'I8', 'U8', 'BOOL']);

/**
 * Every integer of magnitude below 2^bits is held exactly by a floating dtype; from 2^bits on, neighbours
 * round together (F32: 16777217 is stored as 16777216; BF16: 1001 as 1000), so a value there may be a
 * rounded integer and cannot be known exact.
 */
export const EXACT_INT_BITS: Readonly<Partial<Record<DType, number>>> = { F64: 53, F32: 24, F16: 11, BF16: 8 };

/** The values a whole-number tensor may hold: [min, max] inclusive, and how a message names the range. */
export interface IntRange {
  min: number;
  max: number;
  /** e.g. "a token id in [0, 2^31)". */
  what: string;
}

export const INT32_RANGE: IntRange = { min: -(2 ** 31), max: 2 ** 31 - 1, what: 'an int32 in [-2^31, 2^31)' };
/**
 * What a token id is, in every container (safetensors tensors and carriers, JSON rows, grpo-batch/v1 files): an
 * integer in [0, 2^31). PyTorch holds ids as int64, but every real vocabulary is far below 2^31, and the studio
 * holds ids as Int32Array on the CPU and i32 / u32 on the GPU: an id at or beyond 2^31 cannot be a row of any
 * embedding, and taking it would mean wrapping it into another id. A file that holds one is refused (safetensors,
 * JSON rows: when read; grpo-batch/v1: by the validator, as for any id outside a known vocabulary).
 */
export const TOKEN_ID_RANGE: IntRange = { min: 0, max: 2 ** 31 - 1, what: 'a token id in [0, 2^31)' };

/** The one test of a token id (TOKEN_ID_RANGE), for values already read as numbers. */
export const isTokenId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= TOKEN_ID_RANGE.min && x <= TOKEN_ID_RANGE.max;

/** "[b][t]" of flat index i in a tensor of this shape ("" for a scalar). */
export function elementAt(shape: readonly number[], i: number): string {
  if (shape.length === 0) return '';
  const idx: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    const n = shape[d] || 1;
    idx.unshift(i % n);
    i = Math.floor(i / n);
  }
  return idx.map((x) => `[${x}]`).join('');
}

/**
 * A tensor of whole numbers (ids, masks) as i32, read exactly or not at all. Integer dtypes are taken as
 * stored (I64 from its full 64 bits); a floating dtype only when every value is a finite integer of
 * magnitude below 2^EXACT_INT_BITS[dtype] (beyond, it may be a rounded integer). Every value must lie in
 * `range`. The first element that fails goes to `bad(flatIndex, value as text, why)`, which throws.
 */
export function wholeNumbers(st: SafeTensors, name: string, range: IntRange, bad: (i: number, value: string, why: string) => never): Int32Array {
  const { info, bytes } = view(st, name);
  const outside = `is not ${range.what}`;
  if (info.dtype === 'I64') {
    // Little-endian 32-bit words (no BigInt per element): a value fits int32 when its high word is its low word's sign.
    const words = aligned(bytes, 4, (b, o, n) => new Int32Array(b, o, n));
    const out = new Int32Array(words.length / 2);
    for (let i = 0; i < out.length; i++) {
      const lo = words[2 * i];
      if (words[2 * i + 1] !== lo >> 31 || lo < range.min || lo > range.max) bad(i, String(aligned(bytes.subarray(8 * i, 8 * i + 8), 8, (b, o) => new BigInt64Array(b, o, 1))[0]), outside);
      out[i] = lo;
    }
    return out;
  }
  if (INT_DTYPES.has(info.dtype)) {
    const src =
      info.dtype === 'I32' ? aligned(bytes, 4, (b, o, n) => new Int32Array(b, o, n))
      : info.dtype === 'I16' ? aligned(bytes, 2, (b, o, n) => new Int16Array(b, o, n))
      : info.dtype === 'I8' ? new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      : bytes;
    for (let i = 0; i < src.length; i++) if (src[i] < range.min || src[i] > range.max) bad(i, String(src[i]), outside);
    return Int32Array.from(src);
  }
  const bits = EXACT_INT_BITS[info.dtype]!;
  const limit = 2 ** bits;
  const f = info.dtype === 'F64' ? toF64(st, name) : toF32(st, name);
  const out = new Int32Array(f.length);
  for (let i = 0; i < f.length; i++) {
    const x = f[i];
    if (!Number.isInteger(x)) bad(i, String(x), 'is not an integer');
    if (Math.abs(x) >= limit) bad(i, String(x), `is at or beyond 2^${bits} = ${limit}, where ${info.dtype} no longer holds every integer: it may be a rounded value (save ids and masks as int64 or int32)`);
    if (x < range.min || x > range.max) bad(i, String(x), outside);
    out[i] = x;
  }
  return out;
}

export function shapeOf(st: SafeTensors, name: string): number[] {
  return view(st, name).info.shape;
}

export interface TensorOut {
  dtype: 'F32' | 'F64' | 'I64' | 'I32' | 'BF16' | 'F16';
  shape: number[];
  data: Float32Array | Float64Array | BigInt64Array | Int32Array | Uint16Array;
}

/** Serialises tensors (largest element size first, so every offset stays aligned) with string metadata. */
export function writeSafeTensors(tensors: Record<string, TensorOut>, metadata: Record<string, string> = {}): Uint8Array {
  const names = Object.keys(tensors).sort((a, b) => ELEM_BYTES[tensors[b].dtype] - ELEM_BYTES[tensors[a].dtype] || (a < b ? -1 : 1));
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header.__metadata__ = metadata;
  let off = 0;
  for (const n of names) {
    const t = tensors[n];
    const len = t.data.byteLength;
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count * ELEM_BYTES[t.dtype] !== len) throw new SafeTensorsError(`tensor "${n}": shape ${JSON.stringify(t.shape)} does not match ${len} bytes of ${t.dtype}`);
    header[n] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + len] };
    off += len;
  }
  const raw = new TextEncoder().encode(JSON.stringify(header));
  const hb = new Uint8Array(raw.byteLength + ((8 - ((8 + raw.byteLength) % 8)) % 8)).fill(0x20); // pad with spaces
  hb.set(raw);
  const out = new Uint8Array(8 + hb.byteLength + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(hb.byteLength), true);
  out.set(hb, 8);
  let p = 8 + hb.byteLength;
  for (const n of names) {
    const d = tensors[n].data;
    out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), p);
    p += d.byteLength;
  }
  return out;
}
