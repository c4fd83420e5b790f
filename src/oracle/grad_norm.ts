// Float64 twins of shaders/sumsq_forward.wgsl and shaders/scale_forward.wgsl.
export function sumsq_forward(inp: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < inp.length; i++) s += inp[i] * inp[i];
  return s;
}

export function scale_forward(x: ArrayLike<number>, factor: number): Float64Array {
  return Float64Array.from(x, (v) => v * factor);
}
