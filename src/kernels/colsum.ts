// Launcher for shaders/colsum_forward.wgsl: out (C) = or += the column sums of inp (P, C).
// Used as the second pass of the layernorm/rmsnorm weight-gradient reductions (rows summed in a fixed
// order: deterministic, no float atomics) and usable for any bias gradient.
import { Gpu, type Binding, type Recorder } from '../gpu/context.ts';
import { checkSize } from './windows.ts';

const WG = 256;

export function colsum_forward(
  rec: Recorder,
  args: {
    out: Binding; // (C)
    inp: Binding; // (P, C)
    P: number;
    C: number;
    accumulate: boolean; // out += colsum instead of out = colsum
  },
): void {
  checkSize('colsum_forward', 'inp', args.inp, args.P * args.C);
  checkSize('colsum_forward', 'out', args.out, args.C);
  rec.dispatch({
    kernel: 'colsum_forward',
    shader: 'colsum_forward',
    constants: { WG },
    bindings: { inp: args.inp, out: args.out },
    params: [['P', 'u32', args.P], ['C', 'u32', args.C], ['accumulate', 'u32', args.accumulate ? 1 : 0]],
    workgroups: Gpu.grid(Math.ceil(args.C / WG)),
  });
}

/**
 * Rows per partial for an (N, C) weight-gradient reduction: at least 16 so short batches make one
 * chunk, and at most ~256 chunks so the colsum pass stays short. Depends only on N: deterministic.
 */
export function rowsPerPartial(N: number): number {
  return Math.max(16, Math.ceil(N / 256));
}
