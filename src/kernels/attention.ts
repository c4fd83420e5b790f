// Launchers for fused (flash-attention style) attention, in three kernel sets that compute the same thing:
//   'rows' (SwiftShader; the decode steps of lavapipe): shaders/attention_forward.wgsl (one thread per query row, BQ consecutive
//     rows in (b, h, i) order per workgroup reading the same k / v rows together, online softmax in steps of BK
//     keys, no barriers) and the backward attention_backward_dq.wgsl / attention_backward_dkdv.wgsl (one
//     thread per query / key row). Barriers cost a coroutine switch on a CPU adapter: a set with one
//     workgroup per row and tree reductions ran several times slower there. It reads its rows as vec4s
//     (common/attention_rows.wgsl) and keeps each thread's accumulators in function memory of ROWS_MAX_D (no
//     workgroup array, which WebGPU zero-fills behind a barrier: on SwiftShader that barrier cost 941 -> 462 ms of
//     compile for the three kernels and ~15% of their time), so it takes a head_dim D that is a multiple of 4 up to
//     256; for another D the class's next set runs, and a forced 'rows' is refused.
//   'wg' (GPUs' decode steps, and their default where 'tile' does not fit): shaders/attention_wg_forward.wgsl, attention_wg_backward_dq.wgsl,
//     attention_wg_backward_dkdv.wgsl — one workgroup per query (key) row, one key (query) per thread in
//     tiles of WG, tree reductions (common/reduce.wgsl). B·Hq·T workgroups fill a GPU where the row set's
//     B·Hq·T / BQ threads, each walking a whole row alone, leave it waiting on memory: on an H100 the
//     SmolLM2-shaped forward ran 2× and forward + backward 4–6× faster (bench/results-h100-attention-ab.json).
//   'tile' (GPUs and lavapipe, the default there): shaders/attention_tile_forward.wgsl — FlashAttention-2's structure: a
//     workgroup per 64 query rows of a head, keys in tiles of 32, the scores and P·V as GEMM-style register
//     blocks over workgroup-memory tiles (4 FMAs per value read, where 'wg' does one and pays tree reductions).
//     A forward of fewer than TILE_MIN_ROWS query rows (a decode step) runs the class's next set instead: a
//     64-row block would be mostly empty. Its backward, attention_tile_backward_dq.wgsl / _dkdv.wgsl, tiles the same way (64 query
//     or key rows × 32-column tiles); on an H100 at Qwen2.5-0.5B's heads, 8 × 512, it ran in 3.1 ms where 'wg' took 11.6.
//     On lavapipe too it leads (2.2–2.5× the 'rows' set, forward and backward, at 2 × 256 and 1 × 1024: fewer
//     barriers per FMA than 'wg'); on SwiftShader, whose compile time grows with the workgroup (workgroupCap),
//     'rows' stays. It needs TILE_BYTES of workgroup memory: a device that offers less does not get it.
// attentionKernels picks by adapter class (as the GEMM does); tests and the bench force each.
// All three save the per-row lse in the forward, form delta_i = dout_i·out_i in the dq pass and recompute the
// probabilities from q, k and lse. No (B, Hq, Tq, Tk) buffer exists: the memory is O(B·T·H·D) plus
// (B, Hq, T) for lse and delta, where the materialised version needed B·Hq·T·T floats per layer (23.5 GB
// for 64 rows of 2,560 tokens at Qwen2.5-0.5B's 14 heads; bench suite `attention`).
// Causal + attention mask + GQA (query head h reads kv head h / (Hq / Hkv)); deterministic (no
// atomics, fixed summation order). A query row with no visible key gets out = 0, lse = -inf, dq = 0.
import { type AdapterClass, type Binding, type ParamWord, type Recorder, Gpu, adapterClass, workgroupCap } from '../gpu/context.ts';
import type { AttentionBackwardShape, AttentionShape } from './types.ts';
import { sharedScratch } from './scratch.ts';
import { colsum_forward } from './colsum.ts';
import { boundBytes, prefix } from './windows.ts';

