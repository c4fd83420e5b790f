// Launcher for shaders/loss_reduce_forward.wgsl: every aggregation of the per-token loss and the clip
// counts in one single-workgroup launch. Output layout: STATS below.
import { packParams, type Recorder } from '../gpu/context.ts';

/** Slots of the (16) f32 output after the AGGREGATIONS (0..7). */
export const STATS = { tokens: 8, sequences: 9, low: 10, high: 11, region: 12, delta_binding: 13, size: 16 } as const;

const WG = 256;

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
  },
): void {
  rec.dispatch({
    kernel: 'loss_reduce_forward',
    shader: 'loss_reduce_forward',
    constants: { WG },
    bindings: [args.loss, args.mask, args.clip, args.out],
    params: packParams([
      ['u32', args.B],
      ['u32', args.T],
      ['f32', args.max_completion_length],
      ['f32', args.num_items_in_batch ?? 0],
    ]),
    workgroups: [1],
  });
}
