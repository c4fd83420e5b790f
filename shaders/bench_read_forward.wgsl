// Benchmark only: the roofline for logprob_gather_forward. Reads every element of each (N, V) row once,
// with the same workgroup-per-row layout and access pattern (four loads in flight per thread), and writes one sum per row (so the reads
// cannot be optimised away). Its time is the floor the fused forward is compared against.

override WG: u32 = 256;

struct Params { rows: u32, V: u32, elem_base: u32, _p: u32 }

@group(0) @binding(0) var<storage, read> logits: array<f32>;        // (rows, V) window
@group(0) @binding(1) var<storage, read_write> out: array<f32>;     // (rows)
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> sh: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; }
  let base = p.elem_base + r * p.V;
  // Four loads in flight per thread, the same pattern as logprob_gather_forward's f32 loop.
  var acc = 0.0;
  var i = lid;
  for (; i + 3u * WG < p.V; i += 4u * WG) {
    let e = base + i;
    acc += (logits[e] + logits[e + WG]) + (logits[e + 2u * WG] + logits[e + 3u * WG]);
  }
  for (; i < p.V; i += WG) { acc += logits[base + i]; }
  sh[lid] = acc;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) { sh[lid] += sh[lid + stride]; }
    workgroupBarrier();
  }
  if (lid == 0u) { out[r] = sh[0]; }
}
