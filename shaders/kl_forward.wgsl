// Per-token KL between the policy and the reference, from their log-probs of the sampled token.
// d = logp - ref_logp:  k1 = d,  k2 = d^2 / 2,  k3 = exp(-d) + d - 1  (TRL's estimator; not clamped).
// k3 is O(d^2) and cancels in f32 for small d: common/kl.wgsl sums its Taylor series there.

override WG: u32 = 256;
override KL_ESTIMATOR: u32 = 3u; // 1, 2 or 3

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> logp: array<f32>;      // (N)
@group(0) @binding(1) var<storage, read> ref_logp: array<f32>;  // (N)
@group(0) @binding(2) var<storage, read_write> kl: array<f32>;  // (N)
@group(0) @binding(3) var<uniform> p: Params;

//#include "common/kl.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let d = logp[i] - ref_logp[i];
  var k: f32;
  if (KL_ESTIMATOR == 1u) {
    k = d;
  } else if (KL_ESTIMATOR == 2u) {
    k = 0.5 * d * d;
  } else {
    k = k3_value(-d);
  }
  kl[i] = k;
}
