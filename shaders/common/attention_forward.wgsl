// What attention_forward.wgsl (one thread per query row, CPU adapters), attention_wg_forward.wgsl (one
// workgroup per query row) and attention_tile_forward.wgsl (a workgroup per 64 query rows, GEMM-style tiles)
// share: the head_dim tunable, the uniform block and the bindings. A workgroup g < groups of the wg and tile sets
// takes ((b·Hq + h)·blocks + block)·chunks + chunk: (wg) one query row (blocks = Tq), (tile) a block of 64 rows and
// a 64-wide chunk of the head's D output columns. The row set's threads take the rows < `rows` (= B·Hq·Tq) in
// (b, h, i) order, BQ consecutive ones a workgroup.

override DH: u32 = 64; // head_dim D: sizes the 'wg' set's workgroup rows (the launcher checks the storage limit)

struct Params {
  Tq: u32, Tk: u32, TkvMax: u32, Hq: u32,
  Hkv: u32, D: u32, blocks: u32, scale: f32, // blocks: row blocks per (b, h)
  neg_inf: f32, groups: u32, chunks: u32, rows: u32, // neg_inf = -inf (WGSL constants cannot be infinite); groups = B·Hq·blocks·chunks
}

@group(0) @binding(0) var<storage, read> q: array<f32>;              // (B, Tq, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>;              // (B, TkvMax, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;              // (B, TkvMax, Hkv, D)
@group(0) @binding(3) var<storage, read> attention_mask: array<i32>; // (B, Tk)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;      // (B, Tq, Hq, D)
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;      // (B, Hq, Tq)
@group(0) @binding(6) var<uniform> p: Params;
