// Tiled GEMM  C = scale·(op(A) · op(B)) (+ bias) (+ C) (+ R),  with op(A): (M, K), op(B): (K, N), C and the
// residual stream R: (M, N) row-major (the epilogue: common/matmul.wgsl store_c).
// One shader serves every matmul of the model on a GPU: the forward (B = Wᵀ for nn.Linear [out, in]
// weights, B = W for GPT-2 Conv1D [in, out]) and both backward products (dinp = dout·W, dweight = doutᵀ·x),
// which differ only in which operand is read transposed (TRANS_A / TRANS_B override constants). Lavapipe
// runs the same products with matmul_subgroup_forward.wgsl, SwiftShader with matmul_direct_forward.wgsl
// (their headers say why).
//
// Each workgroup computes a TILE_M × TILE_N block of C, staging TILE_K-deep slices of A and B in
// workgroup memory as vec4s of 4 consecutive rows (As) or columns (Bs), zero past M, N, K, loaded so that
// consecutive invocations read consecutive addresses of the operand's physical (row-major) layout; each
// invocation keeps a 4 × 4 register block (one vec4 of C columns per row), so every value loaded from
// workgroup memory feeds 4 FMAs. An 8 × 8 block per invocation (128 × 128 or 64 × 64 tiles, the acc array
// indexed by constants only) ran at 7–28% of an H100's FMA probe where this one ran at 19–35% (issue 23's
// stop 31 note), and was removed; so did 4 × 8, 8 × 4 and TILE_K 32. On 64 × 64 tiles the next slice is
// prefetched into registers while the current one is multiplied (PREFETCH below).
//
// Operands bigger than maxStorageBufferBindingSize are bound as windows of whole physical rows; the
// launcher passes, per operand, `base` (element index of the block's first element inside the
// binding: the window's misalignment plus the column offset of the block inside a physical row), so
// element (r, c) of the block is base + r·ld + c. The K blocks of such windows accumulate into C.
//
// Split K: a product with few output tiles and a long K (LoRA's rank-16 sides, weight gradients over
// thousands of tokens) would leave most of a GPU idle, each workgroup walking K alone. The launcher then
// gives workgroup z the slice [z·k_chunk, (z + 1)·k_chunk) of K and a partial C of its own (c_split apart,
// in a scratch buffer), and sums the partials in slice order with colsum_forward.wgsl, which also finishes the
// epilogue (scale, C's previous value, R): deterministic.
//
// B_BF16: B holds packed bfloat16 weights (common/matmul.wgsl). The operands, their bindings and the
// epilogue are shared with matmul_subgroup_forward.wgsl and matmul_direct_forward.wgsl (src/kernels/matmul.ts).

//#include "common/matmul.wgsl"

override TILE_M: u32 = 64;
override TILE_N: u32 = 64;
override TILE_K: u32 = 16;

// Each k-row of a tile is padded by one vec4 (A_LD, B_LD vec4s apart): a non-transposed A (and a transposed B,
// the nn.Linear weight of every forward) is staged by consecutive invocations at consecutive k of one row m,
// which unpadded are TILE_M floats apart, all in one bank (a 16-way conflict on each store); padded they
// spread over 8 banks. The readers index rows with A_LD / B_LD.
override A_LD: u32 = TILE_M / 4u + 1u;
override B_LD: u32 = TILE_N / 4u + 1u;
var<workgroup> As: array<vec4f, TILE_K * A_LD>; // [k][m]: vec4 = 4 consecutive rows m
var<workgroup> Bs: array<vec4f, TILE_K * B_LD>; // [k][n]: vec4 = 4 consecutive columns n

fn load_a(a0: u32, m: u32, k: u32, kEnd: u32) -> f32 {
  if (m >= p.M || k >= kEnd) { return 0.0; }
  return a_elem(a0, m, k);
}

fn load_b(b0: u32, k: u32, n: u32, kEnd: u32) -> f32 {
  if (k >= kEnd || n >= p.N) { return 0.0; }
  return b_elem(b0, k, n);
}

// Staged element e of a slice: A's (mm, kk), B's (nn, kk) inside the tile, in the order that has consecutive
// invocations read consecutive addresses of the operand's physical (row-major) layout.
fn stage_a(e: u32) -> vec2u {
  if (TRANS_A) { return vec2u(e % TILE_M, e / TILE_M); }
  return vec2u(e / TILE_K, e % TILE_K);
}

fn stage_b(e: u32) -> vec2u {
  if (TRANS_B) { return vec2u(e / TILE_K, e % TILE_K); }
  return vec2u(e % TILE_N, e / TILE_N);
}

