// Launchers for the GEMM every matmul uses — shaders/matmul_forward.wgsl (workgroup tiles: GPUs) or
// shaders/matmul_subgroup_forward.wgsl (subgroup broadcasts: lavapipe) or shaders/matmul_direct_forward.wgsl
// (no sharing: SwiftShader; see gemmKernels) —,
// shaders/matmul_rows_forward.wgsl (few-row products with 'out_in' weights on GPUs: the decode step) and
// shaders/matmul_backward.wgsl (bias gradient).
//
// weightLayout 'out_in' is HF nn.Linear [N = out, K = in] (y = x·Wᵀ + b), also the tied lm_head
// (logits = h·wteᵀ, wte (V, C)); 'in_out' is GPT-2 Conv1D [K, N] (y = x·W + b).
// Operands bigger than maxStorageBufferBindingSize are cut into blocks of rows (M), output columns
// (N) and the inner dimension (K), each operand bound as a window of whole physical rows; the K blocks
// (binding windows) accumulate into the output. `bindingLimit` lowers the binding size (tests only). Split K
// (splitSlices) is another thing: slices of one block's K in parallel workgroups, summed by colsum.
//
// Signature additions to the brief (all optional): matmul_backward's `accumulateDinp` (dinp += ...,
// for inputs feeding several projections, e.g. q/k/v) and `dinpScale`, matmul_forward's `accumulate` (out += ...,
// LoRA's delta onto the base output), `scale` (LoRA's scaling of x·Aᵀ) and `residual` (out = residual + the
// layer: o_proj and down_proj return to the residual stream), and `bindingLimit`, `kernel` and `prefetch`
// (tests and bench) on both launchers, `slices` (the tiled kernel's K slices, forced) on matmul_forward. scale
// and residual are the GEMM's epilogue (common/matmul.wgsl store_c): a dispatch each fewer than an f32 multiply
// (the former scale_forward) or residual_forward after the product, with bitwise their result.
import { adapterClass, Gpu, type AdapterClass, type Binding, type Recorder } from '../gpu/context.ts';
import { colsum_forward } from './colsum.ts';
import { sharedScratch } from './scratch.ts';
import { bindingLimit, checkSize, prefix, rowsPerWindow, rowWindow } from './windows.ts';

export type WeightLayout = 'out_in' | 'in_out';
/** How a weight is stored on the GPU: f32, or packed bf16 (frozen weights in their checkpoint dtype; B_BF16 / W_BF16 in the shaders). */
export type WeightDtype = 'f32' | 'bf16';
const ELEM_BYTES: Record<WeightDtype, number> = { f32: 4, bf16: 2 };

/** Which GEMM kernel runs: 'tiled' (matmul_forward.wgsl), 'subgroup' (matmul_subgroup_forward.wgsl) or 'direct' (matmul_direct_forward.wgsl). */
export const GEMM_KERNELS = ['tiled', 'subgroup', 'direct'] as const;
export type GemmKernel = (typeof GEMM_KERNELS)[number];
/** matmul_forward's kernels: a GEMM kernel, or 'rows' (matmul_rows_forward.wgsl, few rows). */
export type MatmulKernel = GemmKernel | 'rows';

