// Launchers for attention, llm.c style: batched GEMMs (matmul_forward.wgsl, one product per (b, head))
// around a row kernel: shaders/attention_forward.wgsl (masked softmax) and attention_backward.wgsl
// (softmax backward). Causal + attention mask + GQA (query head h reads kv head h / (Hq / Hkv)).
// The GEMMs skip the tiles the causal mask zeroes (CAUSAL modes of matmul_forward.wgsl).
// att (B, Hq, Tq, Tk) can pass the binding limit (B = 8, Hq = 16, T = 512 is 134 MB): every pass is
// dispatched per window of whole batches. A query row with no visible key (a left-pad row) gets
// out = 0, att row = 0 and lse = -inf.
//
// Signature additions to the brief (optional): `bindingLimit` (tests only). The backward's g scratch
// (dP, then the gradient of the raw scores, shaped like att) is a device-wide scratch (scratch.ts).
import { packParams, type Recorder, Gpu } from '../gpu/context.ts';
import { gemmDispatch } from './matmul.ts';
import type { AttentionBackwardShape, AttentionShape } from './types.ts';
import { sharedScratch } from './scratch.ts';
import { bindingLimit, checkSize, prefix, rowsPerWindow, rowWindow } from './windows.ts';

const WG = 128;

function checkHeads(kernel: string, Hq: number, Hkv: number, D: number): void {
  if (!(Hkv >= 1 && Hq % Hkv === 0)) throw new Error(`${kernel}: Hq (${Hq}) must be a multiple of Hkv (${Hkv})`);
  if (!(D >= 1)) throw new Error(`${kernel}: head_dim D must be positive, got ${D}`);
}

export function attention_forward(
  rec: Recorder,
  args: AttentionShape & {
    out: GPUBuffer; // (B, Tq, Hq, D)
    q: GPUBuffer; // (B, Tq, Hq, D)
    k: GPUBuffer; // (B, TkvMax, Hkv, D), rows [0, Tk) valid
    v: GPUBuffer; // (B, TkvMax, Hkv, D)
    attentionMask: GPUBuffer; // (B, Tk) i32, 1 = key visible
    att: GPUBuffer; // (B, Hq, Tq, Tk) probabilities, saved for the backward
    lse?: GPUBuffer; // (B, Hq, Tq) log-sum-exp of the scaled scores
    bindingLimit?: number; // tests only
  },
): void {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D } = args;
  const kernel = 'attention_forward';
  checkHeads(kernel, Hq, Hkv, D);
  if (!(Tq >= 1 && Tq <= Tk && Tk <= TkvMax)) throw new Error(`${kernel}: needs 1 <= Tq (${Tq}) <= Tk (${Tk}) <= TkvMax (${TkvMax})`);
  const gpu = rec.gpu;
  const out = prefix(gpu, kernel, 'out', args.out, B * Tq * Hq * D);
  const q = prefix(gpu, kernel, 'q', args.q, B * Tq * Hq * D);
  const k = prefix(gpu, kernel, 'k', args.k, B * TkvMax * Hkv * D);
  const v = prefix(gpu, kernel, 'v', args.v, B * TkvMax * Hkv * D);
  const mask = prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * Tk);
  const lse = args.lse ? prefix(gpu, kernel, 'lse', args.lse, B * Hq * Tq) : gpu.zeros(16);
  checkSize(kernel, 'att', args.att, B * Hq * Tq * Tk);
  const group = Hq / Hkv;
  const perWindow = rowsPerWindow(gpu, bindingLimit(gpu, args.bindingLimit), B, Hq * Tq * Tk);
  for (let b0 = 0; b0 < B; b0 += perWindow) {
    const bc = Math.min(perWindow, B - b0);
    const w = rowWindow(gpu, args.att, b0, bc, Hq * Tq * Tk);
    // Batch index z = (b − b0)·Hq + h for every product; operands move by (b − b0) and h (kv: h / group).
    const qLike = { ld: Hq * D, base: b0 * Tq * Hq * D, zo: Tq * Hq * D, zi: D };
    const kvLike = { ld: Hkv * D, base: b0 * TkvMax * Hkv * D, zo: TkvMax * Hkv * D, zi: D, div: group };
    const attW = { binding: w.binding, ld: Tk, base: w.base, zo: Hq * Tq * Tk, zi: Tq * Tk };
    const batch = { Z: bc * Hq, zInner: Hq };
    gemmDispatch(rec, `${kernel}:scores`, {
      a: { binding: q, ...qLike },
      b: { binding: k, ...kvLike, trans: true },
      c: attW,
      M: Tq,
      N: Tk,
      K: D,
      ...batch,
      accumulate: false,
      causal: { mode: 1, offset: Tk - Tq },
    });
    const rows = bc * Hq * Tq;
    rec.dispatch({
      kernel: `${kernel}:softmax`,
      shader: 'attention_forward',
      constants: { WG },
      bindings: [mask, w.binding, lse],
      params: packParams([
        ['u32', Tq], ['u32', Tk], ['u32', Hq], ['f32', args.scale],
        ['u32', b0], ['u32', w.base], ['u32', rows], ['u32', args.lse ? 1 : 0],
        ['f32', -Infinity],
      ]),
      workgroups: Gpu.grid(rows),
    });
    gemmDispatch(rec, `${kernel}:out`, {
      a: attW,
      b: { binding: v, ...kvLike },
      c: { binding: out, ...qLike },
      M: Tq,
      N: D,
      K: Tk,
      ...batch,
      accumulate: false,
      causal: { mode: 2, offset: Tk - Tq },
    });
  }
}

