// Launchers for shaders/logprob_gather_{forward,backward}.wgsl: per-row log-prob of the target token,
// split log-sum-exp and entropy from logits (N, V), and the gradient back to the logits. [N, V] buffers
// bigger than maxStorageBufferBindingSize go out as several dispatches over row windows (windows.ts).
import { Gpu, GpuError, workgroupCap, type Binding, type Recorder } from '../gpu/context.ts';
import { bindingLimit, checkSize, prefix, rowsPerWindow, rowWindow } from './windows.ts';

export type LogitsDtype = 'f32' | 'f16';

const ELEM_BYTES: Record<LogitsDtype, number> = { f32: 4, f16: 2 };
const DEFAULT_WG = 256;

/** The logits rows and their targets: the arguments the forward and the backward share. */
export interface GatherRows {
  logits: GPUBuffer; // (N, V) f32, or f16 when dtype = 'f16'
  dtype?: LogitsDtype;
  ids: GPUBuffer; // (N) i32
  mask: GPUBuffer; // (N) i32
  N: number;
  V: number;
  temperature: number;
  wg?: number; // threads per row, a power of two (default 256, or the adapter's workgroupCap)
}

/** Validates the shared arguments (errors name the kernel and the field) and binds ids and mask. */
function checkRows(kernel: string, gpu: Gpu, a: GatherRows): { dtype: LogitsDtype; WG: number; ids: Binding; mask: Binding } {
  const dtype = a.dtype ?? 'f32';
  const WG = a.wg ?? Math.min(DEFAULT_WG, workgroupCap(gpu.adapter));
  if (!(WG >= 1 && (WG & (WG - 1)) === 0)) throw new GpuError('unsupported', kernel, `workgroup size ${WG} must be a power of two`);
  if (!(a.temperature > 0 && Number.isFinite(a.temperature))) throw new Error(`${kernel}: temperature must be a positive number, got ${a.temperature}`);
  checkSize(kernel, 'logits', a.logits, a.N * a.V, ELEM_BYTES[dtype]);
  return { dtype, WG, ids: prefix(gpu, kernel, 'ids', a.ids, a.N), mask: prefix(gpu, kernel, 'mask', a.mask, a.N) };
}

export function logprob_gather_forward(
  rec: Recorder,
  args: GatherRows & {
    logp: GPUBuffer; // (N) f32, written
    lse: GPUBuffer; // (N, 2) f32, written: max z, log Σ exp(z − max)
    entropy: GPUBuffer; // (N) f32, written
    /** Rows with mask 0 write zeros without reading their logits (default true). */
    skipMasked?: boolean;
  },
): void {
  const kernel = 'logprob_gather_forward';
  const gpu = rec.gpu;
  const { N, V } = args;
  const { dtype, WG, ids, mask } = checkRows(kernel, gpu, args);
  const outs = { logp: prefix(gpu, kernel, 'logp', args.logp, N), lse: prefix(gpu, kernel, 'lse', args.lse, 2 * N), entropy: prefix(gpu, kernel, 'entropy', args.entropy, N) };
  const eb = ELEM_BYTES[dtype];
  const per = rowsPerWindow(gpu, bindingLimit(gpu), N, V, eb);
  for (let r0 = 0; r0 < N; r0 += per) {
    const rc = Math.min(per, N - r0);
    const w = rowWindow(gpu, args.logits, r0, rc, V, eb);
    rec.dispatch({
      kernel,
      shader: 'logprob_gather_forward',
      constants: { WG, F16: dtype === 'f16' },
      bindings: { logits: w.binding, ids, mask, ...outs },
      params: [
        ['row_start', 'u32', r0],
        ['rows', 'u32', rc],
        ['V', 'u32', V],
        ['elem_base', 'u32', w.base],
        ['inv_temperature', 'f32', 1 / args.temperature],
        ['skip_masked', 'u32', args.skipMasked === false ? 0 : 1],
      ],
      workgroups: Gpu.grid(rc),
      // The rows' logits read once (masked rows too: the mask is the GPU's to read), ids and mask read, logp, lse (2) and entropy written.
      work: { bytes: eb * rc * V + 4 * rc * 6 },
    });
  }
}

export function logprob_gather_backward(
  rec: Recorder,
  args: GatherRows & {
    lse: GPUBuffer; // (N, 2) from the forward
    dlogp: GPUBuffer; // (N)
    /** (N, V) f32, written; 'in-place' overwrites the (f32) logits with their gradient. */
    dlogits: GPUBuffer | 'in-place';
    /** ∂loss/∂entropy per row (entropy bonuses) with the forward's entropy; absent: no entropy term. */
    dentropy?: { dentropy: GPUBuffer; entropy: GPUBuffer } | null; // (N), (N)
  },
): void {
  const kernel = 'logprob_gather_backward';
  const gpu = rec.gpu;
  const { N, V } = args;
  const { dtype, WG, ids, mask } = checkRows(kernel, gpu, args);
  const inPlace = args.dlogits === 'in-place';
  if (inPlace && dtype !== 'f32') throw new GpuError('unsupported', kernel, 'in-place dlogits needs f32 logits');
  const dlogits = inPlace ? args.logits : (args.dlogits as GPUBuffer);
  if (!inPlace) checkSize(kernel, 'dlogits', dlogits, N * V);
  const lse = prefix(gpu, kernel, 'lse', args.lse, 2 * N);
  const dlogp = prefix(gpu, kernel, 'dlogp', args.dlogp, N);
  const ent = args.dentropy
    ? { dentropy: prefix(gpu, kernel, 'dentropy', args.dentropy.dentropy, N), entropy: prefix(gpu, kernel, 'entropy', args.dentropy.entropy, N) }
    : { dentropy: gpu.zeros(16), entropy: gpu.zeros(16) };
  // Rows are split by the f32 dlogits; the (smaller or equal) logits window covers the same rows.
  const per = rowsPerWindow(gpu, bindingLimit(gpu), N, V);
  for (let r0 = 0; r0 < N; r0 += per) {
    const rc = Math.min(per, N - r0);
    const lw = rowWindow(gpu, args.logits, r0, rc, V, ELEM_BYTES[dtype]);
    const dw = rowWindow(gpu, dlogits, r0, rc, V);
    rec.dispatch({
      kernel,
      shader: 'logprob_gather_backward',
      constants: { WG, F16: dtype === 'f16', IN_PLACE: inPlace, ENTROPY: !!args.dentropy },
      bindings: { logits: inPlace ? gpu.zeros(16) : lw.binding, ids, mask, lse, dlogp, dlogits: dw.binding, ...ent },
      params: [
        ['row_start', 'u32', r0],
        ['rows', 'u32', rc],
        ['V', 'u32', V],
        ['elem_base', 'u32', lw.base],
        ['dlogits_base', 'u32', dw.base],
        ['inv_temperature', 'f32', 1 / args.temperature],
      ],
      workgroups: Gpu.grid(rc),
      // The rows' logits read and their gradient written (in place: the same f32 rows), ids, mask, lse (2), dlogp (and the entropy terms) read.
      work: { bytes: ELEM_BYTES[dtype] * rc * V + 4 * rc * V + 4 * rc * (args.dentropy ? 7 : 5) },
    });
  }
}
