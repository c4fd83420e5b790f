// Gradient norms for clip_grad_norm_, over every parameter tensor at once (shaders/sumsq_forward.wgsl):
// sumsq_forward writes out[i] = Σ x² of tensor i with one sweep dispatch per 6 tensor windows (1 on CPU adapters) and ONE
// finish dispatch for all of them; clip_coef_forward turns those sums into torch's total norm and clip
// coefficient ON THE GPU, in the buffer the optimizer steps read it from (src/kernels/optimizer.ts), so
// nothing is read back between the gradient norm and the update. The optimizer steps write their Δθ²
// partials with the same sweep (planSweep) and finish them with finishSweep. Twin: src/oracle/grad_norm.ts.
import { adapterClass, Gpu, isCpuAdapter, workgroupCap, type AdapterClass, type Recorder } from '../gpu/context.ts';
import { sharedScratch } from './scratch.ts';
import { checkSize } from './windows.ts';
import { bindWindow, flatWindows, type FlatWindow } from './elementwise.ts';

const WG = 256;

/**
 * Threads per workgroup of a sweep, its finish and the clip coefficient: WG, or the adapter's workgroupCap where that
 * is lower. SwiftShader runs a workgroup's invocations as coroutines and switches every one at each of the tree
 * reduction's barriers: at 256 threads its AdamW step over the embedded model's 38 tensors took 35 ms of GPU time
 * and the gradient norms 36 ms (issue 23's stop 36 note).
 */
export function sweepThreads(gpu: Gpu): number {
  return Math.min(WG, workgroupCap(gpu.adapter));
}
// Partials per tensor at WG threads before the per-thread run K grows past the adapter's least run. A narrower
// workgroup (sweepThreads) keeps K and writes WG / wg times as many partials, which the finish sums WG / wg times
// longer: on SwiftShader's 16 threads a 136M-element tensor sums 519 + 1,024 + 8 terms deep where a K scaled up 16×
// made it ~8,300 (sumsq_forward.wgsl's bound).
const MAX_PARTS = 1024;
// Elements per thread at least, by adapter class. Each workgroup ends in a tree reduction of log2(WG) barriers, which
// a CPU adapter runs as fiber switches: on lavapipe (12 tensors of 884,736 elements, one launch) sumsq took
// ~1.7 s at K = 1, ~0.4 s at 16, ~0.1 s at 64 and about the same at 256; the AdamW sweep 2.2 s, 0.8 s, 0.3 s,
// 0.35 s. A GPU needs the opposite: a memory-bound sweep saturates HBM only with many warps in flight, and
// K = 64 gave a 0.9M-element tensor 54 workgroups of 256 on a 132-SM H100 (AdamW over 134.5M parameters
// took 20.7 ms there, 7% of the copy probe). On GPUs K is only what keeps a tensor within MAX_PARTS
// partials (4 for that tensor: 864 workgroups).
const MIN_RUN: Record<AdapterClass, number> = { gpu: 1, swiftshader: 64, cpu: 64 };

/** One sweep dispatch: window `w` of tensor `tensor`, K elements per thread, its partials at part[base ..]. */
export interface SweepWindow {
  tensor: number;
  w: FlatWindow;
  K: number;
  base: number;
  groups: number; // workgroups = partials it writes
}

/** Every sweep dispatch over a list of tensors and where each tensor's partials start (starts[i] .. starts[i + 1]). */
export interface SweepPlan {
  windows: SweepWindow[];
  starts: Uint32Array; // (tensors + 1)
  part: GPUBuffer; // (starts[tensors]) partial sums, a shared scratch
  wg: number; // threads per workgroup (sweepThreads), the shaders' WG
}

/**
 * Plans the sweep of `tensors` (each: its element count and the buffers bound through its windows, checked
 * to hold n elements). K is per tensor: at least the adapter class's MIN_RUN, and large enough that no
 * tensor writes more than ~MAX_PARTS partials at WG threads (MAX_PARTS · WG / wg at wg).
 */
