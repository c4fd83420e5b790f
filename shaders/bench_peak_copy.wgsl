// Benchmark only: copy bandwidth, the ceiling memory-bound kernels (the fused log-prob gather, AdamW,
// elementwise passes) are reported against. Each thread copies vec4s grid-stride; bytes moved = 2 · 16 · n4.

override WG: u32 = 256;

struct Params { n4: u32, stride: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> src: array<vec4f>;        // (n4)
@group(0) @binding(1) var<storage, read_write> dst: array<vec4f>;  // (n4)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  for (var i = (wid.x + wid.y * nwg.x) * WG + lid; i < p.n4; i += p.stride) {
    dst[i] = src[i];
  }
}