// matmul_forward.wgsl: TILE_M from tileRows, TILE_N × TILE_K. Its register prefetch (PREFETCH) stages exactly
// PREFETCH_PER_THREAD (its PF) elements of each operand per invocation and slice: a tile whose A and B slices
// both hold that many per invocation (the full 64 × 64 × 16 one) takes it.
const TILE_N = 64;
const TILE_K = 16;
const PREFETCH_PER_THREAD = 4;
// matmul_subgroup_forward.wgsl: up to SUB_TM rows per invocation, SUB_TN columns per workgroup, at most
// SUB_WG invocations; the subgroup sizes it takes (TN a multiple of SG, TN / SG within its MAX_Q). On
// lavapipe 4 × 16 and 4 × 32 led (≈ 10 GFLOP per CPU-second at 2048 × 576 × 576), ahead of 2 × 16, 2 × 32,
// 8 × 8, 8 × 16 (7–9) and 4 × 8 (5); 32 or 128 invocations instead of 64 measured no better.
const SUB_TM = 4;
const SUB_TN = 16;
const SUB_WG = 64;
const SUB_SIZES = [4, 8, 16, 32];
// matmul_direct_forward.wgsl: WG_N × WG_M invocations, each 4 columns by TM rows; fewer rows of invocations where
// M has fewer row groups (a decode step's 8 rows: 2), not idle ones (the embedded model's 40 decode steps at B = 8
// in Node on SwiftShader: its GEMMs 205 → 175 ms of GPU time).
const DIRECT_WG_N = 16;
const DIRECT_WG_M = 4;
const MAX_WG = 65535;
const BIAS_WG = 256;
// matmul_rows_forward.wgsl: up to ROWS_MAX rows (its MAX_ROWS), ROWS_COLS output columns per workgroup
// (its COLS), ROWS_SPLIT invocations per workgroup. Not where the subgroup GEMM is the default: on lavapipe
// that one is 1.4× faster at 1 row and 12× at 16 (576 → 1536, bench-style timing).
const ROWS_MAX = 16;
const ROWS_COLS = 4;
const ROWS_SPLIT = 64;

/**
 * Rows of C per workgroup: 64, or the smallest of 8/16/32 that covers M, so that decode steps and other
 * few-row products (M = batch rows) do not compute a 64-row tile for a handful of rows.
 */
function tileRows(M: number): number {
  return M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64;
}

/** Invocations of a TILE_M × TILE_N workgroup of matmul_forward.wgsl: a 4 × 4 block of C each (its TM × TN). */
const tiledThreads = (tileM: number, tileN: number): number => (tileM * tileN) / 16;

/** Columns of C per workgroup: TILE_N, or 16 / 32 when N is that narrow (a LoRA rank): no tile mostly empty. */
function tileCols(N: number): number {
  return N <= 16 ? 16 : N <= 32 ? 32 : TILE_N;
}

// Split K (matmul_forward.wgsl's header): a tiled product whose output tiles hold fewer than SPLIT_THREADS
// invocations takes enough slices of K (each at least its minimum depth, at most SPLIT_MAX of them) to have
// about SPLIT_THREADS: two full 256-invocation workgroups per SM of an H100 (132). On an H100 the LoRA
// update's rank-16 products (dA: 16 × 896 over K = 4,096 tokens, 14 tiles) took 1.0 s of its 2.5 s of GPU
// time unsplit. Counted in invocations, not workgroups: a narrow tile (8–32 rows or 16–32 columns: LoRA's
// rank sides, decode rows) has half a full tile's invocations or fewer (down to 8), and counting its workgroups
// left such products (u = x·Aᵀ over K = 896: 3 slices, 192 workgroups of 64) with a twentieth of the GPU's
// slots. The minimum slice depth, SPLIT_MIN_K for a full tile, shrinks with the tile's invocations (down to one
// TILE_K step), so a workgroup's partial (16 floats per invocation) stays about as large against what its
// slice reads as a full tile's.
const SPLIT_THREADS = 264 * 256;
const SPLIT_MIN_K = 256;
const SPLIT_MAX = 64;
// The partials' device-wide scratch stays under 2·SPLIT_THREADS·16 floats (8.6 MB): S slices of tiles holding
// fewer than SPLIT_THREADS invocations, S·tiles·invocations below 2·SPLIT_THREADS, 16 floats each.

/** The K slices of a tiled product's (mc × nc, inner kc) block: 1 (no split) or more (see SPLIT_THREADS). */
function splitSlices(plan: GemmPlan, mc: number, nc: number, kc: number, limit: number): number {
  if (plan.shader !== 'matmul_forward') return 1;
  const threads = tiledThreads(plan.tileM, plan.tileN);
  const tiles = Math.ceil(nc / plan.tileN) * Math.ceil(mc / plan.tileM);
  const minK = Math.max(plan.tileK, (SPLIT_MIN_K * threads) / 256);
  const partials = Math.floor(limit / (mc * nc * 4)); // the partials (S, mc, nc) fit one binding
  return Math.max(1, Math.min(Math.ceil(SPLIT_THREADS / threads / tiles), Math.floor(kc / minK), SPLIT_MAX, partials));
}

