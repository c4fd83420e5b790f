// In-place accumulate dst += src: the residual's backward (the stream's gradient flows unchanged into
// both branches, so each branch's gradient is added into it) and the in-place residual forward.

override WG: u32 = 256;

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read_write> dst: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> src: array<f32>;        // (n)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  dst[i] = dst[i] + src[i];
}
