// Float64 twin of shaders/layernorm_{forward,backward}.wgsl (GPT-2 LayerNorm, biased variance, as torch).
type Arr = ArrayLike<number>;

export function layernorm_forward(inp: Arr, weight: Arr, bias: Arr, N: number, C: number, eps: number) {
  const out = new Float64Array(N * C); // (N, C)
  const mean = new Float64Array(N); // (N)
  const rstd = new Float64Array(N); // (N)
  for (let n = 0; n < N; n++) {
    const x = n * C;
    let m = 0;
    for (let i = 0; i < C; i++) m += inp[x + i];
    m /= C;
    let v = 0;
    for (let i = 0; i < C; i++) v += (inp[x + i] - m) ** 2;
    const r = 1 / Math.sqrt(v / C + eps);
    for (let i = 0; i < C; i++) out[x + i] = (inp[x + i] - m) * r * weight[i] + bias[i];
    mean[n] = m;
    rstd[n] = r;
  }
  return { out, mean, rstd };
}

/** Gradients of sum(out * dout) given the forward's mean and rstd. */
export function layernorm_backward(dout: Arr, inp: Arr, weight: Arr, mean: Arr, rstd: Arr, N: number, C: number) {
  const dinp = new Float64Array(N * C); // (N, C)
  const dweight = new Float64Array(C); // (C)
  const dbias = new Float64Array(C); // (C)
  for (let n = 0; n < N; n++) {
    const x = n * C;
    let a = 0;
    let b = 0;
    for (let i = 0; i < C; i++) {
      const norm = (inp[x + i] - mean[n]) * rstd[n];
      const dnorm = weight[i] * dout[x + i];
      a += dnorm;
      b += dnorm * norm;
      dweight[i] += dout[x + i] * norm;
      dbias[i] += dout[x + i];
    }
    a /= C;
    b /= C;
    for (let i = 0; i < C; i++) {
      const norm = (inp[x + i] - mean[n]) * rstd[n];
      dinp[x + i] = rstd[n] * (weight[i] * dout[x + i] - a - norm * b);
    }
  }
  return { dinp, dweight, dbias };
}
