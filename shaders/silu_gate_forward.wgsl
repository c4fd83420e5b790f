// SiLU-gated MLP activation (Llama/Qwen MLP: act_fn(gate_proj(x)) * up_proj(x)): out = silu(gate) * up,
// silu(g) = g * sigmoid(g). The sigmoid is written with e = exp(-|g|) so exp never overflows.

override WG: u32 = 256;

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> gate: array<f32>;       // (N, I)
@group(0) @binding(1) var<storage, read> up: array<f32>;         // (N, I)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (N, I)
@group(0) @binding(3) var<uniform> p: Params;

//#include "common/activation.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let g = gate[i];
  let e = exp(-abs(g));
  let sig = sigmoid_from(g, e);
  out[i] = g * sig * up[i];
}
