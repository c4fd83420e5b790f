// Launcher for shaders/colsum_forward.wgsl: out (C) = scale·(the column sums of inp (P, C)) (+ out) (+ add).
// The second pass of the deterministic reductions (rows summed in a fixed order, no float atomics): the
// layernorm/rmsnorm weight gradients, attention's split dk / dv, and the GEMM's split-K slices, which it
// finishes with the GEMM's epilogue (scale, accumulate, add: src/kernels/matmul.ts).
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
    scale?: number; // the sums' factor, before out and add are added (default 1)
    add?: Binding; // (C) added last (a split GEMM's residual stream)
  },
): void {
  checkSize('colsum_forward', 'inp', args.inp, args.P * args.C);
  checkSize('colsum_forward', 'out', args.out, args.C);
  if (args.add) checkSize('colsum_forward', 'add', args.add, args.C);
  rec.dispatch({
    kernel: 'colsum_forward',
    shader: 'colsum_forward',
    constants: { WG },
    bindings: { inp: args.inp, out: args.out, add: args.add ?? rec.gpu.zeros(16) },
    params: [['P', 'u32', args.P], ['C', 'u32', args.C], ['accumulate', 'u32', args.accumulate ? 1 : 0], ['has_add', 'u32', args.add ? 1 : 0], ['scale', 'f32', args.scale ?? 1]],
    workgroups: Gpu.grid(Math.ceil(args.C / WG)),
    work: { bytes: 4 * (args.P * args.C + args.C * (args.accumulate ? 2 : 1) + (args.add ? args.C : 0)) },
  });
}

/**
 * Rows per partial for an (N, C) weight-gradient reduction: at least 16 so short batches make one
 * chunk, and at most ~256 chunks so the colsum pass stays short. Depends only on N: deterministic.
 */
export function rowsPerPartial(N: number): number {
  return Math.max(16, Math.ceil(N / 256));
}
