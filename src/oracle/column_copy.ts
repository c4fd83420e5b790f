// Float64 twin of shaders/column_copy_forward.wgsl: dst[:, dstCol : dstCol + cols] = src[:, srcCol : srcCol + cols].
// In place on `dst` (the columns outside the block keep their values), like the GPU kernel.
export function column_copy_forward(
  dst: Float64Array, // (rows, dstLd)
  src: ArrayLike<number>, // (rows, srcLd)
  rows: number,
  cols: number,
  srcLd: number,
  srcCol: number,
  dstLd: number,
  dstCol: number,
): void {
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) dst[r * dstLd + dstCol + c] = src[r * srcLd + srcCol + c];
  }
}