export function attention_backward(
  rec: Recorder,
  args: AttentionBackwardShape & {
    dq: GPUBuffer; // (B, T, Hq, D)
    dk: GPUBuffer; // (B, T, Hkv, D), summed over the query heads sharing each kv head
    dv: GPUBuffer; // (B, T, Hkv, D)
    dout: GPUBuffer; // (B, T, Hq, D)
    q: GPUBuffer; // (B, T, Hq, D)
    k: GPUBuffer; // (B, T, Hkv, D)
    v: GPUBuffer; // (B, T, Hkv, D)
    att: GPUBuffer; // (B, Hq, T, T) from attention_forward
    attentionMask?: GPUBuffer; // (B, T) i32: not needed (masked entries of att are 0), kept for the brief's signature
    bindingLimit?: number; // tests only
  },
): void {
  const { B, T, Hq, Hkv, D } = args;
  const kernel = 'attention_backward';
  checkHeads(kernel, Hq, Hkv, D);
  const gpu = rec.gpu;
  const [dq, dout, q] = (['dq', 'dout', 'q'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hq * D));
  const [dk, dv, k, v] = (['dk', 'dv', 'k', 'v'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hkv * D));
  checkSize(kernel, 'att', args.att, B * Hq * T * T);
  const g = sharedScratch(gpu, 'attention_backward:g', B * Hq * T * T * 4); // (B, Hq, T, T)
  const group = Hq / Hkv;
  const perWindow = rowsPerWindow(gpu, bindingLimit(gpu, args.bindingLimit), B, Hq * T * T);
  for (let b0 = 0; b0 < B; b0 += perWindow) {
    const bc = Math.min(perWindow, B - b0);
    const aw = rowWindow(gpu, args.att, b0, bc, Hq * T * T);
    const gw = rowWindow(gpu, g, b0, bc, Hq * T * T);
    // Per (b, h) products, z = (b − b0)·Hq + h.
    const qLike = { ld: Hq * D, base: b0 * T * Hq * D, zo: T * Hq * D, zi: D };
    const kvLike = { ld: Hkv * D, base: b0 * T * Hkv * D, zo: T * Hkv * D, zi: D, div: group };
    const scoreLike = { ld: T, zo: Hq * T * T, zi: T * T };
    const perHead = { Z: bc * Hq, zInner: Hq };
    gemmDispatch(rec, `${kernel}:dP`, {
      a: { binding: dout, ...qLike },
      b: { binding: v, ...kvLike, trans: true },
      c: { binding: gw.binding, base: gw.base, ...scoreLike },
      M: T,
      N: T,
      K: D,
      ...perHead,
      accumulate: false,
      causal: { mode: 1, offset: 0 },
    });
    const rows = bc * Hq * T;
    rec.dispatch({
      kernel: `${kernel}:softmax`,
      shader: 'attention_backward',
      constants: { WG },
      bindings: [aw.binding, gw.binding],
      params: packParams([['u32', T], ['f32', args.scale], ['u32', aw.base], ['u32', rows]]),
      workgroups: Gpu.grid(rows),
    });
    gemmDispatch(rec, `${kernel}:dq`, {
      a: { binding: gw.binding, base: gw.base, ...scoreLike },
      b: { binding: k, ...kvLike },
      c: { binding: dq, ...qLike },
      M: T,
      N: D,
      K: T,
      ...perHead,
      accumulate: false,
      causal: { mode: 2, offset: 0 },
    });
    // dk, dv per (b, kv head), z = (b − b0)·Hkv + kvh: the group's query heads r = h − kvh·group
    // accumulate in order. Rows of these products are keys, the inner dimension is queries.
    for (let r = 0; r < group; r++) {
      const perKv = { Z: bc * Hkv, zInner: Hkv, M: T, N: D, K: T, accumulate: r > 0, causal: { mode: 3 as const, offset: 0 } };
      const headOfGroup = { ld: Hq * D, base: b0 * T * Hq * D + r * D, zo: T * Hq * D, zi: group * D };
      const scoresOfGroup = { ld: T, zo: Hq * T * T, zi: group * T * T, trans: true };
      const kvOut = { ld: Hkv * D, base: b0 * T * Hkv * D, zo: T * Hkv * D, zi: D };
      gemmDispatch(rec, `${kernel}:dk`, {
        a: { binding: gw.binding, base: gw.base + r * T * T, ...scoresOfGroup },
        b: { binding: q, ...headOfGroup },
        c: { binding: dk, ...kvOut },
        ...perKv,
      });
      gemmDispatch(rec, `${kernel}:dv`, {
        a: { binding: aw.binding, base: aw.base + r * T * T, ...scoresOfGroup },
        b: { binding: dout, ...headOfGroup },
        c: { binding: dv, ...kvOut },
        ...perKv,
      });
    }
  }
}