export function planSweep(rec: Recorder, kernel: string, tensors: { n: number; buffers: Record<string, GPUBuffer> }[], limit?: number): SweepPlan {
  const windows: SweepWindow[] = [];
  const starts = new Uint32Array(tensors.length + 1);
  let base = 0;
  const wg = sweepThreads(rec.gpu);
  tensors.forEach((t, tensor) => {
    starts[tensor] = base;
    const K = Math.max(MIN_RUN[adapterClass(rec.gpu.adapter)], Math.ceil(t.n / (WG * MAX_PARTS)));
    for (const w of flatWindows(rec, kernel, t.n, t.buffers, limit)) {
      const groups = Math.ceil(w.count / (wg * K));
      windows.push({ tensor, w, K, base, groups });
      base += groups;
    }
  });
  starts[tensors.length] = base;
  return { windows, starts, part: sharedScratch(rec.gpu, 'sumsq_forward:part', Math.max(1, base) * 4), wg };
}

/** The uniform words sgd_step's params start with (the slotted sweeps, sumsq_forward and adamw_step, read the same from their items table). */
export function sweepParams(s: SweepWindow): [string, 'u32', number][] {
  return [['n', 'u32', s.w.count], ['K', 'u32', s.K], ['part_base', 'u32', s.base]];
}

// The launch tables (finish's starts, main's items) by device and content: written once when made and
// never again, so any recorder may bind one (no write can land between its recording and its submit), and
// a step's bind groups are hit again.
const tables = new WeakMap<Gpu, Map<string, GPUBuffer>>();

function table(gpu: Gpu, label: string, data: Uint32Array): GPUBuffer {
  let m = tables.get(gpu);
  if (!m) tables.set(gpu, (m = new Map()));
  const key = `${label}:${data.join(',')}`;
  let b = m.get(key);
  if (!b) m.set(key, (b = gpu.upload(label, data)));
  return b;
}

/** out[i] = Σ of tensor i's partials, for every tensor of `plan`, in one dispatch. */
export function finishSweep(rec: Recorder, plan: SweepPlan, out: GPUBuffer): void {
  const P = plan.starts.length - 1;
  checkSize('sumsq_forward', 'out', out, P);
  if (P === 0) return;
  const starts = table(rec.gpu, 'sumsq_forward:starts', plan.starts);
  rec.dispatch({
    kernel: 'sumsq_forward.finish',
    shader: 'sumsq_forward',
    entryPoint: 'finish',
    constants: { WG: plan.wg },
    bindings: { parts: plan.part, starts, out },
    params: [['P', 'u32', P]],
    workgroups: Gpu.grid(P),
  });
}

/** Tensor windows per main dispatch at most (the shader's inp0..inp5). */
const MAX_SLOTS: 6 = 6;

/**
 * Tensor windows per dispatch of a slotted sweep (sumsq here, AdamW in optimizer.ts) on this adapter: `most` on a
 * GPU, whose dispatches cost tens of µs each; one on a CPU adapter, where a dispatch is cheap and the per-element
 * switch among the slots' bindings is not (lavapipe: AdamW over 90 tensors, 26.6M parameters, 318 ms at one per
 * dispatch, 328–356 ms at three; sumsq over the `--quick` SmolLM2-shaped update's gradients, 107M elements,
 * 244 ms at one, 383 ms at six, median of 5; SwiftShader, the embedded model's 38 gradients: 32.3 and 33.6 ms).
 */
export function sweepSlots<S extends number>(gpu: Gpu, most: S): 1 | S {
  return isCpuAdapter(gpu.adapter) ? 1 : most;
}

/** Tensor windows per sumsq dispatch on this adapter (SLOTS in the shader): sweepSlots of its six. */
export const sumsqSlots = (gpu: Gpu): 1 | 6 => sweepSlots(gpu, MAX_SLOTS);

/** One dispatch of a slotted sweep: windows plan.windows[first ..] (at most its shader's slots) and their workgroups. */
export interface SweepLaunch {
  first: number;
  windows: SweepWindow[];
  groups: number;
  elements: number; // of its windows together (the launchers' declared work)
}

/**
 * The windows of `plan` in launches of at most `slots` each, with the table a launch's workgroups find their
 * window in (a slotted shader's `items`): items[4·j ..] = n, K, part_base and first workgroup (within its
 * launch) of window j. Null without windows. `singleTail`: the windows that do not fill a last launch of
 * `slots` get a launch each (for a launcher whose shorter launches run a one-slot shader).
 */
