// Float64 twin of shaders/residual_{forward,backward}.wgsl: out = a + b, and dst += src.
type Arr = ArrayLike<number>;

export function residual_forward(a: Arr, b: Arr): Float64Array {
  return Float64Array.from(a, (x, i) => x + b[i]);
}

/** The residual's backward: the incoming gradient added into an existing one (returns dst + src). */
export function residual_accumulate(dst: Arr, src: Arr): Float64Array {
  return residual_forward(dst, src);
}
