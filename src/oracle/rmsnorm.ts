// Float64 twin of shaders/rmsnorm_{forward,backward}.wgsl: out = weight * x / sqrt(mean(x^2) + eps).
type Arr = ArrayLike<number>;

export function rmsnorm_forward(inp: Arr, weight: Arr, N: number, C: number, eps: number) {
  const out = new Float64Array(N * C); // (N, C)
  const rstd = new Float64Array(N); // (N)
  for (let n = 0; n < N; n++) {
    const x = n * C;
    let ss = 0;
    for (let i = 0; i < C; i++) ss += inp[x + i] ** 2;
    const r = 1 / Math.sqrt(ss / C + eps);
    for (let i = 0; i < C; i++) out[x + i] = weight[i] * inp[x + i] * r;
    rstd[n] = r;
  }
  return { out, rstd };
}

/** Gradients of sum(out * dout) given the forward's rstd. */
export function rmsnorm_backward(dout: Arr, inp: Arr, weight: Arr, rstd: Arr, N: number, C: number) {
  const dinp = new Float64Array(N * C); // (N, C)
  const dweight = new Float64Array(C); // (C)
  for (let n = 0; n < N; n++) {
    const x = n * C;
    const r = rstd[n];
    let s = 0;
    for (let i = 0; i < C; i++) {
      s += weight[i] * dout[x + i] * inp[x + i];
      dweight[i] += dout[x + i] * inp[x + i] * r;
    }
    const k = (r * r * s) / C;
    for (let i = 0; i < C; i++) dinp[x + i] = r * (weight[i] * dout[x + i] - inp[x + i] * k);
  }
  return { dinp, dweight };
}
