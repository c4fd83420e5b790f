// Launchers for shaders/rope_forward.wgsl: RoPE in place on (N, H, D) queries and, in the same dispatch,
// (N, Hk, D) keys, and its backward (the same shader rotating by the opposite angle). The per-frequency fixed-point turn table the shader
// needs (see its header) is computed here in float64 and cached per device, theta, head_dim and
// rope_scaling (linear, llama3: the inverse frequencies as HF's modeling_rope_utils.py computes them).
import { Gpu, type Recorder } from '../gpu/context.ts';
import type { RopeScaling } from './types.ts';
import { sharedScratch } from './scratch.ts';
import { prefix } from './windows.ts';

const WG = 256;
const tables = new WeakMap<Gpu, Map<string, GPUBuffer>>();

/** inv_freq[i] = theta^(-2i/D), rescaled per `scaling` (HF _compute_linear_scaling / _compute_llama3_parameters). */
export function ropeInvFreq(D: number, theta: number, scaling?: RopeScaling | null): Float64Array {
  const inv = Float64Array.from({ length: D / 2 }, (_, i) => Math.pow(theta, (-2 * i) / D));
  if (!scaling) return inv;
  if (scaling.rope_type === 'linear') return inv.map((f) => f / scaling.factor);
  const { factor, low_freq_factor: lo, high_freq_factor: hi, original_max_position_embeddings: ctx } = scaling;
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < ctx / hi) return f; // high frequency: unchanged
    if (wavelen > ctx / lo) return f / factor; // low frequency: interpolated by factor
    const smooth = (ctx / wavelen - lo) / (hi - lo);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}

/** inv_freq[i] / 2π turns per position, as 64-bit fixed point (hi, lo) u32 pairs. */
export function ropeTurnTable(D: number, theta: number, scaling?: RopeScaling | null): Uint32Array {
  const out = new Uint32Array(D); // (D/2, 2)
  const inv = ropeInvFreq(D, theta, scaling);
  for (let i = 0; i < D / 2; i++) {
    const scaled = (inv[i] / (2 * Math.PI)) * 2 ** 32; // < 2³², exact scaling
    const hi = Math.floor(scaled);
    out[2 * i] = hi;
    out[2 * i + 1] = Math.floor((scaled - hi) * 2 ** 32); // the 53-bit mantissa's remaining bits
  }
  return out;
}

function table(gpu: Gpu, D: number, theta: number, scaling?: RopeScaling | null): GPUBuffer {
  let m = tables.get(gpu);
  if (!m) tables.set(gpu, (m = new Map()));
  const key = `${D}:${theta}:${JSON.stringify(scaling ?? null)}`;
  let b = m.get(key);
  if (!b) m.set(key, (b = gpu.upload(`rope turns ${key}`, ropeTurnTable(D, theta, scaling))));
  return b;
}

/** The arguments the forward and the backward share. */
export interface RopeShape {
  positionIds: GPUBuffer; // (N) i32
  N: number; // rows (tokens)
  H: number; // heads
  D: number; // head_dim, even
  theta: number; // rope_theta
  scaling?: RopeScaling | null; // config.json rope_scaling (null / absent: none)
}

/** A second tensor rotated by the same dispatch: the keys (N, Hk, D) beside the queries. */
interface RopeKeys {
  k?: GPUBuffer;
  Hk?: number;
}

function rope(rec: Recorder, kernel: string, sign: 1 | -1, x: GPUBuffer, s: RopeShape, y: RopeKeys): void {
  const { N, H, D } = s;
  if (D % 2 !== 0) throw new Error(`${kernel}: head_dim D must be even, got ${D}`);
  if ((y.k === undefined) !== (y.Hk === undefined)) throw new Error(`${kernel}: the second tensor needs both its buffer and its head count (Hk)`);
  const HY = y.Hk ?? 0;
  if (y.k === x) throw new Error(`${kernel}: the two tensors must be different buffers`);
  const gpu = rec.gpu;
  rec.dispatch({
    kernel,
    shader: 'rope_forward',
    constants: { WG, SIGN: sign },
    bindings: {
      x: prefix(gpu, kernel, 'x', x, N * H * D),
      // No keys: a stand-in of its own (a read_write binding; the shared zeros other kernels read must never be one).
      y: y.k ? prefix(gpu, kernel, sign > 0 ? 'k' : 'dk', y.k, N * HY * D) : sharedScratch(gpu, 'rope:no_keys', 16),
      position_ids: prefix(gpu, kernel, 'positionIds', s.positionIds, N),
      freq: table(gpu, D, s.theta, s.scaling),
    },
    params: [['N', 'u32', N], ['H', 'u32', H], ['HY', 'u32', HY], ['D', 'u32', D]],
    workgroups: Gpu.grid(Math.ceil((N * (H + HY) * D) / 2 / WG)),
    work: { bytes: 4 * (2 * N * (H + HY) * D + N) }, // the rotated tensors read and written in place, the positions read (the table is cached)
  });
}

/** Rotates x (N, H, D) in place, and k (N, Hk, D) in the same dispatch when given (the queries and the keys). */
export function rope_forward(rec: Recorder, args: RopeShape & { x: GPUBuffer /* (N, H, D), rotated in place */ } & RopeKeys): void {
  rope(rec, 'rope_forward', 1, args.x, args, { k: args.k, Hk: args.Hk });
}

/** The transpose of rope_forward on the gradients: dx (N, H, D) and dk (N, Hk, D) when given, in place. */
export function rope_backward(rec: Recorder, args: RopeShape & { dx: GPUBuffer /* (N, H, D): d(rotated) in, d(input) out, in place */; dk?: GPUBuffer; Hk?: number }): void {
  rope(rec, 'rope_backward', -1, args.dx, args, { k: args.dk, Hk: args.Hk });
}