const BQ_MAX = 64; // 'rows': rows (queries, or keys in dkdv) per workgroup = threads, one row each
export const ROWS_MAX_D = 256; // 'rows': the largest head_dim its per-thread accumulators hold (common/attention_rows.wgsl D4_MAX · 4)
const WG = 64; // 'wg': keys (forward, dq) or queries (dkdv) per tile = threads per workgroup
// 'tile': rows per workgroup (common/attention_tile.wgsl's BR), output columns per chunk workgroup (its DC), and
// the bytes of its one workgroup array, whatever D is (forward and backward).
const TILE_ROWS = 64;
const TILE_CHUNK = 64;
const TILE_BYTES = 2048 * 16;
const TILE_MIN_ROWS = 16; // fewer query rows: the default set's forward falls back to the class's next set
const TILE_SPLIT_GROUPS = 1024; // 'tile' dkdv: split the query heads over workgroups below this grid (tileDkdv)

/** The kernel sets (see the header). */
export const ATTENTION_KERNELS = ['rows', 'wg', 'tile'] as const;
export type AttentionKernel = (typeof ATTENTION_KERNELS)[number];

/** The kernel sets per adapter class, its default first (the header says why); the second serves decode steps. */
const ATTENTION_ORDER: Record<AdapterClass, AttentionKernel[]> = {
  gpu: ['tile', 'wg', 'rows'],
  cpu: ['tile', 'rows', 'wg'],
  swiftshader: ['rows', 'wg', 'tile'],
};

/** The kernel sets this adapter runs, its default first ('tile' only where its workgroup array fits). */
export function attentionKernels(gpu: Gpu): AttentionKernel[] {
  const order = ATTENTION_ORDER[adapterClass(gpu.adapter)];
  return gpu.limits.maxComputeWorkgroupStorageSize >= TILE_BYTES ? order : order.filter((k) => k !== 'tile');
}

/** Whether the 'rows' set takes head_dim D: it reads rows as vec4s, into per-thread accumulators of ROWS_MAX_D. */
function rowsTakes(D: number): boolean {
  return D % 4 === 0 && D <= ROWS_MAX_D;
}

/** The sets that take head_dim D on this adapter, its default first. */
function setsFor(gpu: Gpu, D: number): AttentionKernel[] {
  return attentionKernels(gpu).filter((k) => k !== 'rows' || rowsTakes(D));
}

/** The set a launcher runs: the forced one (tests, bench), refused in one line where it cannot take D, or D's default. */
function pickSet(gpu: Gpu, kernel: string, D: number, forced?: AttentionKernel): AttentionKernel {
  if (forced === 'rows' && !rowsTakes(D)) throw new Error(`${kernel}: the 'rows' set reads rows of head_dim D as vec4s into accumulators of ${ROWS_MAX_D} and needs D a multiple of 4 up to ${ROWS_MAX_D}, got ${D}`);
  return forced ?? setsFor(gpu, D)[0];
}

/** The (…, D) row bindings the 'rows' set binds as vec4 views (common/attention_rows.wgsl): q4, k4, …, at their bindings. */
const ROW_VIEWS = ['q', 'k', 'v', 'out', 'dout', 'dq', 'dk', 'dv'];

/** A dispatch's bindings by the names its set's shader gives them: the 'rows' set's row views take a 4. */
function setBindings(set: AttentionKernel, b: Record<string, Binding>): Record<string, Binding> {
  return set === 'rows' ? Object.fromEntries(Object.entries(b).map(([name, v]) => [ROW_VIEWS.includes(name) ? `${name}4` : name, v])) : b;
}

/** Checks the heads (every set). */
function checkHeads(kernel: string, Hq: number, Hkv: number, D: number): void {
  if (!(Hkv >= 1 && Hq % Hkv === 0)) throw new Error(`${kernel}: Hq (${Hq}) must be a multiple of Hkv (${Hkv})`);
  if (!(D >= 1 && Number.isInteger(D))) throw new Error(`${kernel}: head_dim D must be a positive integer, got ${D}`);
}

/** Workgroup arrays (`bytes`, for `what`) that do not fit the device are a clear error, not a pipeline failure. */
function checkStorage(gpu: Gpu, kernel: string, what: string, bytes: number): void {
  const limit = gpu.limits.maxComputeWorkgroupStorageSize;
  if (bytes > limit) throw new Error(`${kernel}: ${what} needs ${bytes} bytes of workgroup storage, the device allows ${limit}`);
}

