// GELU, tanh approximation (GPT-2's gelu_new): out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Computed as the identical x * sigmoid(2u) with the sigmoid written so exp never overflows: the tanh
// form loses all relative precision for x << 0 (1 + tanh(u) cancels), and x^3 overflows f32 past
// |x| ~ 7e12. For |x| > 20, sigmoid(2u) is exactly 1 or 0 in f32, so x is clamped inside u only.

override WG: u32 = 256;

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> inp: array<f32>;        // (n)
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // (n)
@group(0) @binding(2) var<uniform> p: Params;

//#include "common/activation.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let x = inp[i];
  let xc = clamp(x, -20.0, 20.0);
  let u = gelu_u(xc);
  let e = exp(-2.0 * abs(u)); // exp(-|2u|)
  let s = sigmoid_from(u, e); // sigmoid(2u)
  out[i] = x * s;
}
