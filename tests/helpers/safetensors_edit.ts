// A safetensors file rewritten with a metadata patch and tensors replaced, added or removed, every other
// tensor's raw bytes kept as written (any dtype, BOOL included): for tests that vary one fact of a fixture.
export type RawTensor = { dtype: string; shape: number[]; data: Uint8Array };

export function editSafetensors(bytes: Uint8Array, meta: Record<string, string | undefined> = {}, tensors: Record<string, RawTensor | undefined> = {}): Uint8Array {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as Record<string, unknown>;
  const data = bytes.subarray(8 + n);
  const out: [string, RawTensor][] = [];
  for (const [k, v] of Object.entries(header)) {
    if (k === '__metadata__' || k in tensors) continue;
    const t = v as { dtype: string; shape: number[]; data_offsets: [number, number] };
    out.push([k, { dtype: t.dtype, shape: t.shape, data: data.subarray(t.data_offsets[0], t.data_offsets[1]) }]);
  }
  for (const [k, v] of Object.entries(tensors)) if (v) out.push([k, v]);
  const metadata: Record<string, string> = { ...((header.__metadata__ as Record<string, string>) ?? {}) };
  for (const [k, v] of Object.entries(meta)) {
    if (v === undefined) delete metadata[k];
    else metadata[k] = v;
  }
  // Widest elements first keeps every offset aligned.
  const width = (t: RawTensor) => t.data.byteLength / Math.max(1, t.shape.reduce((a, b) => a * b, 1));
  out.sort((a, b) => width(b[1]) - width(a[1]));
  const h: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  for (const [k, v] of out) {
    h[k] = { dtype: v.dtype, shape: v.shape, data_offsets: [off, off + v.data.byteLength] };
    off += v.data.byteLength;
  }
  const raw = new TextEncoder().encode(JSON.stringify(h));
  const hb = new Uint8Array(raw.byteLength + ((8 - ((8 + raw.byteLength) % 8)) % 8)).fill(0x20);
  hb.set(raw);
  const res = new Uint8Array(8 + hb.byteLength + off);
  new DataView(res.buffer).setBigUint64(0, BigInt(hb.byteLength), true);
  res.set(hb, 8);
  let p = 8 + hb.byteLength;
  for (const [, v] of out) {
    res.set(v.data, p);
    p += v.data.byteLength;
  }
  return res;
}

/** A 0-d tensor of one value. */
export const scalarTensor = (dtype: 'F32' | 'F64', x: number): RawTensor => ({ dtype, shape: [], data: new Uint8Array((dtype === 'F32' ? new Float32Array([x]) : new Float64Array([x])).buffer) });
