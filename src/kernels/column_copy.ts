// Launcher for shaders/column_copy_forward.wgsl: dst[:, dstCol : dstCol + cols] = src[:, srcCol : srcCol + cols]
// over row-major matrices with their own row lengths. The model uses it to split GPT-2's fused c_attn
// output (N, 3C) into q, k, v and, in backward, to merge dq, dk, dv into dqkv. Matrices bigger than one
// storage binding go in row blocks.
import { Gpu, type Recorder } from '../gpu/context.ts';
import { bindingLimit, checkSize, rowsPerWindow, rowWindow } from './windows.ts';

const WG = 256;

export function column_copy_forward(
  rec: Recorder,
  args: {
    dst: GPUBuffer; // (rows, dstLd)
    src: GPUBuffer; // (rows, srcLd)
    rows: number;
    cols: number;
    srcLd: number;
    srcCol: number;
    dstLd: number;
    dstCol: number;
  },
): void {
  const { rows, cols, srcLd, srcCol, dstLd, dstCol } = args;
  if (srcCol + cols > srcLd || dstCol + cols > dstLd) {
    throw new Error(`column_copy_forward: columns [${srcCol}, ${srcCol + cols}) → [${dstCol}, ${dstCol + cols}) exceed row lengths ${srcLd} / ${dstLd}`);
  }
  checkSize('column_copy_forward', 'src', args.src, rows * srcLd);
  checkSize('column_copy_forward', 'dst', args.dst, rows * dstLd);
  const gpu = rec.gpu;
  const limit = bindingLimit(gpu);
  const block = Math.min(rowsPerWindow(gpu, limit, rows, srcLd), rowsPerWindow(gpu, limit, rows, dstLd));
  for (let r0 = 0; r0 < rows; r0 += block) {
    const rc = Math.min(block, rows - r0);
    const s = rowWindow(gpu, args.src, r0, rc, srcLd);
    const d = rowWindow(gpu, args.dst, r0, rc, dstLd);
    rec.dispatch({
      kernel: 'column_copy_forward',
      shader: 'column_copy_forward',
      constants: { WG },
      bindings: { src: s.binding, dst: d.binding },
      params: [
        ['rows', 'u32', rc], ['cols', 'u32', cols],
        ['src_base', 'u32', s.base], ['src_ld', 'u32', srcLd], ['src_col', 'u32', srcCol],
        ['dst_base', 'u32', d.base], ['dst_ld', 'u32', dstLd], ['dst_col', 'u32', dstCol],
      ],
      workgroups: Gpu.grid(Math.ceil((rc * cols) / WG)),
    });
  }
}
