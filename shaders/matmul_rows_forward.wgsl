// Few-row product  out (M, N) = scale·(x (M, K) · Wᵀ) (+ bias) (+ resid),  W (N, K) row-major (HF nn.Linear [out, in],
// the tied lm_head wte (V, C)): the decode step, where M is a handful of rows (one per sequence).
// The tiled GEMM (matmul_forward.wgsl) gives such a product only ceil(N / 64) workgroups, each walking
// all of K serially with two barriers per 16-deep slice: latency-bound, the GPU mostly idle, while
// the product is just one read of W (a GEMV over M rows at once) and should run at memory bandwidth.
// GPUs only: on CPU adapters matmul_subgroup_forward.wgsl is faster at any row count (src/kernels/matmul.ts).
//
// Each workgroup computes COLS output columns for all rows: its SPLIT invocations stride over K, so
// neighbouring invocations read neighbouring elements of each weight row (coalesced), and each keeps a
// ROWS × COLS register block of partial sums (every weight load feeds ROWS FMAs, every x load COLS).
// A tree reduction in workgroup memory then adds the SPLIT partial blocks: at each level the upper
// half of the remaining invocations writes its block and the lower half adds it, so `red` holds
// SPLIT/2 blocks: 32 × 16 × 4 f32 = 8 KiB with the defaults, within the guaranteed 16 KiB
// (maxComputeWorkgroupStorageSize).
// W_BF16: W holds packed bfloat16 (common/bf16.wgsl: a frozen base in its checkpoint dtype, the LoRA decode's
// projections and tied head), widened to f32 exactly; the sums stay f32.
// The launcher binds whole operands (only products whose operands fit one binding come here) and picks
// ROWS, the smallest power of two >= M (one pipeline per size, so small M does few wasted FMAs); rows
// past M and columns past N read the last valid row/column (in bounds, no branch in the inner loop)
// and are never written.

//#include "common/bf16.wgsl"

override ROWS: u32 = 16;  // rows of x in the register block: M rounded up to a power of two, <= MAX_ROWS
override W_BF16: bool = false;
override SPLIT: u32 = 64; // invocations per workgroup, striding over K; power of two (tree reduction)

// Private arrays need const sizes (WGSL allows override-sized arrays only in workgroup memory): the
// register block is MAX_ROWS × COLS, of which loops bounded by ROWS use the first ROWS rows.
const MAX_ROWS: u32 = 16u;
const COLS: u32 = 4u; // output columns per workgroup

// flags: 2 = add bias, 4 = add resid (the bits of common/matmul.wgsl's epilogue, in its order: a scaled product,
// bias, the residual stream); scale 1 for none.
struct Params { M: u32, N: u32, K: u32, flags: u32, scale: f32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;          // (M, K)
@group(0) @binding(1) var<storage, read> w: array<u32>;          // (N, K): f32 bits, or bf16 pairs
@group(0) @binding(2) var<storage, read> bias: array<f32>;       // (N) or a dummy
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // (M, N)
@group(0) @binding(4) var<storage, read> resid: array<f32>;      // (M, N) or a dummy
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<f32, SPLIT / 2u * ROWS * COLS>; // [r·COLS + c][t]: consecutive t, consecutive banks

/** Element i of W as f32. */
fn w_at(i: u32) -> f32 {
  if (W_BF16) { return bf16_widen(w[i >> 1u], i); }
  return bitcast<f32>(w[i]);
}

@compute @workgroup_size(SPLIT)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let n0 = (wid.x + wid.y * nwg.x) * COLS;
  if (n0 >= p.N) { return; } // whole workgroup past N (grid rounding): uniform, before any barrier
  let t = lid.x;
  var w_row: array<u32, COLS>;
  for (var c = 0u; c < COLS; c++) { w_row[c] = min(n0 + c, p.N - 1u) * p.K; }
  var x_row: array<u32, MAX_ROWS>;
  for (var r = 0u; r < ROWS; r++) { x_row[r] = min(r, p.M - 1u) * p.K; }

  var acc: array<f32, MAX_ROWS * COLS>; // [r·COLS + c]
  for (var k = t; k < p.K; k += SPLIT) {
    var wv: array<f32, COLS>;
    for (var c = 0u; c < COLS; c++) { wv[c] = w_at(w_row[c] + k); }
    for (var r = 0u; r < ROWS; r++) {
      let xv = x[x_row[r] + k];
      for (var c = 0u; c < COLS; c++) { acc[r * COLS + c] = fma(xv, wv[c], acc[r * COLS + c]); }
    }
  }

  let half = SPLIT / 2u;
  for (var s = half; s > 0u; s >>= 1u) {
    if (t >= s && t < 2u * s) {
      for (var i = 0u; i < ROWS * COLS; i++) { red[i * half + t - s] = acc[i]; }
    }
    workgroupBarrier();
    if (t < s) {
      for (var i = 0u; i < ROWS * COLS; i++) { acc[i] += red[i * half + t]; }
    }
    workgroupBarrier();
  }

  if (t == 0u) {
    for (var c = 0u; c < COLS; c++) {
      let n = n0 + c;
      if (n >= p.N) { break; }
      for (var r = 0u; r < min(ROWS, p.M); r++) {
        var v = acc[r * COLS + c] * p.scale;
        if ((p.flags & 2u) != 0u) { v += bias[n]; }
        if ((p.flags & 4u) != 0u) { v += resid[r * p.N + n]; }
        out[r * p.N + n] = v;
      }
    }
  }
}
