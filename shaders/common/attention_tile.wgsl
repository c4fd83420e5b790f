// The GEMM-shaped tiles of the 'tile' attention kernels (attention_tile_forward.wgsl, attention_tile_backward_dq /
// _dkdv.wgsl). A workgroup of 8 × 16 invocations (tx, ty) owns a block
// of BR = 64 "rows" (4 per ty) and walks "columns" in tiles of BC = 32 (4 per tx); a score-shaped block
// (rows × columns, a dot product over d) is a GEMM over d in SK-deep slices staged in workgroup memory as
// vec4s of 4 consecutive rows / columns, zero past the ends (as matmul_forward.wgsl stages As / Bs), each
// invocation keeping a 4 × 4 register block. Output accumulators cover a DC = 64-wide chunk of d: rows
// 4ty .. 4ty + 3 × columns {c0 + 4tx .., c0 + 32 + 4tx ..} (Acc8: 8 vec4s). Register blocks are structs of
// vec4s, never arrays indexed by loop counters: an H100 spilled those to local memory (~7× slower).
// All of a kernel's workgroup memory is the one array `tl` (32 KiB, what browsers expose on common GPUs,
// whatever D is); its phases alias it by offsets (in vec4s). The including shader declares
// `fn tile_elem(src: u32, i: u32) -> f32`, element i of its global operand number `src` (a constant at each
// call site, so the switch folds away), which the staging functions read.

const THREADS: u32 = 128u; // @workgroup_size(8, 16)
const BR: u32 = 64u; // rows per workgroup
const BC: u32 = 32u; // columns per tile
const SK: u32 = 16u; // d per staged slice of a score GEMM
const DC: u32 = 64u; // accumulator columns (of d) per chunk workgroup
// A slice is [d][row / 4]; each d-row is padded by one vec4 so that the staging stores of consecutive
// invocations (consecutive d of one row) fall in different banks.
const ROW_LD: u32 = BR / 4u + 1u; // vec4s per d-row of a row slice (17)
const COL_LD: u32 = BC / 4u + 1u; // ... of a column slice (9)
const ROW_SLICE: u32 = SK * ROW_LD; // vec4s of one staged row slice (272)
const COL_SLICE: u32 = SK * COL_LD; // ... of a column slice (144)
const CHUNK_TILE: u32 = BC * DC / 4u; // vec4s of a [column][d / 4] chunk tile (512)
const ROW_TILE: u32 = BR * BC / 4u; // vec4s of a [row][column / 4] tile (512): P or G of the block

var<workgroup> tl: array<vec4f, 2048>; // 32768 bytes

/** 4 rows × 4 columns of a score-shaped block: r<n> is row 4ty + n against columns 4tx .. 4tx + 3. */
struct Block { r0: vec4f, r1: vec4f, r2: vec4f, r3: vec4f }

/** Rows 4ty + n × chunk columns: a<2n> the first 32 (c0 + 4tx ..), a<2n + 1> the second (c0 + 32 + 4tx ..). */
struct Acc8 { a0: vec4f, a1: vec4f, a2: vec4f, a3: vec4f, a4: vec4f, a5: vec4f, a6: vec4f, a7: vec4f }

fn block_zero() -> Block { return Block(vec4f(0.0), vec4f(0.0), vec4f(0.0), vec4f(0.0)); }

fn acc_zero() -> Acc8 {
  let z = vec4f(0.0);
  return Acc8(z, z, z, z, z, z, z, z);
}

/** c += a ⊗ b: a holds the 4 rows' values at one d, b the 4 columns' (16 FMAs from 2 vec4 loads). */
fn block_fma(a: vec4f, b: vec4f, c: Block) -> Block {
  return Block(fma(vec4f(a.x), b, c.r0), fma(vec4f(a.y), b, c.r1), fma(vec4f(a.z), b, c.r2), fma(vec4f(a.w), b, c.r3));
}

/** o += w ⊗ (x0, x1): w holds the 4 rows' weights of one column, x0 / x1 its two chunk halves (8 vec4 FMAs). */
fn acc_fma(w: vec4f, x0: vec4f, x1: vec4f, o: Acc8) -> Acc8 {
  return Acc8(
    fma(vec4f(w.x), x0, o.a0), fma(vec4f(w.x), x1, o.a1), fma(vec4f(w.y), x0, o.a2), fma(vec4f(w.y), x1, o.a3),
    fma(vec4f(w.z), x0, o.a4), fma(vec4f(w.z), x1, o.a5), fma(vec4f(w.w), x0, o.a6), fma(vec4f(w.w), x1, o.a7),
  );
}

/**
 * o += W · X over 4 columns: w<n> holds row 4ty + n's weights of columns 4c .. 4c + 3 (a [row][column / 4]
 * tile, loaded whole), `at` is chunk-tile row 4c's first vec4 (a [column][d / 4] tile). 12 vec4 loads, 32 vec4 FMAs.
 */
