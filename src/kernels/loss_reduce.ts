// Launcher for shaders/loss_reduce_forward.wgsl: every aggregation of the per-token loss and the clip
// counts in one single-workgroup launch. Output layout: STATS below.
import { workgroupCap, type Recorder } from '../gpu/context.ts';
import { bindAll } from './windows.ts';

/** Slots of the (16) f32 output after the AGGREGATIONS (0..7). */
export const STATS = { tokens: 8, sequences: 9, low: 10, high: 11, region: 12, delta_binding: 13, size: 16 } as const;

const WG = 256; // fewer where the adapter caps it (workgroupCap)

/** Threads per sequence: about 16 tokens each, a power of two in [1, WG] (and within the workgroup the adapter gives). */
export function lanesFor(T: number): number {
  let lanes = 1;
  while (lanes < WG && lanes * 16 < T) lanes *= 2;
  return lanes;
}

export function loss_reduce_forward(
  rec: Recorder,
  args: {
    loss: GPUBuffer; // (B, T)
    mask: GPUBuffer; // (B, T) i32
    clip: GPUBuffer; // (B, T) u32
    out: GPUBuffer; // (16) written
    B: number;
    T: number;
    max_completion_length: number;
    num_items_in_batch?: number;
    loss_scale_factor?: number; // verl seq-mean-token-sum-norm; default T
    lanes?: number; // threads per sequence (tests force 1 and WG); default lanesFor(T)
  },
): void {
  const wg = Math.min(WG, workgroupCap(rec.gpu.adapter));
  rec.dispatch({
    kernel: 'loss_reduce_forward',
    shader: 'loss_reduce_forward',
    constants: { WG: wg, LANES: Math.min(wg, args.lanes ?? lanesFor(args.T)) },
    bindings: bindAll(rec.gpu, 'loss_reduce_forward', {
      loss: [args.loss, args.B * args.T], mask: [args.mask, args.B * args.T], clip: [args.clip, args.B * args.T], out: [args.out, STATS.size],
    }),
    params: [
      ['B', 'u32', args.B],
      ['T', 'u32', args.T],
      ['max_completion_length', 'f32', args.max_completion_length],
      ['num_items_in_batch', 'f32', args.num_items_in_batch ?? 0],
      ['loss_scale_factor', 'f32', args.loss_scale_factor ?? args.T],
    ],
    workgroups: [1],
  });
}
