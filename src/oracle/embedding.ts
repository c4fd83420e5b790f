// Float64 twin of shaders/embedding_forward.wgsl and the embedding backward (scatter-add):
// out[n] = wte[ids[n]] (+ wpe[position_ids[n]]), ids clamped to [0, V) and positions to [0, P) as the
// GPU does (the caller validates them).
const clampIdx = (x: number, rows: number) => Math.min(Math.max(x, 0), rows - 1);

export function embedding_forward(
  ids: ArrayLike<number>, // (N)
  wte: ArrayLike<number>, // (V, C)
  wpe: ArrayLike<number> | null, // (P, C)
  positionIds: ArrayLike<number> | null, // (N)
  N: number,
  C: number,
  V: number,
  P = 0,
): Float64Array {
  const out = new Float64Array(N * C); // (N, C)
  for (let n = 0; n < N; n++) {
    const id = clampIdx(ids[n], V);
    const pos = wpe && positionIds ? clampIdx(positionIds[n], P) : -1;
    for (let c = 0; c < C; c++) out[n * C + c] = wte[id * C + c] + (pos >= 0 ? wpe![pos * C + c] : 0);
  }
  return out;
}

export function embedding_backward(
  dout: ArrayLike<number>, // (N, C)
  ids: ArrayLike<number>, // (N)
  positionIds: ArrayLike<number> | null, // (N)
  N: number,
  C: number,
  V: number,
  P = 0,
): { dwte: Float64Array; dwpe: Float64Array } {
  const dwte = new Float64Array(V * C); // (V, C)
  const dwpe = new Float64Array(P * C); // (P, C)
  for (let n = 0; n < N; n++) {
    const id = clampIdx(ids[n], V);
    const pos = positionIds && P > 0 ? clampIdx(positionIds[n], P) : -1;
    for (let c = 0; c < C; c++) {
      dwte[id * C + c] += dout[n * C + c];
      if (pos >= 0) dwpe[pos * C + c] += dout[n * C + c];
    }
  }
  return { dwte, dwpe };
}