fn put_a(s: vec2u, v: f32) { As[s.y * A_LD + s.x / 4u][s.x % 4u] = v; }
fn put_b(s: vec2u, v: f32) { Bs[s.y * B_LD + s.x / 4u][s.x % 4u] = v; }

/**
 * Invocation t of `threads` stages the slices at k0 of the block at (m0, n0), zero from kEnd on (p.K, or the
 * end of a split-K slice); call between barriers.
 */
fn fill_tiles(t: u32, threads: u32, m0: u32, n0: u32, k0: u32, kEnd: u32) {
  for (var e = t; e < TILE_M * TILE_K; e += threads) {
    let s = stage_a(e);
    put_a(s, load_a(p.a_base, m0 + s.x, k0 + s.y, kEnd));
  }
  for (var e = t; e < TILE_N * TILE_K; e += threads) {
    let s = stage_b(e);
    put_b(s, load_b(p.b_base, k0 + s.y, n0 + s.x, kEnd));
  }
}

// PREFETCH (set by the launcher only where each invocation stages exactly PF elements of A and PF of B per
// slice: TILE_M·TILE_K = TILE_N·TILE_K = PF·invocations, the 64 × 64 × 16 tile): the next slice's elements
// are loaded into registers before the current slice is multiplied and stored into the tiles after it, so
// their global-memory latency overlaps the FMAs instead of stalling every invocation between the two
// barriers. The sums are the same, in the same order, as without it. PF is a constant, not an override, so the loops over the staged registers have a
// constant bound and unroll (their array indexed by constants only).
override PREFETCH: bool = false;
const PF: u32 = 4u;

struct Staged {
  a: array<f32, PF>,
  b: array<f32, PF>,
}

fn fetch(t: u32, threads: u32, m0: u32, n0: u32, k0: u32, kEnd: u32) -> Staged {
  var r: Staged;
  for (var i = 0u; i < PF; i++) {
    let sa = stage_a(t + i * threads);
    r.a[i] = load_a(p.a_base, m0 + sa.x, k0 + sa.y, kEnd);
    let sb = stage_b(t + i * threads);
    r.b[i] = load_b(p.b_base, k0 + sb.y, n0 + sb.x, kEnd);
  }
  return r;
}

fn put_tiles(t: u32, threads: u32, r: Staged) {
  for (var i = 0u; i < PF; i++) {
    put_a(stage_a(t + i * threads), r.a[i]);
    put_b(stage_b(t + i * threads), r.b[i]);
  }
}

const TM: u32 = 4u; // rows of C per invocation
const TN: u32 = 4u; // columns of C per invocation (one vec4)

/** acc += this invocation's TM × TN block of the staged slices' product. */
fn multiply(acc: ptr<function, array<vec4f, TM>>, lid: vec3u) {
  for (var kk = 0u; kk < TILE_K; kk++) {
    let av = As[kk * A_LD + lid.y];
    let bv = Bs[kk * B_LD + lid.x];
    (*acc)[0] = fma(vec4f(av.x), bv, (*acc)[0]);
    (*acc)[1] = fma(vec4f(av.y), bv, (*acc)[1]);
    (*acc)[2] = fma(vec4f(av.z), bv, (*acc)[2]);
    (*acc)[3] = fma(vec4f(av.w), bv, (*acc)[3]);
  }
}

@compute @workgroup_size(TILE_N / TN, TILE_M / TM)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let threads = (TILE_N / TN) * (TILE_M / TM);
  let t = lid.y * (TILE_N / TN) + lid.x;
  let m0 = wid.y * TILE_M;
  let n0 = wid.x * TILE_N;
  let c0 = p.c_base + wid.z * p.c_split;
  let kEnd = min(p.K, (wid.z + 1u) * p.k_chunk);
  var acc: array<vec4f, TM>;

  var k0 = wid.z * p.k_chunk;
  if (PREFETCH) {
    var r = fetch(t, threads, m0, n0, k0, kEnd);
    for (; k0 < kEnd; k0 += TILE_K) {
      put_tiles(t, threads, r);
      workgroupBarrier();
      if (k0 + TILE_K < kEnd) { r = fetch(t, threads, m0, n0, k0 + TILE_K, kEnd); }
      multiply(&acc, lid);
      workgroupBarrier();
    }
  } else {
    for (; k0 < kEnd; k0 += TILE_K) {
      fill_tiles(t, threads, m0, n0, k0, kEnd);
      workgroupBarrier();
      multiply(&acc, lid);
      workgroupBarrier();
    }
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