/** 'wg': the shader's workgroup arrays, `rows` rows of D floats plus 2 × WG, must fit the device. */
function checkWgStorage(gpu: Gpu, kernel: string, D: number, rows: number): void {
  checkStorage(gpu, kernel, `head_dim ${D}`, (rows * D + 2 * WG) * 4);
}

/** 'rows': rows per workgroup, one thread each (no workgroup memory: each thread's accumulators are its own). */
function rowsPerGroup(gpu: Gpu): number {
  return Math.min(BQ_MAX, workgroupCap(gpu.adapter));
}

/**
 * The (query, key) pairs causal attention scores for one (row, head): query i of the last Tq of Tk positions sees
 * keys 0..Tk − Tq + i. Padded keys count too: the count is the shapes', which the CPU knows (the tile set computes
 * them under the mask; the row sets skip them). A pair costs 2·D FLOPs per product over it: the forward makes two
 * (scores, P·V), the backward's dq pass three (scores again, dP, dq) and its dkdv pass four (scores, dP, dv, dk).
 */
export function causalPairs(Tq: number, Tk: number): number {
  return Tq * (Tk - Tq) + (Tq * (Tq + 1)) / 2;
}

/** The declared FLOPs (Dispatch.work) of a pass making `products` products over every causal pair of every query head. */
function attentionFlops(products: number, s: { B: number; Hq: number; D: number }, Tq: number, Tk: number): number {
  return products * 2 * s.D * s.B * s.Hq * causalPairs(Tq, Tk);
}

