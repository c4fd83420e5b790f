// Residual add: out = a + b (the residual stream). In-place use goes through residual_backward.wgsl,
// because WebGPU forbids binding one buffer both read-only and writable in a dispatch.

override WG: u32 = 256;

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;          // (n)
@group(0) @binding(1) var<storage, read> b: array<f32>;          // (n)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (n)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  out[i] = a[i] + b[i];
}
