// Tiled GEMM  C = op(A) · op(B) (+ bias) (+ C),  with op(A): (M, K), op(B): (K, N), C: (M, N) row-major.
// One shader serves every matmul of the model on a GPU: the forward (B = Wᵀ for nn.Linear [out, in]
// weights, B = W for GPT-2 Conv1D [in, out]) and both backward products (dinp = dout·W, dweight = doutᵀ·x),
// which differ only in which operand is read transposed (TRANS_A / TRANS_B override constants). Lavapipe
// runs the same products with matmul_subgroup_forward.wgsl, SwiftShader with matmul_direct_forward.wgsl
// (their headers say why).
//
// Each workgroup computes a TILE_M × TILE_N block of C, staging TILE_K-deep slices of A and B in
// workgroup memory (common/matmul_tiles.wgsl); each invocation keeps a 4 × 4 register block (one vec4 of
// C columns per row), so every value loaded from workgroup memory feeds 4 FMAs. matmul_wide_forward.wgsl
// keeps 8 × 8.
//
// Operands bigger than maxStorageBufferBindingSize are bound as windows of whole physical rows; the
// launcher passes, per operand, `base` (element index of the block's first element inside the
// binding: the window's misalignment plus the column offset of the block inside a physical row), so
// element (r, c) of the block is base + r·ld + c. A K split accumulates into C.
//
// B_BF16: B holds packed bfloat16 weights (common/matmul.wgsl). The operands, their bindings and the
// epilogue are shared with matmul_subgroup_forward.wgsl and matmul_direct_forward.wgsl (src/kernels/matmul.ts).

//#include "common/matmul.wgsl"

override TILE_M: u32 = 64;
override TILE_N: u32 = 64;
override TILE_K: u32 = 16;

//#include "common/matmul_tiles.wgsl"

const TM: u32 = 4u; // rows of C per invocation
const TN: u32 = 4u; // columns of C per invocation (one vec4)

@compute @workgroup_size(TILE_N / TN, TILE_M / TM)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let threads = (TILE_N / TN) * (TILE_M / TM);
  let t = lid.y * (TILE_N / TN) + lid.x;
  let m0 = wid.y * TILE_M;
  let n0 = wid.x * TILE_N;
  let c0 = p.c_base;
  var acc: array<vec4f, TM>;

  for (var k0 = 0u; k0 < p.K; k0 += TILE_K) {
    fill_tiles(t, threads, m0, n0, k0);
    workgroupBarrier();
    for (var kk = 0u; kk < TILE_K; kk++) {
      let av = As[kk * A_LD + lid.y];
      let bv = Bs[kk * B_LD + lid.x];
      acc[0] = fma(vec4f(av.x), bv, acc[0]);
      acc[1] = fma(vec4f(av.y), bv, acc[1]);
      acc[2] = fma(vec4f(av.z), bv, acc[2]);
      acc[3] = fma(vec4f(av.w), bv, acc[3]);
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < TM; i++) {
    let m = m0 + lid.y * TM + i;
    if (m >= p.M) { break; }
    for (var j = 0u; j < TN; j++) {
      let n = n0 + lid.x * TN + j;
      if (n >= p.N) { break; }
      store_c(c0 + m * p.ldc + n, n, acc[i][j]);
    }
  }
}