export function attention_forward(
  rec: Recorder,
  args: AttentionShape & {
    out: GPUBuffer; // (B, Tq, Hq, D)
    q: GPUBuffer; // (B, Tq, Hq, D)
    k: GPUBuffer; // (B, TkvMax, Hkv, D), rows [0, Tk) valid
    v: GPUBuffer; // (B, TkvMax, Hkv, D)
    attentionMask: GPUBuffer; // (B, Tk) i32, 1 = key visible
    lse: GPUBuffer; // (B, Hq, Tq) log-sum-exp of the scaled scores, saved for the backward
    kernel?: AttentionKernel; // tests and bench: this set, instead of attentionKernels' default
  },
): void {
  const { B, Tq, Tk, TkvMax, Hq, Hkv, D } = args;
  const kernel = 'attention_forward';
  const gpu = rec.gpu;
  checkHeads(kernel, Hq, Hkv, D);
  if (!(Tq >= 1 && Tq <= Tk && Tk <= TkvMax)) throw new Error(`${kernel}: needs 1 <= Tq (${Tq}) <= Tk (${Tk}) <= TkvMax (${TkvMax})`);
  const bindings = {
    q: prefix(gpu, kernel, 'q', args.q, B * Tq * Hq * D),
    k: prefix(gpu, kernel, 'k', args.k, B * TkvMax * Hkv * D),
    v: prefix(gpu, kernel, 'v', args.v, B * TkvMax * Hkv * D),
    attention_mask: prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * Tk),
    out: prefix(gpu, kernel, 'out', args.out, B * Tq * Hq * D),
    lse: prefix(gpu, kernel, 'lse', args.lse, B * Hq * Tq),
  };
  // 'tile': blocks of TILE_ROWS query rows, a workgroup per TILE_CHUNK output columns; 'wg': a workgroup per
  // query row (blocks = Tq); 'rows': BQ consecutive rows of the (b, h, i) order a workgroup.
  let set = pickSet(gpu, kernel, D, args.kernel);
  if (set === 'tile' && !args.kernel && Tq < TILE_MIN_ROWS) set = setsFor(gpu, D)[1];
  if (set === 'tile') checkStorage(gpu, kernel, "the 'tile' set (any head_dim)", TILE_BYTES);
  if (set === 'wg') checkWgStorage(gpu, kernel, D, 2); // the query row and the output accumulator
  const BQ = set === 'tile' ? TILE_ROWS : set === 'wg' ? 1 : rowsPerGroup(gpu);
  const blocks = Math.ceil(Tq / BQ);
  const chunks = set === 'tile' ? Math.ceil(D / TILE_CHUNK) : 1;
  const rows = B * Hq * Tq;
  const groups = set === 'rows' ? Math.ceil(rows / BQ) : B * Hq * blocks * chunks; // 'rows': BQ of the rows in order
  rec.dispatch({
    kernel,
    shader: `attention${set === 'rows' ? '' : `_${set}`}_forward`,
    constants: set === 'tile' ? {} : set === 'wg' ? { WG, DH: D } : { BQ },
    bindings: setBindings(set, bindings),
    params: [
      ['Tq', 'u32', Tq], ['Tk', 'u32', Tk], ['TkvMax', 'u32', TkvMax], ['Hq', 'u32', Hq],
      ['Hkv', 'u32', Hkv], ['D', 'u32', D], ['blocks', 'u32', blocks], ['scale', 'f32', args.scale],
      ['neg_inf', 'f32', -Infinity], ['groups', 'u32', groups], ['chunks', 'u32', chunks], ['rows', 'u32', rows],
    ],
    workgroups: Gpu.grid(groups),
    // Bytes: q and out, the Tk visible rows of k, v and the mask (not a KV cache's whole capacity), lse.
    work: { flops: attentionFlops(2, args, Tq, Tk), bytes: 4 * (2 * B * Tq * Hq * D + 2 * B * Tk * Hkv * D + B * Tk + B * Hq * Tq) },
  });
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
    out: GPUBuffer; // (B, T, Hq, D) from attention_forward
    lse: GPUBuffer; // (B, Hq, T) from attention_forward
    attentionMask: GPUBuffer; // (B, T) i32
    kernel?: AttentionKernel; // tests and bench: this set, instead of attentionKernels' default
  },
): void {
  const { B, T, Hq, Hkv, D } = args;
  const kernel = 'attention_backward';
  const gpu = rec.gpu;
  checkHeads(kernel, Hq, Hkv, D);
  const [dq, dout, q, out] = (['dq', 'dout', 'q', 'out'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hq * D));
  const [dk, dv, k, v] = (['dk', 'dv', 'k', 'v'] as const).map((f) => prefix(gpu, kernel, f, args[f], B * T * Hkv * D));
  const attention_mask = prefix(gpu, kernel, 'attentionMask', args.attentionMask, B * T);
  const lse = prefix(gpu, kernel, 'lse', args.lse, B * Hq * T);
  const delta = prefix(gpu, kernel, 'delta', sharedScratch(gpu, 'attention_backward:delta', B * Hq * T * 4), B * Hq * T); // (B, Hq, T)
  const set = pickSet(gpu, kernel, D, args.kernel);
  const tile = set === 'tile';
  const wg = set === 'wg';
  if (tile) checkStorage(gpu, kernel, "the 'tile' set (any head_dim)", TILE_BYTES);
  if (wg) checkWgStorage(gpu, kernel, D, 4); // dkdv: k, v and the dk / dv accumulators (dq: 3 rows)
  // Rows per workgroup: 'tile' blocks of TILE_ROWS (and a workgroup per TILE_CHUNK gradient columns), 'wg' one, 'rows' BQ.
  const BQ = tile ? TILE_ROWS : wg ? 1 : rowsPerGroup(gpu);
  const chunks = tile ? Math.ceil(D / TILE_CHUNK) : 1;
  // One pass per side: query rows of (b, h), key rows of (b, kvh).
  const pass = (side: 'dq' | 'dkdv', heads: number, bindings: Record<string, Binding>) => {
    const blocks = Math.ceil(T / BQ);
    const groups = B * heads * blocks * chunks;
    rec.dispatch({
      kernel: `${kernel}:${side}`,
      shader: `attention${set === 'rows' ? '' : `_${set}`}_backward_${side}`,
      constants: tile ? {} : wg ? { WG, DH: D } : { BQ },
      bindings: setBindings(set, bindings),
      params: backwardParams(args, blocks, groups, { chunks, splits: 1, n: 0 }),
      workgroups: Gpu.grid(groups),
      work: backwardWork(args, side, bindings),
    });
  };
  pass('dq', Hq, { q, k, v, attention_mask, out, dout, lse, delta, dq });
  if (tile) tileDkdv(rec, args, { q, k, v, attention_mask, dout, lse, delta, dk, dv });
  else pass('dkdv', Hkv, { q, k, v, attention_mask, dout, lse, delta, dk, dv });
}