/** The adapter's subgroup size where it is fixed and one the subgroup kernel takes (SUB_SIZES), else 0. */
function fixedSubgroupSize(gpu: Gpu): number {
  if (!gpu.hasSubgroups) return 0;
  const info = gpu.device.adapterInfo as GPUAdapterInfo | undefined; // absent on older browsers
  const size = info?.subgroupMinSize;
  return size !== undefined && size === info?.subgroupMaxSize && SUB_SIZES.includes(size) ? size : 0;
}

/**
 * The GEMM kernels this adapter can run, its default first, by adapter class (the order measured there):
 * lavapipe leads with the subgroup kernel (3–10× the tiled one; it needs a fixed subgroup size: a CPU
 * adapter's SIMD register), SwiftShader with the direct one (2.3–4.6× the tiled forward, 1.6–3.2× its
 * backward, at the embedded model's 480 × 64 × 192-sized products, where its subgroup kernel is 1.1–3.4×
 * slower than the tiled: Node's Dawn on chromium's SwiftShader ICD), GPUs with the tiled one (workgroup
 * tiles are the better plan there, and the one measured on them: 19–35% of an H100's FMA probe).
 */
const GEMM_ORDER: Record<AdapterClass, readonly GemmKernel[]> = {
  cpu: Object.freeze(['subgroup', 'tiled', 'direct']),
  swiftshader: Object.freeze(['direct', 'tiled', 'subgroup']),
  gpu: Object.freeze(['tiled', 'subgroup', 'direct']),
};

/** The kernels this adapter runs, its default first: the class's table itself where it runs all (frozen: asked per plan, never copied). */
export function gemmKernels(gpu: Gpu): readonly GemmKernel[] {
  const order = GEMM_ORDER[adapterClass(gpu.adapter)];
  return fixedSubgroupSize(gpu) ? order : order.filter((k) => k !== 'subgroup');
}

interface GemmPlan {
  shader: 'matmul_forward' | 'matmul_subgroup_forward' | 'matmul_direct_forward';
  tileM: number; // rows of C per workgroup
  tileN: number; // columns of C per workgroup
  tileK: number; // the inner dimension's step (1: none)
  constants: Record<string, number | boolean>;
}

/**
 * The kernel and its sizes for an M × N product: the adapter's default (gemmKernels) or `force` (tests,
 * bench). The tiled kernel's block narrows with M and N (tileRows, tileCols); its full 64 × 64 blocks prefetch
 * the next slice into registers unless `prefetch` is false (bench A/B). The subgroup kernel takes fewer rows per invocation when M fills less than SUB_TM subgroups,
 * and sizes its workgroup so that its ceil(M / (SUB_WG · TM)) row blocks cover M with the fewest
 * clamped rows.
 */
function gemmPlan(gpu: Gpu, M: number, N: number, force?: GemmKernel, prefetch = true): GemmPlan {
  const kernels = gemmKernels(gpu);
  const kernel = force ?? kernels[0];
  if (!kernels.includes(kernel)) throw new Error(`matmul: this adapter cannot run the ${kernel} GEMM kernel (it needs a fixed subgroup size of ${SUB_SIZES.join(', ')})`);
  if (kernel === 'tiled') {
    const [TILE_M, TILE_N] = [tileRows(M), tileCols(N)];
    const threads = tiledThreads(TILE_M, TILE_N);
    const PREFETCH = prefetch && TILE_M * TILE_K === PREFETCH_PER_THREAD * threads && TILE_N * TILE_K === PREFETCH_PER_THREAD * threads;
    return { shader: 'matmul_forward', tileM: TILE_M, tileN: TILE_N, tileK: TILE_K, constants: { TILE_M, TILE_N, TILE_K, PREFETCH } };
  }
  if (kernel === 'direct') {
    const TM = M >= 4 ? 4 : M >= 2 ? 2 : 1;
    const WG_M = Math.min(DIRECT_WG_M, Math.ceil(M / TM));
    return { shader: 'matmul_direct_forward', tileM: WG_M * TM, tileN: DIRECT_WG_N * 4, tileK: 1, constants: { TM, WG_N: DIRECT_WG_N, WG_M } };
  }
  const sg = fixedSubgroupSize(gpu);
  const TM = Math.min(SUB_TM, Math.ceil(M / sg));
  const blocks = Math.ceil(M / (SUB_WG * TM));
  const WG = Math.ceil(Math.ceil(M / blocks) / (TM * sg)) * sg;
  const TN = Math.max(SUB_TN, sg);
  return { shader: 'matmul_subgroup_forward', tileM: WG * TM, tileN: TN, tileK: 1, constants: { TM, TN, WG, SG: sg } };
}

