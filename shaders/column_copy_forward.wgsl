// Copies a block of columns between two row-major matrices: dst[r, dst_col + c] = src[r, src_col + c]
// for r < rows, c < cols. GPT-2's c_attn produces (N, 3C) with columns [q | k | v]; attention wants
// q, k, v as separate contiguous (N, C) tensors, so forward splits the columns out and backward merges
// dq, dk, dv back into dqkv (the gradient of a copy is the reverse copy, so one shader serves both).
// src and dst come as row windows (base = element index of the window's first row).

override WG: u32 = 256;

struct Params {
  rows: u32, cols: u32,
  src_base: u32, src_ld: u32, src_col: u32,
  dst_base: u32, dst_ld: u32, dst_col: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;        // (rows, src_ld)
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;  // (rows, dst_ld)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.rows * p.cols) { return; }
  let r = i / p.cols;
  let c = i % p.cols;
  dst[p.dst_base + r * p.dst_ld + p.dst_col + c] = src[p.src_base + r * p.src_ld + p.src_col + c];
}
