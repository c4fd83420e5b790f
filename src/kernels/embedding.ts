// Launchers for shaders/embedding_forward.wgsl (lookup, + GPT-2 learned positions) and the two-pass
// deterministic scatter-add backward (embedding_backward_links.wgsl, embedding_backward.wgsl).
// wte / dwte bigger than the binding limit are processed in row windows (one dispatch per window).
//
// Signature additions to the brief (optional): `P` (rows of wpe; default: wpe's byte size / (4·C))
// and `bindingLimit` (tests only). Ids are clamped to [0, V) and positions to [0, P) on the GPU: the
// caller validates them and reports the offending sample and position.
import { Gpu, type Binding, type Recorder } from '../gpu/context.ts';
import type { WeightDtype } from './matmul.ts';
import { sharedScratch } from './scratch.ts';
import { bindingLimit, checkSize, prefix, rowsPerWindow, rowWindow } from './windows.ts';

const WG = 256;

/** Rows of a position table (wpe / dwpe): P, or what its buffer holds. */
function positionsRows(kernel: string, table: GPUBuffer, positionIds: GPUBuffer | undefined, C: number, P?: number): number {
  if (!positionIds) throw new Error(`${kernel}: a position table (wpe) needs positionIds`);
  const rows = P ?? Math.floor(table.size / (4 * C));
  checkSize(kernel, 'wpe', table, rows * C);
  return rows;
}

export function embedding_forward(
  rec: Recorder,
  args: {
    out: GPUBuffer; // (N, C)
    ids: GPUBuffer; // (N) i32
    wte: GPUBuffer; // (V, C)
    wpe?: GPUBuffer; // (P, C)
    positionIds?: GPUBuffer; // (N) i32, needed with wpe
    N: number;
    C: number;
    V: number;
    P?: number;
    wteDtype?: WeightDtype; // bf16: packed (a frozen model in its checkpoint dtype)
    bindingLimit?: number; // tests only
  },
): void {
  const { N, C, V } = args;
  const kernel = 'embedding_forward';
  const gpu = rec.gpu;
  const bf16 = args.wteDtype === 'bf16';
  const eb = bf16 ? 2 : 4;
  checkSize(kernel, 'wte', args.wte, V * C, eb);
  const out = prefix(gpu, kernel, 'out', args.out, N * C);
  const ids = prefix(gpu, kernel, 'ids', args.ids, N);
  const dummy = gpu.zeros(16);
  const P = args.wpe ? positionsRows(kernel, args.wpe, args.positionIds, C, args.P) : 1;
  const wpe = args.wpe ? prefix(gpu, kernel, 'wpe', args.wpe, P * C) : dummy;
  const positionIds = args.wpe ? prefix(gpu, kernel, 'positionIds', args.positionIds!, N) : dummy;
  const rows = rowsPerWindow(gpu, bindingLimit(gpu, args.bindingLimit), V, C, eb);
  for (let row0 = 0; row0 < V; row0 += rows) {
    const w = rowWindow(gpu, args.wte, row0, Math.min(rows, V - row0), C, eb);
    rec.dispatch({
      kernel,
      shader: 'embedding_forward',
      constants: { WG, WTE_BF16: bf16 },
      bindings: { ids, wte: w.binding, position_ids: positionIds, wpe, out },
      params: [
        ['N', 'u32', N], ['C', 'u32', C], ['V', 'u32', V], ['P', 'u32', P],
        ['row0', 'u32', row0], ['rows', 'u32', Math.min(rows, V - row0)], ['wte_base', 'u32', w.base], ['has_wpe', 'u32', args.wpe ? 1 : 0],
      ],
      workgroups: Gpu.grid(Math.ceil((N * C) / WG)),
    });
  }
}

/** dtable (rows, C) (+)= scatter of dout rows by ids. */
function scatter(rec: Recorder, kernel: string, dtable: GPUBuffer, idsBuf: GPUBuffer, dout: Binding, N: number, C: number, rows: number, accumulate: boolean, limit?: number): void {
  const gpu = rec.gpu;
  const ids = prefix(gpu, kernel, 'ids', idsBuf, N);
  const links = prefix(gpu, kernel, 'links', sharedScratch(gpu, 'embedding_backward:links', N * 4), N); // (N) u32
  if (!accumulate) rec.clear(dtable, 0, rows * C * 4);
  rec.dispatch({
    kernel: `${kernel}:links`,
    shader: 'embedding_backward_links',
    constants: { WG },
    bindings: { ids, links },
    params: [['N', 'u32', N], ['V', 'u32', rows]],
    workgroups: Gpu.grid(Math.ceil(N / WG)),
  });
  const per = rowsPerWindow(gpu, bindingLimit(gpu, limit), rows, C);
  for (let row0 = 0; row0 < rows; row0 += per) {
    const count = Math.min(per, rows - row0);
    const w = rowWindow(gpu, dtable, row0, count, C);
    rec.dispatch({
      kernel,
      shader: 'embedding_backward',
      constants: { WG },
      bindings: { ids, links, dout, dtable: w.binding },
      params: [['N', 'u32', N], ['C', 'u32', C], ['V', 'u32', rows], ['row0', 'u32', row0], ['rows', 'u32', count], ['base', 'u32', w.base]],
      workgroups: Gpu.grid(Math.ceil((N * C) / WG)),
    });
  }
}

export function embedding_backward(
  rec: Recorder,
  args: {
    dwte: GPUBuffer; // (V, C)
    dwpe?: GPUBuffer; // (P, C)
    dout: GPUBuffer; // (N, C)
    ids: GPUBuffer; // (N) i32
    positionIds?: GPUBuffer; // (N) i32, needed with dwpe
    N: number;
    C: number;
    V: number;
    P?: number;
    accumulate: boolean; // dwte += ..., dwpe += ... (tied wte: lm_head's gradient is already in dwte)
    bindingLimit?: number; // tests only
  },
): void {
  const { N, C, V } = args;
  const kernel = 'embedding_backward';
  const dout = prefix(rec.gpu, kernel, 'dout', args.dout, N * C);
  checkSize(kernel, 'dwte', args.dwte, V * C);
  scatter(rec, `${kernel}:dwte`, args.dwte, args.ids, dout, N, C, V, args.accumulate, args.bindingLimit);
  if (args.dwpe) {
    const P = positionsRows(kernel, args.dwpe, args.positionIds, C, args.P);
    scatter(rec, `${kernel}:dwpe`, args.dwpe, args.positionIds!, dout, N, C, P, args.accumulate, args.bindingLimit);
  }
}