function roundDown(n: number, total: number, tile: number): number {
  return n >= total || n < tile ? n : n - (n % tile);
}

/** A row-major physical array [rows, ld]; `trans` says its rows index the second logical dimension. */
interface Operand {
  buf: GPUBuffer;
  trans: boolean;
  ld: number;
  bf16?: boolean; // B only: packed bf16 elements
}

/**
 * C (M, N) (+)= scale·(op(A) (M, K) · op(B) (K, N)) (+ bias) (+ resid), cut into blocks that fit the binding
 * limit. resid (M, N) is laid out as C and is windowed with it. The bias goes with the first K block and resid
 * with the last, so a product cut along K still adds the stream to the finished product (R + (v0 + b + v1), as
 * residual_forward after the product did). A scaled product (scale ≠ 1) is a bare one: no bias, resid or
 * accumulation, one K block: the factor then multiplies the whole product once, and no add can contract with
 * the multiply into an fma (WGSL lets a compiler fuse them; with scale 1, fma(v, 1, b) is exactly v + b).
 */
function gemm(
  rec: Recorder,
  kernel: string,
  g: {
    a: Operand; b: Operand; c: GPUBuffer; bias?: Binding; resid?: GPUBuffer; scale?: number;
    M: number; N: number; K: number; accumulate: boolean; limit?: number; kernel?: GemmKernel; prefetch?: boolean; slices?: number;
  },
): void {
  const gpu = rec.gpu;
  const { a, b, M, N, K } = g;
  const limit = bindingLimit(gpu, g.limit);
  const whole = gemmPlan(gpu, M, N, g.kernel, g.prefetch);
  const { tileM, tileN, tileK } = whole;
  const aRows = a.trans ? K : M;
  const bRows = b.trans ? N : K;
  // Block sizes: each operand's window must fit; C's rows and A's (or B's) physical rows share a cut.
  let mBlock = Math.min(rowsPerWindow(gpu, limit, M, N), MAX_WG * tileM);
  let nBlock = Math.min(N, MAX_WG * tileN);
  let kBlock = K;
  if (a.trans) kBlock = Math.min(kBlock, rowsPerWindow(gpu, limit, aRows, a.ld));
  else mBlock = Math.min(mBlock, rowsPerWindow(gpu, limit, aRows, a.ld));
  const bBytes = b.bf16 ? 2 : 4;
  if (b.trans) nBlock = Math.min(nBlock, rowsPerWindow(gpu, limit, bRows, b.ld, bBytes));
  else kBlock = Math.min(kBlock, rowsPerWindow(gpu, limit, bRows, b.ld, bBytes));
  mBlock = roundDown(mBlock, M, tileM);
  nBlock = roundDown(nBlock, N, tileN);
  kBlock = roundDown(kBlock, K, tileK);
  const scale = g.scale ?? 1;
  checkBareScale(kernel, scale, [g.bias, g.resid, g.accumulate]);
  if (scale !== 1 && kBlock < K) throw new Error(`${kernel}: a scaled product must fit one K block (K = ${K}, ${kBlock} per binding window)`);
  if (g.slices !== undefined && g.slices > 1) checkForcedSlices(kernel, g.slices, { M, N, K, tileK, shader: whole.shader, whole: mBlock >= M && nBlock >= N && kBlock >= K && !g.bias, limit });

  for (let m0 = 0; m0 < M; m0 += mBlock) {
    const mc = Math.min(mBlock, M - m0);
    const cw = rowWindow(gpu, g.c, m0, mc, N);
    const rw = g.resid ? rowWindow(gpu, g.resid, m0, mc, N) : null; // the same rows and base as C's window
    for (let n0 = 0; n0 < N; n0 += nBlock) {
      const nc = Math.min(nBlock, N - n0);
      for (let k0 = 0; k0 < K; k0 += kBlock) {
        const kc = Math.min(kBlock, K - k0);
        // Each operand's window holds the rows of its physical row dimension; the other dimension's
        // block start becomes a column offset inside those rows.
        const aw = a.trans ? rowWindow(gpu, a.buf, k0, kc, a.ld) : rowWindow(gpu, a.buf, m0, mc, a.ld);
        const bw = b.trans ? rowWindow(gpu, b.buf, n0, nc, b.ld, bBytes) : rowWindow(gpu, b.buf, k0, kc, b.ld, bBytes);
        const plan = gemmPlan(gpu, mc, nc, g.kernel, g.prefetch);
        const bias = k0 === 0 ? g.bias : undefined; // added once, by the first K block
        const resid = k0 + kc === K ? rw : null; // added to the finished product, by the last K block
        const flags = (g.accumulate || k0 > 0 ? 1 : 0) | (bias ? 2 : 0) | (resid ? 4 : 0);
        // Split K only where the partials can be summed straight into C: one K block, no bias, C's block
        // whole rows from its binding's start.
        const splittable = kc === K && !bias && nc === N && cw.base === 0;
        let slices = splittable ? (g.slices ?? splitSlices(plan, mc, nc, kc, limit)) : 1;
        const kChunk = slices > 1 ? Math.ceil(kc / slices / plan.tileK) * plan.tileK : kc;
        slices = Math.ceil(kc / kChunk);
        const partials = slices > 1 ? sharedScratch(gpu, 'matmul:split_k', slices * mc * nc * 4) : null;
        const aBase = aw.base + (a.trans ? m0 : k0);
        const bBase = bw.base + (b.trans ? k0 : n0);
        const vec = plan.shader === 'matmul_direct_forward' && directVec(plan, a, b, [aw.base, bw.base, aBase, bBase]);
        rec.dispatch({
          kernel,
          shader: plan.shader,
          entryPoint: vec ? 'main_vec' : undefined,
          constants: { ...plan.constants, TRANS_A: a.trans, TRANS_B: b.trans, B_BF16: b.bf16 ?? false },
          bindings: { [vec ? 'a4' : 'a']: aw.binding, [vec ? 'b4' : 'b']: bw.binding, bias: bias ?? gpu.zeros(16), c: partials ?? cw.binding, resid: (!partials && resid?.binding) || gpu.zeros(16) },
          params: [
            ['M', 'u32', mc], ['N', 'u32', nc], ['K', 'u32', kc], ['flags', 'u32', partials ? 0 : flags],
            ['a_base', 'u32', aBase], ['lda', 'u32', a.ld], ['b_base', 'u32', bBase], ['ldb', 'u32', b.ld],
            ['c_base', 'u32', partials ? 0 : cw.base + n0], ['ldc', 'u32', N], ['bias_off', 'u32', n0],
            ['k_chunk', 'u32', kChunk], ['c_split', 'u32', partials ? mc * nc : 0], ['scale', 'f32', partials ? 1 : scale],
          ],
          workgroups: [Math.ceil(nc / plan.tileN), Math.ceil(mc / plan.tileM), slices],
          // The slices' partials are the C it writes; colsum declares their sum.
          work: gemmWork(mc, nc, kc, bBytes, { cWrites: partials ? slices : 1, cRead: !partials && (flags & 1) !== 0, bias: !!bias, resid: !partials && !!resid }),
        });
        // The slices' partials, summed in slice order into C with the epilogue's scale, C's previous value and resid.
        if (partials) colsum_forward(rec, { out: cw.binding, inp: partials, P: slices, C: mc * nc, accumulate: (flags & 1) !== 0, scale, add: resid?.binding });
      }
    }
  }
}