export function slotLaunches(rec: Recorder, plan: SweepPlan, slots: number, singleTail = false): { launches: SweepLaunch[]; items: GPUBuffer | null } {
  const items = new Uint32Array(4 * plan.windows.length);
  const launches: SweepLaunch[] = [];
  const full = singleTail ? plan.windows.length - (plan.windows.length % slots) : plan.windows.length;
  plan.windows.forEach((s, j) => {
    let l = launches[launches.length - 1];
    if (!l || l.windows.length === slots || j >= full) launches.push((l = { first: j, windows: [], groups: 0, elements: 0 }));
    items.set([s.w.count, s.K, s.base, l.groups], 4 * j);
    l.windows.push(s);
    l.groups += s.groups;
    l.elements += s.w.count;
  });
  return { launches, items: launches.length ? table(rec.gpu, 'sweep:items', items) : null };
}

/**
 * out[i] = Σ inputs[i]², for every input tensor (a (n = 0) tensor sums to 0): the windows `slots` at a time
 * per main dispatch, then one finish.
 */
export function sumsq_forward(
  rec: Recorder,
  args: {
    inputs: { inp: GPUBuffer; n: number }[]; // (n) each
    out: GPUBuffer; // (inputs) f32
    limit?: number; // tests only: a lower binding size, to exercise the window split
    slots?: number; // tests and bench: windows per dispatch (1..6) instead of sumsqSlots'
  },
): void {
  const slots = args.slots ?? sumsqSlots(rec.gpu);
  if (!Number.isInteger(slots) || slots < 1 || slots > MAX_SLOTS) throw new RangeError(`sumsq_forward: slots must be an integer in [1, ${MAX_SLOTS}], got ${slots}`);
  const plan = planSweep(rec, 'sumsq_forward', args.inputs.map(({ inp, n }) => ({ n, buffers: { inp } })), args.limit);
  const { launches, items } = slotLaunches(rec, plan, slots);
  const standIn = { buffer: rec.gpu.zeros(16), offset: 0, size: 16 }; // an empty slot's binding (never read)
  for (const l of launches) {
    const inputs = Object.fromEntries(Array.from({ length: MAX_SLOTS }, (_, k) => [`inp${k}`, k < l.windows.length ? bindWindow(args.inputs[l.windows[k].tensor].inp, l.windows[k].w) : standIn]));
    rec.dispatch({
      kernel: 'sumsq_forward',
      shader: 'sumsq_forward',
      constants: { WG: plan.wg, SLOTS: slots },
      bindings: { ...inputs, part: plan.part, items: items! },
      params: [['first', 'u32', l.first], ['count', 'u32', l.windows.length]],
      workgroups: Gpu.grid(l.groups),
      work: { bytes: 4 * l.elements }, // each element read once
    });
  }
  finishSweep(rec, plan, args.out);
}

/** Words of the clip buffer clip_coef_forward writes: [coef, ok (1 / 0), total norm]. */
export const CLIP_WORDS = 3;

/**
 * clip = [min(1, maxNorm / (total + 1e-6)), ok, total] with total = √(Σ sumsq[i]) (torch's
 * clip_grad_norm_); maxNorm ≤ 0 means no clipping (coef 1). ok = 0 when the total is not finite: the
 * optimizer steps then write nothing.
 */
export function clip_coef_forward(rec: Recorder, args: { sumsq: GPUBuffer /* (P) */; P: number; maxNorm: number; clip: GPUBuffer /* (CLIP_WORDS) */ }): void {
  checkSize('clip_coef', 'sumsq', args.sumsq, args.P);
  checkSize('clip_coef', 'clip', args.clip, CLIP_WORDS);
  rec.dispatch({
    kernel: 'sumsq_forward.clip_coef',
    shader: 'sumsq_forward',
    entryPoint: 'clip_coef',
    constants: { WG: sweepThreads(rec.gpu) },
    bindings: { sums: args.sumsq, clip: args.clip },
    params: [['P', 'u32', args.P], ['max_norm', 'f32', args.maxNorm]],
    workgroups: [1],
  });
}
