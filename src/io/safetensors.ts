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

export class SafeTensorsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SafeTensorsError';
  }
}

export function parseSafeTensors(bytes: Uint8Array, source = 'safetensors'): SafeTensors {
  if (bytes.byteLength < 8) throw new SafeTensorsError(`${source}: file too short (${bytes.byteLength} bytes) for a safetensors header`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(dv.getBigUint64(0, true));
  if (n <= 0 || 8 + n > bytes.byteLength) throw new SafeTensorsError(`${source}: header length ${n} does not fit in a ${bytes.byteLength}-byte file`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    throw new SafeTensorsError(`${source}: header is not valid JSON (${(e as Error).message})`);
  }
  const data = bytes.subarray(8 + n);
  const metadata = (header.__metadata__ ?? {}) as Record<string, string>;
  const tensors = new Map<string, TensorInfo>();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const t = v as TensorInfo;
    if (!t || !(t.dtype in ELEM_BYTES) || !Array.isArray(t.shape) || !Array.isArray(t.data_offsets)) {
      throw new SafeTensorsError(`${source}: tensor "${name}" has a malformed entry`);
    }
    const count = t.shape.reduce((a, b) => a * b, 1);
    const [s, e] = t.data_offsets;
    if (e - s !== count * ELEM_BYTES[t.dtype] || e > data.byteLength) {
      throw new SafeTensorsError(`${source}: tensor "${name}" (${t.dtype} ${JSON.stringify(t.shape)}) has offsets [${s}, ${e}] inconsistent with its size or the file`);
    }
    tensors.set(name, t);
  }
  return { metadata, tensors, data };
}

function view(st: SafeTensors, name: string): { info: TensorInfo; bytes: Uint8Array } {
  const info = st.tensors.get(name);
  if (!info) throw new SafeTensorsError(`missing tensor "${name}"`);
  return { info, bytes: st.data.subarray(info.data_offsets[0], info.data_offsets[1]) };
}

function aligned<T>(bytes: Uint8Array, size: number, make: (b: ArrayBufferLike, o: number, n: number) => T): T {
  const n = bytes.byteLength / size;
  if (bytes.byteOffset % size === 0) return make(bytes.buffer, bytes.byteOffset, n);
  const copy = bytes.slice();
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

/** Any integer tensor as i32. */
export function toI32(st: SafeTensors, name: string): Int32Array {
  const { info, bytes } = view(st, name);
  switch (info.dtype) {
    case 'I32':
      return aligned(bytes, 4, (b, o, n) => new Int32Array(b, o, n));
    case 'I64':
      return Int32Array.from(aligned(bytes, 8, (b, o, n) => new BigInt64Array(b, o, n)), (x) => Number(x));
    case 'I16':
      return Int32Array.from(aligned(bytes, 2, (b, o, n) => new Int16Array(b, o, n)));
    case 'I8':
      return Int32Array.from(new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    case 'U8':
    case 'BOOL':
      return Int32Array.from(bytes);
    default:
      throw new SafeTensorsError(`tensor "${name}" has dtype ${info.dtype}, expected an integer type`);
  }
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
