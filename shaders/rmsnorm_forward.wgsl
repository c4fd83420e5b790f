// RMSNorm forward (Llama, Qwen2/3, and Qwen3's per-head q_norm/k_norm): out = weight * x * rstd,
// rstd = 1 / sqrt(mean(x^2) + eps), one workgroup per row. rstd is saved for the backward pass.

override WG: u32 = 256; // threads per row, a power of two

struct Params { N: u32, C: u32, eps: f32, _p0: u32 }

@group(0) @binding(0) var<storage, read> inp: array<f32>;          // (N, C)
@group(0) @binding(1) var<storage, read> weight: array<f32>;       // (C)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;    // (N, C)
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>;   // (N)
@group(0) @binding(4) var<uniform> p: Params;

//#include "common/reduce.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.N) { return; }
  let C = p.C;
  let base = row * C;

  var s = 0.0;
  for (var i = t; i < C; i += WG) {
    let x = inp[base + i];
    s += x * x;
  }
  let r = inverseSqrt(reduce_sum(t, s) / f32(C) + p.eps);

  for (var i = t; i < C; i += WG) {
    out[base + i] = weight[i] * (inp[base + i] * r);
  }
  if (t == 0u) { rstd[row] = r; }
}
