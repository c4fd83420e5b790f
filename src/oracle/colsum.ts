// Float64 twin of shaders/colsum_forward.wgsl: the column sums of a (P, C) matrix.
export function colsum_forward(inp: ArrayLike<number>, P: number, C: number): Float64Array {
  const out = new Float64Array(C);
  for (let r = 0; r < P; r++) for (let j = 0; j < C; j++) out[j] += inp[r * C + j];
  return out;
}
