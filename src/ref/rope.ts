// Float64 twin of shaders/rope_forward.wgsl (Hugging Face rotate-half RoPE): dims i and i + D/2 of each
// head rotate by angle position_ids[n] · theta^(-2i/D); the backward rotates by the opposite angle.
function rotate(x: ArrayLike<number>, positionIds: ArrayLike<number>, N: number, H: number, D: number, theta: number, sign: number): Float64Array {
  const out = Float64Array.from(x); // (N, H, D)
  const half = D / 2;
  for (let n = 0; n < N; n++) {
    for (let i = 0; i < half; i++) {
      const angle = positionIds[n] * Math.pow(theta, (-2 * i) / D);
      const c = Math.cos(angle);
      const s = sign * Math.sin(angle);
      for (let h = 0; h < H; h++) {
        const j = (n * H + h) * D + i;
        const x1 = x[j];
        const x2 = x[j + half];
        out[j] = x1 * c - x2 * s;
        out[j + half] = x2 * c + x1 * s;
      }
    }
  }
  return out;
}

export function rope_forward(x: ArrayLike<number>, positionIds: ArrayLike<number>, N: number, H: number, D: number, theta: number): Float64Array {
  return rotate(x, positionIds, N, H, D, theta, 1);
}

/** d(input) from d(output): the transpose of the rotation. */
export function rope_backward(dout: ArrayLike<number>, positionIds: ArrayLike<number>, N: number, H: number, D: number, theta: number): Float64Array {
  return rotate(dout, positionIds, N, H, D, theta, -1);
}