/**
 * Whether the direct kernel takes its vec4 entry point (matmul_direct_forward.wgsl main_vec): B in f32; both
 * operands' ld, window base and block base multiples of 4 (a vec4 then never straddles a physical row, and each
 * window spans whole vec4s); and, where A is stored (K, M) and a vec4 holds 4 of its rows, 4 rows per invocation.
 */
function directVec(plan: GemmPlan, a: Operand, b: Operand, bases: number[]): boolean {
  return !b.bf16 && [a.ld, b.ld, ...bases].every((x) => x % 4 === 0) && (!a.trans || plan.constants.TM === 4);
}

/**
 * A product's declared work (Dispatch.work): 2·M·N·K FLOPs; A (M, K) and B (K, N, `bBytes` an element) read once,
 * C written `cWrites` times over (a split's slices of partials), read too when added to, the bias and R read.
 */
function gemmWork(M: number, N: number, K: number, bBytes: number, c: { cWrites: number; cRead: boolean; bias: boolean; resid: boolean }) {
  return { flops: 2 * M * N * K, bytes: 4 * M * K + bBytes * K * N + 4 * M * N * (c.cWrites + (c.cRead ? 1 : 0) + (c.resid ? 1 : 0)) + (c.bias ? 4 * N : 0) };
}

/**
 * Forced K slices (tests, bench) are refused, in one line and before anything is recorded, unless the tiled kernel
 * runs the whole product as one block without a bias (the partials then sum straight into C), the partials fit
 * one binding, and K cuts into exactly that many slices of whole TILE_K steps.
 */
