// GEMM C = scale·(op(A) · op(B)) (+ bias) (+ C) (+ R) for SwiftShader, the same products, operands and parameters as
// matmul_forward.wgsl (common/matmul.wgsl). SwiftShader runs the invocations of a workgroup as coroutines
// and pays a switch of every one at each barrier, and its subgroup shuffles are slow too: the tiled kernel's
// barriers and the subgroup kernel's shuffles cost more than its loads save (src/kernels/matmul.ts). Here
// nothing is shared: each invocation reads its own TM rows of A and 4 columns of B straight from memory
// (the CPU's caches stage them) and keeps the TM × 4 block of C in registers.
// Rows past M and columns past N are clamped to the last one for the loads (their results are not stored).
//
// Two entry points, one multiply-accumulate (fma_k) and one store (store_block):
// - main_vec, the launcher's choice wherever it can: B in f32, both operands' ld and bases multiples of 4, and TM = 4
//   where A is stored (K, M). It
//   binds A and B as arrays of vec4 (a4, b4, at the bindings of a and b) and takes K four at a time: a 4 × 4
//   block of each operand in four vec4 loads, either straight (A stored (K, M): a vec4 holds 4 rows at one k;
//   B stored (K, N): 4 columns) or transposed in registers (A stored (M, K), B stored (N, K): a vec4 holds 4 k of
//   one row). SwiftShader loads per lane, so a vec4 is one load where main makes four. The aligned ld and base
//   keep every vec4 inside one physical row of its operand, and a binding of such rows spans whole vec4s. The
//   last K % 4 steps take one more block and use its first columns.
// - main: any ld or base, and bf16 B (common/matmul.wgsl b_at): one element a load.
//
// Both accumulate one fma per k in increasing k, as matmul_forward.wgsl does: the same sums, bitwise.

//#include "common/matmul.wgsl"

override TM: u32 = 4;       // rows of C per invocation (1, 2 or 4)
override WG_N: u32 = 16;    // invocations per workgroup along N (4 columns each)
override WG_M: u32 = 4;     // invocations per workgroup along M (TM rows each)

// main_vec's operands: the bindings of a and b (common/matmul.wgsl) seen as vec4s; B is f32 there.
@group(0) @binding(0) var<storage, read> a4: array<vec4f>;
@group(0) @binding(1) var<storage, read> b4: array<vec4f>;

// Row i of this invocation's block of C (columns n0 … n0 + 3); rows past TM stay zero.
var<private> acc0: vec4f;
var<private> acc1: vec4f;
var<private> acc2: vec4f;
var<private> acc3: vec4f;

/** One k of the block: ak = A(m0 … m0 + 3, k), bk = B(k, n0 … n0 + 3). */
fn fma_k(ak: vec4f, bk: vec4f) {
  acc0 = fma(vec4f(ak.x), bk, acc0);
  if (TM > 1u) { acc1 = fma(vec4f(ak.y), bk, acc1); }
  if (TM > 2u) {
    acc2 = fma(vec4f(ak.z), bk, acc2);
    acc3 = fma(vec4f(ak.w), bk, acc3);
  }
}

/** This invocation's block of C, the rows and columns inside (M, N), through the epilogue. */
fn store_block(m0: u32, n0: u32) {
  let rows = array<vec4f, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < TM; i++) {
    let m = m0 + i;
    if (m >= p.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + j;
      if (n >= p.N) { break; }
      store_c(p.c_base + m * p.ldc + n, n, rows[i][j]);
    }
  }
}

/** Rows m0 … m0 + 3 and columns n0 … n0 + 3, each clamped to the last one for the loads. */
fn clamped(v0: u32, last: u32) -> vec4u {
  return vec4u(v0, min(v0 + 1u, last), min(v0 + 2u, last), min(v0 + 3u, last));
}

