// dloss/dlogp per token for the aggregation LOSS_TYPE, one workgroup per sequence b (the row's n_b, and at
// sequence level the coupling of the row's tokens through r_b, need a row reduction). As autograd does:
//   loss = Σ_b c_b Σ_t M·L[b, t]   (c_b from the aggregation; N and #(n_b > 0) come from loss_reduce)
//   ∂(−min(r̃·A, clip(r)·A))/∂r: torch.minimum gives each side half the gradient on a tie (every in-range
//   token), clamp passes gradient where lo ≤ r ≤ hi, the δ cap where r ≤ δ;
//   token level ∂r/∂logp = r; sequence level ∂r_b/∂logp[b, t] = r_b·M / max(1, n_b), and the row's shared
//   policy term is weighted by Σ_t c_b·M = c_b·n_b;
//   β·∂KL/∂logp with d = logp − ref: k1 1, k2 d, k3 1 − exp(−d).
// Masked tokens get exactly 0. token_weight = c_b·M = ∂loss/∂per_token_loss, the weight the page shows
// per token and the step uses to split the loss into its policy and β·KL terms.

override WG: u32 = 128;
override SEQUENCE_LEVEL: bool = false;
override LOSS_TYPE: u32 = 0u;    // index into AGGREGATIONS (src/oracle/loss_reduce.ts)
override KL_ESTIMATOR: u32 = 3u; // 1, 2 or 3

struct Params {
  B: u32,
  T: u32,
  beta: f32,
  eps_low: f32,
  eps_high: f32,
  delta: f32,
  has_delta: u32,
  max_completion_length: f32,
  num_items_in_batch: f32, // 0 = N
  loss_scale_factor: f32,  // seq-mean-token-sum-norm (default T)
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;          // (B, T)
@group(0) @binding(1) var<storage, read> ref_logp: array<f32>;      // (B, T)
@group(0) @binding(2) var<storage, read> advantages: array<f32>;    // (B)
@group(0) @binding(3) var<storage, read> mask: array<i32>;          // (B, T)
@group(0) @binding(4) var<storage, read> ratio: array<f32>;         // (B, T) r before the δ cap
@group(0) @binding(5) var<storage, read> stats: array<f32>;         // (16) loss_reduce output
@group(0) @binding(6) var<storage, read_write> dlogp: array<f32>;   // (B, T)
@group(0) @binding(7) var<storage, read_write> token_weight: array<f32>; // (B, T)
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> sh_cnt: array<f32, WG>;

/** c_b: the weight the aggregation gives each masked-in token of a row with n_b tokens. */
fn row_weight(nb: f32) -> f32 {
  let N = max(1.0, stats[8]);
  let nz = max(1.0, stats[9]);
  let B = f32(p.B);
  switch LOSS_TYPE {
    case 0u: { return 1.0 / (B * max(1.0, nb)); }                     // grpo
    case 1u, 4u: { return 1.0 / N; }                                   // bnpo, token-mean
    case 2u: { return 1.0 / (B * p.max_completion_length); }           // dr_grpo
    case 3u: { return 1.0 / select(N, p.num_items_in_batch, p.num_items_in_batch > 0.0); } // dapo
    case 5u: { return 1.0 / nz; }                                      // seq-mean-token-sum
    case 6u: { return 1.0 / ((nb + 1e-8) * nz); }                      // seq-mean-token-mean
    default: { return 1.0 / p.loss_scale_factor; }                     // seq-mean-token-sum-norm
  }
}

/** ∂(−min(r̃·A, clip(r)·A))/∂r. */
fn dpg_dr(r: f32, A: f32) -> f32 {
  let rt = select(r, min(r, p.delta), p.has_delta != 0u);
  let c = clamp(r, 1.0 - p.eps_low, 1.0 + p.eps_high);
  let l1 = rt * A;
  let l2 = c * A;
  let w1 = select(select(0.0, 0.5, l1 == l2), 1.0, l1 < l2);
  let d1 = select(0.0, A, p.has_delta == 0u || r <= p.delta);
  let d2 = select(0.0, A, r >= 1.0 - p.eps_low && r <= 1.0 + p.eps_high);
  return -(w1 * d1 + (1.0 - w1) * d2);
}

fn dkl(d: f32) -> f32 {
  if (KL_ESTIMATOR == 1u) { return 1.0; }
  if (KL_ESTIMATOR == 2u) { return d; }
  // 1 − exp(−d) cancels for small d: use its series below |d| = 0.1 (truncation d^5/120 relative, < 1e-7)
  if (abs(d) < 0.1) { return d * (1.0 + d * (-0.5 + d * (1.0 / 6.0 + d * (-1.0 / 24.0 + d * (1.0 / 120.0))))); }
  return 1.0 - exp(-d);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let b = wid.x + wid.y * nwg.x;
  if (b >= p.B) { return; } // uniform: the same for the whole workgroup
  let row = b * p.T;
  let A = advantages[b];

  var cnt = 0.0;
  for (var t = lid; t < p.T; t += WG) {
    if (mask[row + t] != 0) { cnt += 1.0; }
  }
  sh_cnt[lid] = cnt;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) { sh_cnt[lid] += sh_cnt[lid + stride]; }
    workgroupBarrier();
  }
  let nb = sh_cnt[0];
  let c = row_weight(nb);

  for (var t = lid; t < p.T; t += WG) {
    let i = row + t;
    if (mask[i] == 0) {
      dlogp[i] = 0.0;
      token_weight[i] = 0.0;
      continue;
    }
    token_weight[i] = c;
    let r = ratio[i];
    var g: f32;
    if (SEQUENCE_LEVEL) {
      g = c * nb * dpg_dr(r, A) * r / max(1.0, nb);
    } else {
      g = c * dpg_dr(r, A) * r;
    }
    if (p.beta != 0.0) { g += c * p.beta * dkl(logp[i] - ref_logp[i]); }
    dlogp[i] = g;
  }
}