function checkForcedSlices(kernel: string, slices: number, p: { M: number; N: number; K: number; tileK: number; shader: string; whole: boolean; limit: number }): void {
  if (p.shader !== 'matmul_forward' || !p.whole) throw new Error(`${kernel}: ${slices} K slices need the tiled kernel and the whole product in one block without a bias (its partials sum straight into C)`);
  if (slices * p.M * p.N * 4 > p.limit) throw new Error(`${kernel}: ${slices} K slices of ${p.M} × ${p.N} partials exceed one binding (${p.limit} bytes)`);
  const made = Math.ceil(p.K / (Math.ceil(p.K / slices / p.tileK) * p.tileK));
  if (made !== slices) throw new Error(`${kernel}: K = ${p.K} does not cut into ${slices} slices of whole ${p.tileK}-deep steps (it would be ${made})`);
}

/** A scaled product is a bare one (gemm's header says why): scale ≠ 1 with a bias, residual or accumulation is refused. */
function checkBareScale(kernel: string, scale: number, extras: unknown[]): void {
  if (scale !== 1 && extras.some(Boolean)) throw new Error(`${kernel}: a scaled product takes no bias, residual or accumulation (the scale applies to the product alone)`);
}

function checkDims(kernel: string, dims: Record<string, number>): void {
  for (const [k, v] of Object.entries(dims)) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`${kernel}: ${k} must be a positive integer, got ${v}`);
  }
}

