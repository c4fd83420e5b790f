// SiLU-gated activation backward, out = silu(gate) * up:
//   dup = dout * silu(gate),  dgate = dout * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))).
// 1 - sigmoid(g) is taken as sigmoid(-g) from the same e = exp(-|g|), so it never cancels.

override WG: u32 = 256;

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> gate: array<f32>;         // (N, I)
@group(0) @binding(1) var<storage, read> up: array<f32>;           // (N, I)
@group(0) @binding(2) var<storage, read> dout: array<f32>;         // (N, I)
@group(0) @binding(3) var<storage, read_write> dgate: array<f32>;  // (N, I)
@group(0) @binding(4) var<storage, read_write> dup: array<f32>;    // (N, I)
@group(0) @binding(5) var<uniform> p: Params;

//#include "common/activation.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let g = gate[i];
  let e = exp(-abs(g));
  let sig = sigmoid_from(g, e);
  let sigNeg = sigmoid_neg_from(g, e); // 1 - sigmoid(g)
  let d = dout[i];
  dup[i] = d * (g * sig);
  dgate[i] = d * up[i] * sig * (1.0 + g * sigNeg);
}