@compute @workgroup_size(WG_N, WG_M)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let m0 = (wid.y * WG_M + lid.y) * TM;
  let n0 = (wid.x * WG_N + lid.x) * 4u;
  if (m0 >= p.M || n0 >= p.N) { return; } // no barriers: idle invocations may leave
  let r = clamped(m0, p.M - 1u);
  let cols = clamped(n0, p.N - 1u);
  for (var k = 0u; k < p.K; k++) {
    let bv = vec4f(b_elem(p.b_base, k, cols.x), b_elem(p.b_base, k, cols.y), b_elem(p.b_base, k, cols.z), b_elem(p.b_base, k, cols.w));
    fma_k(vec4f(a_elem(p.a_base, r.x, k), a_elem(p.a_base, r.y, k), a_elem(p.a_base, r.z, k), a_elem(p.a_base, r.w, k)), bv);
  }
  store_block(m0, n0);
}

// ---------------------------------------------------------------- main_vec

/**
 * Where an operand's block starts, in vec4s. Stored with k along its rows (A (M, K), B (N, K)): one start per row
 * of the block (idx: the rows, clamped), each vec4 there holding 4 k. Stored with k across its rows (A (K, M),
 * B (K, N)): .x, the vec4 at k = 0 holding the block's 4 rows of A or columns of B (v0 a multiple of 4).
 */
fn starts(along_k: bool, base: u32, ld: u32, idx: vec4u, v0: u32) -> vec4u {
  if (along_k) { return (vec4u(base) + idx * ld) >> vec4u(2u); }
  return vec4u((base + v0) >> 2u);
}

/**
 * An operand's 4 × 4 block at k … k + 3 (k a multiple of 4) as a matrix whose column kk holds its 4 rows of A or 4
 * columns of B at k + kk. Along k: four vec4s, transposed in registers. Across: four physical rows, clamped to
 * row K − 1 (the K tail's block reads no row past the operand's K).
 */
fn block(x: ptr<storage, array<vec4f>, read>, along_k: bool, at: vec4u, ld: u32, k: u32) -> mat4x4f {
  if (along_k) {
    let kv = k >> 2u;
    let u = x[at.x + kv];
    let v = x[at.y + kv];
    let w = x[at.z + kv];
    let z = x[at.w + kv];
    return mat4x4f(vec4f(u.x, v.x, w.x, z.x), vec4f(u.y, v.y, w.y, z.y), vec4f(u.z, v.z, w.z, z.z), vec4f(u.w, v.w, w.w, z.w));
  }
  let s = ld >> 2u;
  let last = p.K - 1u;
  return mat4x4f(x[at.x + k * s], x[at.x + min(k + 1u, last) * s], x[at.x + min(k + 2u, last) * s], x[at.x + min(k + 3u, last) * s]);
}

@compute @workgroup_size(WG_N, WG_M)
fn main_vec(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let m0 = (wid.y * WG_M + lid.y) * TM;
  let n0 = (wid.x * WG_N + lid.x) * 4u;
  if (m0 >= p.M || n0 >= p.N) { return; }
  let at_a = starts(!TRANS_A, p.a_base, p.lda, clamped(m0, p.M - 1u), m0);
  let at_b = starts(TRANS_B, p.b_base, p.ldb, clamped(n0, p.N - 1u), n0);
  let k4 = p.K & ~3u;
  for (var k = 0u; k < k4; k += 4u) {
    let ab = block(&a4, !TRANS_A, at_a, p.lda, k);
    let bb = block(&b4, TRANS_B, at_b, p.ldb, k);
    fma_k(ab[0], bb[0]);
    fma_k(ab[1], bb[1]);
    fma_k(ab[2], bb[2]);
    fma_k(ab[3], bb[3]);
  }
  if (k4 < p.K) { // the last K % 4 steps: one more block, its first columns
    let ab = block(&a4, !TRANS_A, at_a, p.lda, k4);
    let bb = block(&b4, TRANS_B, at_b, p.ldb, k4);
    fma_k(ab[0], bb[0]);
    if (k4 + 1u < p.K) { fma_k(ab[1], bb[1]); }
    if (k4 + 2u < p.K) { fma_k(ab[2], bb[2]); }
  }
  store_block(m0, n0);
}
