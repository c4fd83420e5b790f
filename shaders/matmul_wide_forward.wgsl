// Tiled GEMM with an 8 × 8 register block per invocation: C = op(A) · op(B) (+ bias) (+ C), the products,
// operands, windows and epilogue of matmul_forward.wgsl (common/matmul.wgsl, common/matmul_tiles.wgsl), in
// TILE_M × TILE_N blocks of C (128 or 64 each: the launcher takes the largest that still gives the GPU enough
// workgroups) per workgroup of (TILE_N / 8) × (TILE_M / 8) invocations. Each step of the inner loop reads two
// vec4s of A and two of B from workgroup memory for 64 FMAs (matmul_forward: one and one for 16), the
// compute-to-load ratio an f32 GEMM needs near a GPU's FMA peak.
//
// Invocation (x, y) holds rows {4y .. 4y + 3, TILE_M / 2 + 4y .. + 3} and columns {4x .. 4x + 3,
// TILE_N / 2 + 4x .. + 3} of the block, so that neighbours read neighbouring vec4s. The register block `acc`
// is indexed only by constants (the inner loop and the epilogue are written out): a GPU compiler keeps it in
// registers. An earlier 8 × 8 variant whose block was indexed by loop counters bounded by override constants
// ran about 7× slower on an H100 (kept in local memory; issue 23's progress note of stop 29): the overrides
// here only size the tile and offset addresses. Workgroup memory at 128 × 128: 2 × 16 × (128 + 4) × 4 bytes =
// 16.5 KiB (padded rows: common/matmul_tiles.wgsl), just over WebGPU's default 16 KiB: the launcher offers
// this kernel only where the device allows it.

//#include "common/matmul.wgsl"

override TILE_M: u32 = 128u; // 64 or 128
override TILE_N: u32 = 128u; // 64 or 128
const TILE_K: u32 = 16u;

//#include "common/matmul_tiles.wgsl"

/** C's row m, columns n .. n + 3 of the dispatch's block (those within M and N), from v. */
fn store4(m: u32, n: u32, v: vec4f) {
  if (m >= p.M) { return; }
  for (var j = 0u; j < 4u; j++) {
    if (n + j < p.N) { store_c(p.c_base + m * p.ldc + n + j, n + j, v[j]); }
  }
}

@compute @workgroup_size(TILE_N / 8u, TILE_M / 8u)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = lid.y * (TILE_N / 8u) + lid.x;
  let m0 = wid.y * TILE_M;
  let n0 = wid.x * TILE_N;
  // acc[2 r + h]: row r of the invocation's 8 (a0.xyzw, a1.xyzw), column half h (b0, b1).
  var acc: array<vec4f, 16>;

  for (var k0 = 0u; k0 < p.K; k0 += TILE_K) {
    fill_tiles(t, (TILE_N / 8u) * (TILE_M / 8u), m0, n0, k0);
    workgroupBarrier();
    for (var kk = 0u; kk < TILE_K; kk++) {
      let a0 = As[kk * A_LD + lid.y];
      let a1 = As[kk * A_LD + TILE_M / 8u + lid.y];
      let b0 = Bs[kk * B_LD + lid.x];
      let b1 = Bs[kk * B_LD + TILE_N / 8u + lid.x];
      acc[0] = fma(vec4f(a0.x), b0, acc[0]);
      acc[1] = fma(vec4f(a0.x), b1, acc[1]);
      acc[2] = fma(vec4f(a0.y), b0, acc[2]);
      acc[3] = fma(vec4f(a0.y), b1, acc[3]);
      acc[4] = fma(vec4f(a0.z), b0, acc[4]);
      acc[5] = fma(vec4f(a0.z), b1, acc[5]);
      acc[6] = fma(vec4f(a0.w), b0, acc[6]);
      acc[7] = fma(vec4f(a0.w), b1, acc[7]);
      acc[8] = fma(vec4f(a1.x), b0, acc[8]);
      acc[9] = fma(vec4f(a1.x), b1, acc[9]);
      acc[10] = fma(vec4f(a1.y), b0, acc[10]);
      acc[11] = fma(vec4f(a1.y), b1, acc[11]);
      acc[12] = fma(vec4f(a1.z), b0, acc[12]);
      acc[13] = fma(vec4f(a1.z), b1, acc[13]);
      acc[14] = fma(vec4f(a1.w), b0, acc[14]);
      acc[15] = fma(vec4f(a1.w), b1, acc[15]);
    }
    workgroupBarrier();
  }

  // Rows and columns of the dispatch's block (store_c's column also indexes the bias).
  let r0 = m0 + 4u * lid.y;
  let r1 = r0 + TILE_M / 2u;
  let c0 = n0 + 4u * lid.x;
  let c1 = c0 + TILE_N / 2u;
  store4(r0, c0, acc[0]);
  store4(r0, c1, acc[1]);
  store4(r0 + 1u, c0, acc[2]);
  store4(r0 + 1u, c1, acc[3]);
  store4(r0 + 2u, c0, acc[4]);
  store4(r0 + 2u, c1, acc[5]);
  store4(r0 + 3u, c0, acc[6]);
  store4(r0 + 3u, c1, acc[7]);
  store4(r1, c0, acc[8]);
  store4(r1, c1, acc[9]);
  store4(r1 + 1u, c0, acc[10]);
  store4(r1 + 1u, c1, acc[11]);
  store4(r1 + 2u, c0, acc[12]);
  store4(r1 + 2u, c1, acc[13]);
  store4(r1 + 3u, c0, acc[14]);
  store4(r1 + 3u, c1, acc[15]);
}
