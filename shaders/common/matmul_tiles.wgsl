// The workgroup tiles of the tiled GEMM kernels (matmul_forward.wgsl: 4 × 4 per invocation;
// matmul_wide_forward.wgsl: 8 × 8), included after common/matmul.wgsl: TILE_K-deep slices of op(A) and
// op(B) staged in workgroup memory as vec4s of 4 consecutive rows (As) or columns (Bs), zero past M, N, K.
// Loads are mapped so that consecutive invocations read consecutive addresses of the operand's physical
// (row-major) layout. The including shader declares TILE_M, TILE_N (multiples of 4) and TILE_K.

var<workgroup> As: array<vec4f, TILE_K * TILE_M / 4u>; // [k][m]: vec4 = 4 consecutive rows m
var<workgroup> Bs: array<vec4f, TILE_K * TILE_N / 4u>; // [k][n]: vec4 = 4 consecutive columns n

fn load_a(a0: u32, m: u32, k: u32) -> f32 {
  if (m >= p.M || k >= p.K) { return 0.0; }
  return a_elem(a0, m, k);
}

fn load_b(b0: u32, k: u32, n: u32) -> f32 {
  if (k >= p.K || n >= p.N) { return 0.0; }
  return b_elem(b0, k, n);
}

/** Invocation t of `threads` stages the slices at k0 of the block at (m0, n0) (call between barriers). */
fn fill_tiles(t: u32, threads: u32, m0: u32, n0: u32, k0: u32) {
  for (var e = t; e < TILE_M * TILE_K; e += threads) {
    var mm: u32;
    var kk: u32;
    if (TRANS_A) { kk = e / TILE_M; mm = e % TILE_M; } else { mm = e / TILE_K; kk = e % TILE_K; }
    As[(kk * TILE_M + mm) / 4u][mm % 4u] = load_a(p.a_base, m0 + mm, k0 + kk);
  }
  for (var e = t; e < TILE_N * TILE_K; e += threads) {
    var nn: u32;
    var kk: u32;
    if (TRANS_B) { nn = e / TILE_K; kk = e % TILE_K; } else { kk = e / TILE_N; nn = e % TILE_N; }
    Bs[(kk * TILE_N + nn) / 4u][nn % 4u] = load_b(p.b_base, k0 + kk, n0 + nn);
  }
}