export function matmul_forward(
  rec: Recorder,
  args: {
    out: GPUBuffer; // (M, N)
    inp: GPUBuffer; // (M, K)
    weight: GPUBuffer; // (N, K) for 'out_in', (K, N) for 'in_out'
    bias?: GPUBuffer; // (N)
    M: number;
    K: number;
    N: number;
    weightLayout: WeightLayout;
    weightDtype?: WeightDtype; // default f32
    accumulate?: boolean; // out += ... (a LoRA delta added onto its base layer's output)
    scale?: number; // out = scale·(inp·W): a bare product's factor (LoRA's scaling of x·Aᵀ; no bias, residual or accumulate); default 1
    residual?: GPUBuffer; // (M, N), not `out`: out = residual + (inp·W + bias) (a projection returning to the residual stream)
    bindingLimit?: number; // tests only
    kernel?: MatmulKernel; // tests and bench: this kernel, instead of the launcher's choice
    prefetch?: boolean; // tests and bench: false turns the tiled kernel's register prefetch off (default on)
    slices?: number; // tests and bench: the tiled kernel's K slices (1: none) instead of splitSlices' choice
  },
): void {
  const { M, K, N } = args;
  checkDims('matmul_forward', { M, K, N });
  if (args.slices !== undefined) checkDims('matmul_forward', { slices: args.slices });
  checkSize('matmul_forward', 'out', args.out, M * N);
  checkSize('matmul_forward', 'inp', args.inp, M * K);
  const bf16 = args.weightDtype === 'bf16';
  const wBytes = ELEM_BYTES[args.weightDtype ?? 'f32'];
  checkSize('matmul_forward', 'weight', args.weight, N * K, wBytes);
  const outIn = args.weightLayout === 'out_in';
  const gpu = rec.gpu;
  if (args.residual) {
    checkSize('matmul_forward', 'residual', args.residual, M * N);
    if (args.residual === args.out) throw new Error('matmul_forward: residual must not be out (one buffer cannot be read and written by a dispatch)');
  }
  const limit = bindingLimit(gpu, args.bindingLimit);
  const fits = (rows: number, rowElems: number) => rowsPerWindow(gpu, limit, rows, rowElems) === rows;
  const rowsFit = outIn && !args.accumulate && M <= ROWS_MAX && fits(M, K) && rowsPerWindow(gpu, limit, N, K, wBytes) === N && fits(M, N);
  const kernel = args.kernel;
  if (kernel === 'rows' && (args.slices ?? 1) > 1) throw new Error('matmul_forward: the few-row kernel does not split K (slices)');
  if (kernel === 'rows' || (kernel === undefined && (args.slices ?? 1) === 1 && rowsFit && adapterClass(gpu.adapter) === 'gpu')) {
    // Few rows (a decode step): one read of W by N / COLS workgroups instead of a latency-bound GEMM grid.
    if (!rowsFit) throw new Error(`matmul_forward: the few-row kernel takes up to ${ROWS_MAX} rows of an 'out_in' weight, each operand in one binding, without accumulate`);
    checkBareScale('matmul_forward', args.scale ?? 1, [args.bias, args.residual]);
    rec.dispatch({
      kernel: 'matmul_rows_forward',
      shader: 'matmul_rows_forward',
      constants: { ROWS: 2 ** Math.ceil(Math.log2(M)), SPLIT: ROWS_SPLIT, W_BF16: bf16 },
      bindings: {
        x: prefix(gpu, 'matmul_forward', 'inp', args.inp, M * K),
        w: prefix(gpu, 'matmul_forward', 'weight', args.weight, Math.ceil((N * K * wBytes) / 4)), // 4-byte words
        bias: args.bias ? prefix(gpu, 'matmul_forward', 'bias', args.bias, N) : gpu.zeros(16),
        out: prefix(gpu, 'matmul_forward', 'out', args.out, M * N),
        resid: args.residual ? prefix(gpu, 'matmul_forward', 'residual', args.residual, M * N) : gpu.zeros(16),
      },
      params: [['M', 'u32', M], ['N', 'u32', N], ['K', 'u32', K], ['flags', 'u32', (args.bias ? 2 : 0) | (args.residual ? 4 : 0)], ['scale', 'f32', args.scale ?? 1]],
      workgroups: Gpu.grid(Math.ceil(N / ROWS_COLS)),
      work: gemmWork(M, N, K, wBytes, { cWrites: 1, cRead: false, bias: !!args.bias, resid: !!args.residual }),
    });
    return;
  }
  gemm(rec, 'matmul_forward', {
    a: { buf: args.inp, trans: false, ld: K },
    b: { buf: args.weight, trans: outIn, ld: outIn ? K : N, bf16 },
    c: args.out,
    bias: args.bias ? prefix(rec.gpu, 'matmul_forward', 'bias', args.bias, N) : undefined,
    resid: args.residual,
    scale: args.scale,
    M,
    N,
    K,
    accumulate: args.accumulate ?? false,
    limit: args.bindingLimit,
    kernel,
    prefetch: args.prefetch,
    slices: args.slices,
  });
}

