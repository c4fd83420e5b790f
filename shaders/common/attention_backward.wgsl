// What the attention backward kernels share (attention_backward_dq / _dkdv.wgsl, one thread per row;
// attention_wg_backward_dq / _dkdv.wgsl, one workgroup per row; attention_tile_backward_dq / _dkdv.wgsl, GEMM-shaped
// tiles): the head_dim tunable, the uniform block and the forward inputs they all read. Each including shader
// declares `dout` itself (its binding number differs). `groups` counts a kernel's workgroups: row blocks of BQ rows (`blocks` per (b, head)), or
// (wg) one per row (blocks = T); the tile set's also count d-chunks and (dkdv) head splits
// (common/attention_tile_backward.wgsl), fields the other sets leave at chunks = splits = 1, n = 0.

override DH: u32 = 64; // head_dim D: sizes the 'wg' set's workgroup rows

struct Params {
  T: u32, Hq: u32, Hkv: u32, D: u32, blocks: u32, scale: f32, neg_inf: f32, groups: u32,
  chunks: u32, splits: u32, n: u32, _p3: u32, // 'tile': d-chunks; dkdv's head splits and dk elements (its header)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;              // (B, T, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>;              // (B, T, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;              // (B, T, Hkv, D)
@group(0) @binding(3) var<storage, read> attention_mask: array<i32>; // (B, T)
