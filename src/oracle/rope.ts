// Float64 twin of shaders/rope_forward.wgsl (Hugging Face rotate-half RoPE): dims i and i + D/2 of each
// head rotate by angle position_ids[n] · inv_freq[i]; the backward rotates by the opposite angle.
// inv_freq follows HF modeling_rope_utils.py, written out here on its own (the oracle for
// src/kernels/rope.ts ropeInvFreq): default theta^(-2i/D); 'linear' divides by factor; 'llama3' (HF
// _compute_llama3_parameters) masks by wavelength: long waves / factor, short waves kept, the band in
// between blended by smooth = (old_context_len / wavelen − low_freq_factor) / (high − low).
import type { RopeScaling } from '../kernels/types.ts';

export function rope_inv_freq(D: number, theta: number, scaling: RopeScaling | null = null): Float64Array {
  const half = D / 2;
  const out = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const base = 1 / Math.pow(theta, (2 * i) / D);
    if (!scaling) out[i] = base;
    else if (scaling.rope_type === 'linear') out[i] = base / scaling.factor;
    else {
      const lowWavelen = scaling.original_max_position_embeddings / scaling.low_freq_factor;
      const highWavelen = scaling.original_max_position_embeddings / scaling.high_freq_factor;
      const wavelen = (2 * Math.PI) / base;
      const llama = wavelen > lowWavelen ? base / scaling.factor : base;
      const smooth = (scaling.original_max_position_embeddings / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
      const smoothed = ((1 - smooth) * llama) / scaling.factor + smooth * llama;
      const medium = !(wavelen < highWavelen) && !(wavelen > lowWavelen);
      out[i] = medium ? smoothed : llama;
    }
  }
  return out;
}

function rotate(x: ArrayLike<number>, positionIds: ArrayLike<number>, N: number, H: number, D: number, inv: Float64Array, sign: number): Float64Array {
  const out = Float64Array.from(x); // (N, H, D)
  const half = D / 2;
  for (let n = 0; n < N; n++) {
    for (let i = 0; i < half; i++) {
      const angle = positionIds[n] * inv[i];
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

export function rope_forward(x: ArrayLike<number>, positionIds: ArrayLike<number>, N: number, H: number, D: number, theta: number, scaling: RopeScaling | null = null): Float64Array {
  return rotate(x, positionIds, N, H, D, rope_inv_freq(D, theta, scaling), 1);
}

/** d(input) from d(output): the transpose of the rotation. */
export function rope_backward(dout: ArrayLike<number>, positionIds: ArrayLike<number>, N: number, H: number, D: number, theta: number, scaling: RopeScaling | null = null): Float64Array {
  return rotate(dout, positionIds, N, H, D, rope_inv_freq(D, theta, scaling), -1);
}
