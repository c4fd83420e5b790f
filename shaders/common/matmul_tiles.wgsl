// The workgroup tiles of the tiled GEMM kernels (matmul_forward.wgsl: 4 × 4 per invocation;
// matmul_wide_forward.wgsl: 8 × 8), included after common/matmul.wgsl: TILE_K-deep slices of op(A) and
// op(B) staged in workgroup memory as vec4s of 4 consecutive rows (As) or columns (Bs), zero past M, N, K.
// Loads are mapped so that consecutive invocations read consecutive addresses of the operand's physical
// (row-major) layout. The including shader declares TILE_M, TILE_N (multiples of 4) and TILE_K.

// Each k-row of a tile is padded by one vec4 (A_LD, B_LD vec4s apart): a non-transposed A (and a transposed B,
// the nn.Linear weight of every forward) is staged by consecutive invocations at consecutive k of one row m,
// which unpadded are TILE_M floats apart, all in one bank (a 16-way conflict on each store); padded they
// spread over 8 banks. The readers index rows with A_LD / B_LD.
override A_LD: u32 = TILE_M / 4u + 1u;
override B_LD: u32 = TILE_N / 4u + 1u;
var<workgroup> As: array<vec4f, TILE_K * A_LD>; // [k][m]: vec4 = 4 consecutive rows m
var<workgroup> Bs: array<vec4f, TILE_K * B_LD>; // [k][n]: vec4 = 4 consecutive columns n

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
    As[kk * A_LD + mm / 4u][mm % 4u] = load_a(p.a_base, m0 + mm, k0 + kk);
  }
  for (var e = t; e < TILE_N * TILE_K; e += threads) {
    var nn: u32;
    var kk: u32;
    if (TRANS_B) { nn = e / TILE_K; kk = e % TILE_K; } else { kk = e / TILE_N; nn = e % TILE_N; }
    Bs[kk * B_LD + nn / 4u][nn % 4u] = load_b(p.b_base, k0 + kk, n0 + nn);
  }
}
