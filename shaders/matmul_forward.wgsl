// Tiled GEMM  C = op(A) · op(B) (+ bias) (+ C),  with op(A): (M, K), op(B): (K, N), C: (M, N) row-major.
// One shader serves every matmul of the model on a GPU: the forward (B = Wᵀ for nn.Linear [out, in]
// weights, B = W for GPT-2 Conv1D [in, out]) and both backward products (dinp = dout·W, dweight = doutᵀ·x),
// which differ only in which operand is read transposed (TRANS_A / TRANS_B override constants). CPU
// adapters run the same products with matmul_subgroup_forward.wgsl instead (its header says why).
//
// Each workgroup computes a TILE_M × TILE_N block of C, staging TILE_K-deep slices of A and B in
// workgroup memory; each invocation keeps a 4 × 4 register block (one vec4 of C columns per row),
// so every value loaded from workgroup memory feeds 4 FMAs. Tile loads are mapped so that consecutive
// invocations read consecutive addresses of the operand's physical (row-major) layout.
//
// Operands bigger than maxStorageBufferBindingSize are bound as windows of whole physical rows; the
// launcher passes, per operand, `base` (element index of the block's first element inside the
// binding: the window's misalignment plus the column offset of the block inside a physical row), so
// element (r, c) of the block is base + r·ld + c. A K split accumulates into C.
//
// Batched use (attention: one product per (batch, head) pair, llm.c style): workgroup z indexes the
// batch; z = zo·z_inner + zi moves each operand by zo·*_zo + zi·*_zi elements (B by (zi / b_div)·b_zi,
// so grouped-query heads share their key/value head). CAUSAL lets attention skip work that multiplies
// masked probabilities (query row m sees key n iff n <= m + causal_off):
//   1: C holds scores (rows m = queries, columns n = keys): skip tiles entirely above the diagonal;
//   2: the inner dimension is keys (P·V, g·K): stop at the last key the tile's queries can see;
//   3: the inner dimension is queries (Pᵀ·dO, gᵀ·Q, rows m = keys): start at the first query that sees them.
//
// B_BF16: B holds packed bfloat16 weights (common/matmul.wgsl). The operands, their bindings and the
// epilogue are shared with matmul_subgroup_forward.wgsl, the kernel CPU adapters get (src/kernels/matmul.ts).

//#include "common/matmul.wgsl"

override TILE_M: u32 = 64;
override TILE_N: u32 = 64;
override TILE_K: u32 = 16;
override CAUSAL: u32 = 0u;       // 0 none, 1/2/3: see the header

const TM: u32 = 4u; // rows of C per invocation
const TN: u32 = 4u; // columns of C per invocation (one vec4)

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

@compute @workgroup_size(TILE_N / TN, TILE_M / TM)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let threads = (TILE_N / TN) * (TILE_M / TM);
  let t = lid.y * (TILE_N / TN) + lid.x;
  let m0 = wid.y * TILE_M;
  let n0 = wid.x * TILE_N;
  let bases = operand_bases(wid.z);
  let a0 = bases.x;
  let b0 = bases.y;
  let c0 = bases.z;
  // Workgroup-uniform causal limits (keep the barriers below in uniform control flow).
  let m_last = min(m0 + TILE_M, p.M) - 1u + p.causal_off;
  if (CAUSAL == 1u && n0 > m_last) { return; }
  var k_begin = 0u;
  var k_end = p.K;
  if (CAUSAL == 2u) { k_end = min(p.K, m_last + 1u); }
  if (CAUSAL == 3u) { k_begin = (max(m0, p.causal_off) - p.causal_off) / TILE_K * TILE_K; }
  var acc: array<vec4f, TM>;

  for (var k0 = k_begin; k0 < k_end; k0 += TILE_K) {
    for (var e = t; e < TILE_M * TILE_K; e += threads) {
      var mm: u32;
      var kk: u32;
      if (TRANS_A) { kk = e / TILE_M; mm = e % TILE_M; } else { mm = e / TILE_K; kk = e % TILE_K; }
      As[(kk * TILE_M + mm) / 4u][mm % 4u] = load_a(a0, m0 + mm, k0 + kk);
    }
    for (var e = t; e < TILE_N * TILE_K; e += threads) {
      var nn: u32;
      var kk: u32;
      if (TRANS_B) { nn = e / TILE_K; kk = e % TILE_K; } else { kk = e / TILE_N; nn = e % TILE_N; }
      Bs[(kk * TILE_N + nn) / 4u][nn % 4u] = load_b(b0, k0 + kk, n0 + nn);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TILE_K; kk++) {
      let av = As[kk * (TILE_M / 4u) + lid.y];
      let bv = Bs[kk * (TILE_N / 4u) + lid.x];
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