/** A backward pass's declared work (causalPairs says what each pass computes); its bindings are exact windows. */
function backwardWork(s: AttentionBackwardShape, side: 'dq' | 'dkdv', bindings: Record<string, Binding>) {
  return { flops: attentionFlops(side === 'dq' ? 3 : 4, s, s.T, s.T), bytes: boundBytes(bindings) };
}

/** The backward's params words (common/attention_backward.wgsl): chunks, head splits and dk elements are the 'tile' set's (others: 1, 1, 0). */
function backwardParams(s: AttentionBackwardShape, blocks: number, groups: number, tile: { chunks: number; splits: number; n: number }): ParamWord[] {
  return [
    ['T', 'u32', s.T], ['Hq', 'u32', s.Hq], ['Hkv', 'u32', s.Hkv], ['D', 'u32', s.D],
    ['blocks', 'u32', blocks], ['scale', 'f32', s.scale], ['neg_inf', 'f32', -Infinity], ['groups', 'u32', groups],
    ['chunks', 'u32', tile.chunks], ['splits', 'u32', tile.splits], ['n', 'u32', tile.n],
  ];
}

/** The 'tile' dkdv pass's grid: row blocks, d-chunks, workgroups before the head split, splits, and elements of dk (or dv). */
function tileDkdvSplits(s: Omit<AttentionBackwardShape, 'scale'>): { blocks: number; chunks: number; base: number; splits: number; n: number } {
  const { B, T, Hq, Hkv, D } = s;
  const blocks = Math.ceil(T / TILE_ROWS);
  const chunks = Math.ceil(D / TILE_CHUNK);
  const base = B * Hkv * blocks * chunks;
  const group = Hq / Hkv;
  const perSplit = Math.ceil(group / Math.min(group, Math.max(1, Math.ceil(TILE_SPLIT_GROUPS / base)))); // query heads per split
  return { blocks, chunks, base, splits: Math.ceil(group / perSplit), n: B * T * Hkv * D };
}

/**
 * Bytes of the device-wide scratch attention_backward keeps (sharedScratch) for a (B, T) batch: delta (B, Hq, T)
 * and, where the 'tile' set splits dkdv's query heads, its dk and dv partials (an upper bound on adapters that
 * run another set). src/model/plan.ts plans them with the backward's scratch.
 */
export function attentionBackwardScratchBytes(s: Omit<AttentionBackwardShape, 'scale'>): number {
  const { splits, n } = tileDkdvSplits(s);
  return 4 * (s.B * s.Hq * s.T + (splits > 1 ? 2 * splits * n : 0));
}

/**
 * 'tile' dkdv pass. Its grid is B·Hkv·blocks·chunks workgroups, few where the kv heads are few (Qwen2.5-0.5B's 2,
 * 8 × 512 tokens: 128 for an H100's 132 SMs, one 4-warp workgroup each): then each group's query heads are
 * split over up to TILE_SPLIT_GROUPS / that many workgroups, whose partial dk, dv go to scratch and are summed
 * in split order by colsum_forward (deterministic). The scratch stays small: splitting stops once
 * the grid reaches TILE_SPLIT_GROUPS workgroups (≤ 2 × ~34 MB at D = 64).
 */
function tileDkdv(rec: Recorder, args: AttentionBackwardShape, b: Record<string, Binding>): void {
  const gpu = rec.gpu;
  const kernel = 'attention_backward:dkdv';
  const { blocks, chunks, base, splits, n } = tileDkdvSplits(args);
  const part = (f: 'dk' | 'dv') => prefix(gpu, kernel, `${f} partials`, sharedScratch(gpu, `attention_backward:${f} partials`, splits * n * 4), splits * n);
  const [pk, pv] = splits > 1 ? [part('dk'), part('dv')] : [b.dk, b.dv];
  const groups = base * splits;
  rec.dispatch({
    kernel,
    shader: 'attention_tile_backward_dkdv',
    constants: {},
    bindings: { ...b, dk: pk, dv: pv },
    params: backwardParams(args, blocks, groups, { chunks, splits, n }),
    workgroups: Gpu.grid(groups),
    work: backwardWork(args, 'dkdv', { ...b, dk: pk, dv: pv }),
  });
  if (splits === 1) return;
  colsum_forward(rec, { out: b.dk, inp: pk, P: splits, C: n, accumulate: false });
  colsum_forward(rec, { out: b.dv, inp: pv, P: splits, C: n, accumulate: false });
}
