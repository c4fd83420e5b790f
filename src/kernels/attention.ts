// Launchers for shaders/attention_forward.wgsl (causal + attention mask + GQA, saved probabilities)
// and the two-pass backward (attention_backward_dq.wgsl, then attention_backward_dkv.wgsl).
// att (B, Hq, Tq, Tk) can pass the binding limit (B = 8, Hq = 16, T = 512 is 134 MB): every pass is
// dispatched per window of whole batches. A query row with no visible key (a left-pad row) gets
// out = 0, att row = 0 and lse = -inf.
//
// Signature additions to the brief (optional): `bindingLimit` (tests only). The backward's g scratch
// (gradient of the scaled scores, shaped like att) is owned here and cached per device.
import { packParams, type Recorder, Gpu } from '../gpu/context.ts';
import { bindingLimit, checkSize, rowsPerWindow, rowWindow } from './windows.ts';

function checkHeads(kernel: string, Hq: number, Hkv: number, D: number): void {
  if (!(Hkv >= 1 && Hq % Hkv === 0)) throw new Error(`${kernel}: Hq (${Hq}) must be a multiple of Hkv (${Hkv})`);
  if (!(D >= 1)) throw new Error(`${kernel}: head_dim D must be positive, got ${D}`);
}

/** Workgroup width: the row loops are over keys and channels; 64 covers D <= 64 in one sweep. */
const wgFor = (D: number) => (D <= 64 ? 64 : 128);

export function attention_forward(
  rec: Recorder,
  args: {
    out: GPUBuffer; // (B, Tq, Hq, D)
    q: GPUBuffer; // (B, Tq, Hq, D)
    k: GPUBuffer; // (B, TkvMax, Hkv, D), rows [0, Tk) valid
    v: GPUBuffer; // (B, TkvMax, Hkv, D)
    attentionMask: GPUBuffer; // (B, Tk) i32, 1 = key visible
    att: GPUBuffer; // (B, Hq, Tq, Tk) probabilities, saved for the backward
    lse?: GPUBuffer; // (B, Hq, Tq) log-sum-exp of the scaled scores
    B: number;
    Tq: number;
    Tk: number;
    TkvMax: number;
    Hq: number;
    Hkv: number;
    D: number;
    scale: number;
    bindingLimit?: number; // tests only
  },
): void {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D } = args;
  const kernel = 'attention_forward';
  checkHeads(kernel, Hq, Hkv, D);
  if (!(Tq >= 1 && Tq <= Tk && Tk <= TkvMax)) throw new Error(`${kernel}: needs 1 <= Tq (${Tq}) <= Tk (${Tk}) <= TkvMax (${TkvMax})`);
  checkSize(kernel, 'out', args.out, B * Tq * Hq * D);
  checkSize(kernel, 'q', args.q, B * Tq * Hq * D);
  checkSize(kernel, 'k', args.k, B * TkvMax * Hkv * D);
  checkSize(kernel, 'v', args.v, B * TkvMax * Hkv * D);
  checkSize(kernel, 'attentionMask', args.attentionMask, B * Tk);
  checkSize(kernel, 'att', args.att, B * Hq * Tq * Tk);
  if (args.lse) checkSize(kernel, 'lse', args.lse, B * Hq * Tq);
  const gpu = rec.gpu;
  const WG = wgFor(D);
  const perWindow = rowsPerWindow(gpu, bindingLimit(gpu, args.bindingLimit), B, Hq * Tq * Tk);
  for (let b0 = 0; b0 < B; b0 += perWindow) {
    const bc = Math.min(perWindow, B - b0);
    const w = rowWindow(gpu, args.att, b0, bc, Hq * Tq * Tk);
    const rows = bc * Hq * Tq;
    rec.dispatch({
      kernel,
      shader: 'attention_forward',
      constants: { WG, D },
      bindings: [args.q, args.k, args.v, args.attentionMask, args.out, w.binding, args.lse ?? gpu.zeros(16)],
      params: packParams([
        ['u32', Tq], ['u32', Tk], ['u32', TkvMax], ['u32', Hq],
        ['u32', Hkv], ['f32', args.scale], ['u32', b0], ['u32', w.base],
        ['u32', rows], ['u32', args.lse ? 1 : 0], ['f32', -Infinity],
      ]),
      workgroups: Gpu.grid(rows),
    });
  }
}

const gScratch = new WeakMap<Gpu, GPUBuffer>();

function scratch(gpu: Gpu, elems: number): GPUBuffer {
  let b = gScratch.get(gpu);
  if (!b || b.size < elems * 4) {
    b = gpu.createBuffer('attention_backward:g', elems * 4);
    gScratch.set(gpu, b);
  }
  return b;
}

export function attention_backward(
  rec: Recorder,
  args: {
    dq: GPUBuffer; // (B, T, Hq, D)
    dk: GPUBuffer; // (B, T, Hkv, D), summed over the query heads sharing each kv head
    dv: GPUBuffer; // (B, T, Hkv, D)
    dout: GPUBuffer; // (B, T, Hq, D)
    q: GPUBuffer; // (B, T, Hq, D)
    k: GPUBuffer; // (B, T, Hkv, D)
    v: GPUBuffer; // (B, T, Hkv, D)
    att: GPUBuffer; // (B, Hq, T, T) from attention_forward
    attentionMask: GPUBuffer; // (B, T) i32
    B: number;
    T: number;
    Hq: number;
    Hkv: number;
    D: number;
    scale: number;
    bindingLimit?: number; // tests only
  },
): void {
  const { B, T, Hq, Hkv, D } = args;
  const kernel = 'attention_backward';
  checkHeads(kernel, Hq, Hkv, D);
  for (const f of ['dq', 'dout', 'q'] as const) checkSize(kernel, f, args[f], B * T * Hq * D);
  for (const f of ['dk', 'dv', 'k', 'v'] as const) checkSize(kernel, f, args[f], B * T * Hkv * D);
  checkSize(kernel, 'att', args.att, B * Hq * T * T);
  checkSize(kernel, 'attentionMask', args.attentionMask, B * T);
  const gpu = rec.gpu;
  const g = scratch(gpu, B * Hq * T * T);
  const perWindow = rowsPerWindow(gpu, bindingLimit(gpu, args.bindingLimit), B, Hq * T * T);
  for (let b0 = 0; b0 < B; b0 += perWindow) {
    const bc = Math.min(perWindow, B - b0);
    const aw = rowWindow(gpu, args.att, b0, bc, Hq * T * T);
    const gw = rowWindow(gpu, g, b0, bc, Hq * T * T); // same layout: same base as aw
    const rows = bc * Hq * T;
    rec.dispatch({
      kernel: `${kernel}:dq`,
      shader: 'attention_backward_dq',
      constants: { WG: wgFor(D), D },
      bindings: [args.dout, args.k, args.v, aw.binding, gw.binding, args.dq],
      params: packParams([['u32', T], ['u32', Hq], ['u32', Hkv], ['f32', args.scale], ['u32', b0], ['u32', aw.base], ['u32', rows]]),
      workgroups: Gpu.grid(rows),
    });
    const kvRows = bc * T * Hkv;
    rec.dispatch({
      kernel: `${kernel}:dkv`,
      shader: 'attention_backward_dkv',
      constants: { WG: Math.min(64, D), D },
      bindings: [args.dout, args.q, aw.binding, gw.binding, args.attentionMask, args.dk, args.dv],
      params: packParams([['u32', T], ['u32', Hq], ['u32', Hkv], ['u32', b0], ['u32', aw.base], ['u32', kvRows]]),
      workgroups: Gpu.grid(kvRows),
    });
  }
}
