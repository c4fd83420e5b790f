// Per-token KL between the policy and the reference, from their log-probs of the sampled token.
// d = logp - ref_logp:  k1 = d,  k2 = d^2 / 2,  k3 = exp(-d) + d - 1  (TRL's estimator; not clamped).
// k3 is O(d^2): exp(-d) + d - 1 in f32 cancels catastrophically for small d, so below |d| = 0.1
// we sum its Taylor series (truncation error d^7/5040, under 1e-8 of the value).

override WG: u32 = 256;
override KL_ESTIMATOR: u32 = 3u; // 1, 2 or 3

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> logp: array<f32>;      // (N)
@group(0) @binding(1) var<storage, read> ref_logp: array<f32>;  // (N)
@group(0) @binding(2) var<storage, read_write> kl: array<f32>;  // (N)
@group(0) @binding(3) var<uniform> p: Params;

fn k3(d: f32) -> f32 {
  if (abs(d) < 0.1) {
    // d^2/2 - d^3/6 + d^4/24 - d^5/120 + d^6/720
    return d * d * (0.5 + d * (-1.0 / 6.0 + d * (1.0 / 24.0 + d * (-1.0 / 120.0 + d * (1.0 / 720.0)))));
  }
  return exp(-d) + d - 1.0;
}

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
    k = k3(d);
  }
  kl[i] = k;
}
