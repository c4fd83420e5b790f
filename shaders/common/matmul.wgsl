// The GEMM's operands, shared by its kernels (matmul_forward.wgsl: workgroup tiles, for GPUs;
// matmul_subgroup_forward.wgsl: subgroup broadcasts, for lavapipe; matmul_direct_forward.wgsl: no sharing,
// for SwiftShader), included with
//   //#include "common/matmul.wgsl"
// C = scale·(op(A) · op(B)) (+ bias) (+ C) (+ R), op(A): (M, K), op(B): (K, N), C: (M, N) row-major windows;
// element (r, c) of an operand block is base + r·ld + c of its binding (matmul_forward.wgsl's header has the
// details). The epilogue (store_c) folds in what used to be a dispatch of its own after the product: `scale`
// (a LoRA module's scaling of x·Aᵀ and of dout·B: a bare product, no bias, C or R added, as the launcher
// enforces), and R, a residual stream laid out as C (the o_proj and down_proj outputs added to the stream they
// return to; a product cut along K adds it with its last block). Each is one rounding in the order the separate
// kernels made it, so the result is bitwise the product followed by an f32 multiply or by residual_forward.
//
// B_BF16: B holds packed bfloat16 (common/bf16.wgsl), widened to f32 exactly; accumulation stays f32. B's base /
// ld count bf16 elements.

//#include "common/bf16.wgsl"

override TRANS_A: bool = false; // A stored (K, M): physical rows are k
override TRANS_B: bool = false; // B stored (N, K): physical rows are n
override B_BF16: bool = false;  // B is packed bf16 (see above)

struct Params {
  M: u32, N: u32, K: u32, flags: u32, // flags: 1 = add C's previous value, 2 = add bias, 4 = add R (resid)
  a_base: u32, lda: u32, b_base: u32, ldb: u32,
  c_base: u32, ldc: u32, bias_off: u32,
  // Split K (matmul_forward.wgsl only; the others leave it at k_chunk = K, one slice): workgroup z takes
  // k in [z·k_chunk, min(K, (z + 1)·k_chunk)) and writes its partial C at c_base + z·c_split.
  k_chunk: u32, c_split: u32,
  scale: f32, // the product's factor (1: none); bias, C and R are added unscaled
}

@group(0) @binding(0) var<storage, read> a: array<f32>;        // op(A) (M, K), window
@group(0) @binding(1) var<storage, read> b: array<u32>;        // op(B) (K, N), window: f32 bits, or bf16 pairs
@group(0) @binding(2) var<storage, read> bias: array<f32>;     // (N) or a dummy
@group(0) @binding(3) var<storage, read_write> c: array<f32>;  // (M, N), window
@group(0) @binding(4) var<storage, read> resid: array<f32>;    // R (M, N): a window laid out as C's (same base and ldc), or a dummy
@group(0) @binding(5) var<uniform> p: Params;

/** Element i of B's binding as f32 (f32 bits, or the bf16 half-word widened exactly). */
fn b_at(i: u32) -> f32 {
  if (B_BF16) { return bf16_widen(b[i >> 1u], i); }
  return bitcast<f32>(b[i]);
}

/**
 * A's (m, k) of the block at a0, B's (k, n) of the block at b0 (the kernels pass p.a_base / p.b_base), in
 * either stored orientation (no bounds check).
 */
fn a_elem(a0: u32, m: u32, k: u32) -> f32 {
  if (TRANS_A) { return a[a0 + k * p.lda + m]; }
  return a[a0 + m * p.lda + k];
}

fn b_elem(b0: u32, k: u32, n: u32) -> f32 {
  if (TRANS_B) { return b_at(b0 + n * p.ldb + k); }
  return b_at(b0 + k * p.ldb + n);
}

/** The epilogue: C[idx] (column n) = scale·v (+ bias[n]) (+ C[idx]) (+ R[idx]), rounded after each step. */
fn store_c(idx: u32, n: u32, v: f32) {
  var r = v * p.scale;
  if ((p.flags & 2u) != 0u) { r += bias[p.bias_off + n]; }
  if ((p.flags & 1u) != 0u) { r += c[idx]; }
  if ((p.flags & 4u) != 0u) { r += resid[idx]; }
  c[idx] = r;
}
