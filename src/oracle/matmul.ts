// Float64 twin of shaders/matmul_forward.wgsl / matmul_backward.wgsl: y = x·W' + b with W' = Wᵀ for
// nn.Linear [out, in] weights ('out_in') and W' = W for GPT-2 Conv1D [in, out] ('in_out'), and its
// three gradients; and scale_forward, the epilogue's scale (common/matmul.wgsl store_c).
export type WeightLayout = 'out_in' | 'in_out';

/** W'[k, n] of the weight in either layout. */
function weightAt(w: ArrayLike<number>, k: number, n: number, K: number, N: number, layout: WeightLayout): number {
  return layout === 'out_in' ? w[n * K + k] : w[k * N + n];
}

export function matmul_forward(
  inp: ArrayLike<number>, // (M, K)
  weight: ArrayLike<number>, // (N, K) 'out_in' | (K, N) 'in_out'
  bias: ArrayLike<number> | null, // (N)
  M: number,
  K: number,
  N: number,
  layout: WeightLayout,
): Float64Array {
  const out = new Float64Array(M * N); // (M, N)
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = bias ? bias[n] : 0;
      for (let k = 0; k < K; k++) s += inp[m * K + k] * weightAt(weight, k, n, K, N, layout);
      out[m * N + n] = s;
    }
  }
  return out;
}

export function matmul_backward(
  dout: ArrayLike<number>, // (M, N)
  inp: ArrayLike<number>, // (M, K)
  weight: ArrayLike<number>,
  M: number,
  K: number,
  N: number,
  layout: WeightLayout,
): { dinp: Float64Array; dweight: Float64Array; dbias: Float64Array } {
  const dinp = new Float64Array(M * K); // (M, K)
  const dweight = new Float64Array(N * K); // same layout as weight
  const dbias = new Float64Array(N); // (N)
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      const g = dout[m * N + n];
      dbias[n] += g;
      for (let k = 0; k < K; k++) {
        dinp[m * K + k] += g * weightAt(weight, k, n, K, N, layout);
        dweight[layout === 'out_in' ? n * K + k : k * N + n] += g * inp[m * K + k];
      }
    }
  }
  return { dinp, dweight, dbias };
}

/** The GEMM epilogue's scale (common/matmul.wgsl store_c: LoRA's scaling of x·Aᵀ and of dout·B): x·factor. */
export function scale_forward(x: ArrayLike<number>, factor: number): Float64Array {
  return Float64Array.from(x, (v) => v * factor);
}