fn acc_cols4(w0: vec4f, w1: vec4f, w2: vec4f, w3: vec4f, at: u32, tx: u32, o: Acc8) -> Acc8 {
  const L = DC / 4u; // vec4s per chunk-tile row
  var r = acc_fma(vec4f(w0.x, w1.x, w2.x, w3.x), tl[at + tx], tl[at + 8u + tx], o);
  r = acc_fma(vec4f(w0.y, w1.y, w2.y, w3.y), tl[at + L + tx], tl[at + L + 8u + tx], r);
  r = acc_fma(vec4f(w0.z, w1.z, w2.z, w3.z), tl[at + 2u * L + tx], tl[at + 2u * L + 8u + tx], r);
  return acc_fma(vec4f(w0.w, w1.w, w2.w, w3.w), tl[at + 3u * L + tx], tl[at + 3u * L + 8u + tx], r);
}

/**
 * Invocation t stages rows [first, first + n) of operand `src` (row r at base + r·stride), d in [dk, dk + SK),
 * as tl[at + dd·ld + r / 4][r % 4]; zero for rows from `end` on and d from D on. Consecutive invocations read
 * consecutive d of one row (SK floats contiguous). Call between barriers.
 */
fn stage_slice(t: u32, at: u32, ld: u32, n: u32, src: u32, base: u32, stride: u32, first: u32, end: u32, dk: u32, D: u32) {
  for (var e = t; e < n * SK; e += THREADS) {
    let r = e / SK;
    let dd = e % SK;
    var x = 0.0;
    if (first + r < end && dk + dd < D) { x = tile_elem(src, base + (first + r) * stride + dk + dd); }
    tl[at + dd * ld + r / 4u][r % 4u] = x;
  }
}

/**
 * Stages BC rows [first, first + BC) of operand `src`, d in [d0, d0 + DC), as tl[at + c·(DC / 4) + d / 4]
 * (a [column][d / 4] chunk tile, the right-hand side of an accumulation); zero past `end` and D.
 */
fn stage_chunk(t: u32, at: u32, src: u32, base: u32, stride: u32, first: u32, end: u32, d0: u32, D: u32) {
  for (var e = t; e < CHUNK_TILE; e += THREADS) {
    let c = e / (DC / 4u);
    let d = d0 + 4u * (e % (DC / 4u));
    var x = vec4f(0.0);
    if (first + c < end) {
      let o = base + (first + c) * stride + d;
      if (d + 3u < D) {
        x = vec4f(tile_elem(src, o), tile_elem(src, o + 1u), tile_elem(src, o + 2u), tile_elem(src, o + 3u));
      } else {
        for (var u = 0u; u < 4u; u++) { if (d + u < D) { x[u] = tile_elem(src, o + u); } }
      }
    }
    tl[at + e] = x;
  }
}

/** Two score-shaped blocks over the whole D, sharing the slice loop: s = A·Bᵀ and dp = A2·B2ᵀ. */
struct ScorePair { s: Block, dp: Block }

/**
 * Rows [row0, row0 + BR) of operands ra / ra2 (same layout: base rb, stride rs, valid below rEnd) against
 * columns [col0, col0 + BC) of operands ca / ca2 (cb, cs, cEnd), over d < D. Slices at tl[0 .. 2·ROW_SLICE +
 * 2·COL_SLICE); ends with a barrier, so the caller may reuse that space at once. Per d each invocation reads
 * 4 vec4s and does 32 FMAs.
 */
fn score_pair(t: u32, tx: u32, ty: u32, ra: u32, ra2: u32, rb: u32, rs: u32, row0: u32, rEnd: u32,
              ca: u32, ca2: u32, cb: u32, cs: u32, col0: u32, cEnd: u32, D: u32) -> ScorePair {
  let A = 0u;
  let A2 = ROW_SLICE;
  let B = 2u * ROW_SLICE;
  let B2 = 2u * ROW_SLICE + COL_SLICE;
  var s = block_zero();
  var dp = block_zero();
  for (var dk = 0u; dk < D; dk += SK) {
    stage_slice(t, A, ROW_LD, BR, ra, rb, rs, row0, rEnd, dk, D);
    stage_slice(t, A2, ROW_LD, BR, ra2, rb, rs, row0, rEnd, dk, D);
    stage_slice(t, B, COL_LD, BC, ca, cb, cs, col0, cEnd, dk, D);
    stage_slice(t, B2, COL_LD, BC, ca2, cb, cs, col0, cEnd, dk, D);
    workgroupBarrier();
    for (var dd = 0u; dd < SK; dd++) {
      s = block_fma(tl[A + dd * ROW_LD + ty], tl[B + dd * COL_LD + tx], s);
      dp = block_fma(tl[A2 + dd * ROW_LD + ty], tl[B2 + dd * COL_LD + tx], dp);
    }
    workgroupBarrier();
  }
  return ScorePair(s, dp);
}
