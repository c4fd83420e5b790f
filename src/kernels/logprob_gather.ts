// Launchers for shaders/logprob_gather_{forward,backward}.wgsl: per-row log-prob of the target token,
// split log-sum-exp and entropy from logits (N, V), and the gradient back to the logits. [N, V] buffers
// bigger than maxStorageBufferBindingSize go out as several dispatches over row windows (splitRows).
import { Gpu, GpuError, packParams, splitRows, type Recorder, type RowChunk } from '../gpu/context.ts';

export type LogitsDtype = 'f32' | 'f16';

const ELEM_BYTES: Record<LogitsDtype, number> = { f32: 4, f16: 2 };
const DEFAULT_WG = 256;

/** The aligned byte window of rows [rowStart, rowStart + rowCount) of a (rows, rowElems) array. */
function rowWindow(gpu: Gpu, rowStart: number, rowCount: number, rowElems: number, elemBytes: number): RowChunk {
  const align = gpu.limits.minStorageBufferOffsetAlignment;
  const start = rowStart * rowElems * elemBytes;
  const byteOffset = Math.floor(start / align) * align;
  const end = start + rowCount * rowElems * elemBytes;
  return { rowStart, rowCount, byteOffset, byteSize: Math.ceil((end - byteOffset) / 4) * 4, elemBase: (start - byteOffset) / elemBytes };
}

function checkWg(kernel: string, wg: number): void {
  if (!(wg >= 1 && (wg & (wg - 1)) === 0)) throw new GpuError('unsupported', kernel, `workgroup size ${wg} must be a power of two`);
}

export function logprob_gather_forward(
  rec: Recorder,
  args: {
    logits: GPUBuffer; // (N, V) f32, or f16 when dtype = 'f16'
    dtype?: LogitsDtype;
    ids: GPUBuffer; // (N) i32
    mask: GPUBuffer; // (N) i32
    logp: GPUBuffer; // (N) f32, written
    lse: GPUBuffer; // (N, 2) f32, written: max z, log Σ exp(z − max)
    entropy: GPUBuffer; // (N) f32, written
    N: number;
    V: number;
    temperature: number;
    /** Rows with mask 0 write zeros without reading their logits (default true). */
    skipMasked?: boolean;
    wg?: number;
  },
): void {
  const dtype = args.dtype ?? 'f32';
  const WG = args.wg ?? DEFAULT_WG;
  checkWg('logprob_gather_forward', WG);
  for (const c of splitRows(rec.gpu, args.N, args.V, ELEM_BYTES[dtype])) {
    rec.dispatch({
      kernel: 'logprob_gather_forward',
      shader: 'logprob_gather_forward',
      constants: { WG, F16: dtype === 'f16' },
      bindings: [{ buffer: args.logits, offset: c.byteOffset, size: c.byteSize }, args.ids, args.mask, args.logp, args.lse, args.entropy],
      params: packParams([
        ['u32', c.rowStart],
        ['u32', c.rowCount],
        ['u32', args.V],
        ['u32', c.elemBase],
        ['f32', 1 / args.temperature],
        ['u32', args.skipMasked === false ? 0 : 1],
      ]),
      workgroups: Gpu.grid(c.rowCount),
    });
  }
}

export function logprob_gather_backward(
  rec: Recorder,
  args: {
    logits: GPUBuffer; // (N, V) f32, or f16 when dtype = 'f16'
    dtype?: LogitsDtype;
    ids: GPUBuffer; // (N) i32
    mask: GPUBuffer; // (N) i32
    lse: GPUBuffer; // (N, 2) from the forward
    dlogp: GPUBuffer; // (N)
    /** (N, V) f32, written; 'in-place' overwrites the (f32) logits with their gradient. */
    dlogits: GPUBuffer | 'in-place';
    N: number;
    V: number;
    temperature: number;
    wg?: number;
  },
): void {
  const dtype = args.dtype ?? 'f32';
  const inPlace = args.dlogits === 'in-place';
  if (inPlace && dtype !== 'f32') throw new GpuError('unsupported', 'logprob_gather_backward', 'in-place dlogits needs f32 logits');
  const WG = args.wg ?? DEFAULT_WG;
  checkWg('logprob_gather_backward', WG);
  const dlogits = inPlace ? args.logits : (args.dlogits as GPUBuffer);
  // Rows are split by the f32 dlogits; the (smaller or equal) logits window covers the same rows.
  for (const c of splitRows(rec.gpu, args.N, args.V, 4)) {
    const w = rowWindow(rec.gpu, c.rowStart, c.rowCount, args.V, ELEM_BYTES[dtype]);
    rec.dispatch({
      kernel: 'logprob_gather_backward',
      shader: 'logprob_gather_backward',
      constants: { WG, F16: dtype === 'f16', IN_PLACE: inPlace },
      bindings: [
        inPlace ? rec.gpu.zeros(16) : { buffer: args.logits, offset: w.byteOffset, size: w.byteSize },
        args.ids,
        args.mask,
        args.lse,
        args.dlogp,
        { buffer: dlogits, offset: c.byteOffset, size: c.byteSize },
      ],
      params: packParams([
        ['u32', c.rowStart],
        ['u32', c.rowCount],
        ['u32', args.V],
        ['u32', w.elemBase],
        ['u32', c.elemBase],
        ['f32', 1 / args.temperature],
      ]),
      workgroups: Gpu.grid(c.rowCount),
    });
  }
}