export function matmul_backward(
  rec: Recorder,
  args: {
    dinp?: GPUBuffer; // (M, K)
    dweight?: GPUBuffer; // same layout as weight
    dbias?: GPUBuffer; // (N)
    dout: GPUBuffer; // (M, N)
    inp: GPUBuffer; // (M, K)
    weight: GPUBuffer; // (N, K) for 'out_in', (K, N) for 'in_out'
    M: number;
    K: number;
    N: number;
    weightLayout: WeightLayout;
    weightDtype?: WeightDtype; // bf16: a frozen weight, so dinp only
    accumulate: boolean; // dweight += ..., dbias += ... (tied embeddings share one gradient)
    accumulateDinp?: boolean; // dinp += ... (an input feeding several projections)
    dinpScale?: number; // dinp = dinpScale·(dout·W), not accumulated: LoRA's scaling of du = dout·B; default 1
    bindingLimit?: number; // tests only
    kernel?: GemmKernel; // tests and bench: the GEMM kernel, instead of gemmPlan's choice
    prefetch?: boolean; // tests and bench: false turns the tiled kernel's register prefetch off (default on)
  },
): void {
  const { M, K, N } = args;
  checkDims('matmul_backward', { M, K, N });
  if (args.dweight && args.weightDtype === 'bf16') throw new Error('matmul_backward: a bf16 weight is frozen; it has no dweight');
  checkSize('matmul_backward', 'dout', args.dout, M * N);
  const outIn = args.weightLayout === 'out_in';
  const limit = args.bindingLimit;
  const { kernel, prefetch } = args;
  if (args.dinp) {
    // dinp (M, K) = dout (M, N) · W' (N, K), W' = W for [N, K] storage, Wᵀ for [K, N].
    checkSize('matmul_backward', 'dinp', args.dinp, M * K);
    checkSize('matmul_backward', 'weight', args.weight, N * K, ELEM_BYTES[args.weightDtype ?? 'f32']);
    gemm(rec, 'matmul_backward:dinp', {
      a: { buf: args.dout, trans: false, ld: N },
      b: { buf: args.weight, trans: !outIn, ld: outIn ? K : N, bf16: args.weightDtype === 'bf16' },
      c: args.dinp,
      scale: args.dinpScale,
      M,
      N: K,
      K: N,
      accumulate: args.accumulateDinp ?? false,
      limit,
      kernel,
      prefetch,
    });
  }
  if (args.dweight) {
    checkSize('matmul_backward', 'dweight', args.dweight, N * K);
    checkSize('matmul_backward', 'inp', args.inp, M * K);
    const dout: Operand = { buf: args.dout, trans: true, ld: N };
    const inp: Operand = { buf: args.inp, trans: true, ld: K };
    // 'out_in': dW (N, K) = doutᵀ · inp.  'in_out': dW (K, N) = inpᵀ · dout.
    gemm(rec, 'matmul_backward:dweight', {
      a: outIn ? dout : inp,
      b: outIn ? { ...inp, trans: false } : { ...dout, trans: false },
      c: args.dweight,
      M: outIn ? N : K,
      N: outIn ? K : N,
      K: M,
      accumulate: args.accumulate,
      limit,
      kernel,
      prefetch,
    });
  }
  if (args.dbias) {
    const gpu = rec.gpu;
    const dbias = prefix(gpu, 'matmul_backward', 'dbias', args.dbias, N);
    const rows = rowsPerWindow(gpu, bindingLimit(gpu, limit), M, N);
    for (let m0 = 0; m0 < M; m0 += rows) {
      const mc = Math.min(rows, M - m0);
      const w = rowWindow(gpu, args.dout, m0, mc, N);
      rec.dispatch({
        kernel: 'matmul_backward:dbias',
        shader: 'matmul_backward',
        constants: { WG: BIAS_WG },
        bindings: { dout: w.binding, dbias },
        params: [['rows', 'u32', mc], ['N', 'u32', N], ['base', 'u32', w.base], ['accumulate', 'u32', args.accumulate || m0 > 0 ? 1 : 0]],
        workgroups: Gpu.grid(Math.ceil(N / BIAS_WG)),
        work: { bytes: 4 * mc * N + 4 * N * (args.accumulate || m0 > 0 ? 2 : 1) },
      });
    }
  }
}
