// TRL's per-token GRPO loss (GRPOTrainer._compute_loss), one workgroup per sequence b over its T tokens:
//   r = exp(logp − old) per token, or r_b = exp(Σ_t M·(logp − old) / max(1, n_b)) for the whole row
//   (SEQUENCE_LEVEL, GSPO: needs the row reduction, hence the workgroup per row);
//   r̃ = min(r, δ) when δ is set;  L = −min(r̃·A_b, clip(r, 1 − ε_low, 1 + ε_high)·A_b) + β·KL (β ≠ 0).
// Writes L at every position (as TRL does; aggregation masks later), r before the δ cap, and clip flags:
// 1 = low (r̃ < 1 − ε_low, A < 0), 2 = high (r̃ > 1 + ε_high, A > 0), 4 = the δ cap changed the loss.

override WG: u32 = 128;
override SEQUENCE_LEVEL: bool = false;

struct Params {
  B: u32,
  T: u32,
  beta: f32,
  eps_low: f32,
  eps_high: f32,
  delta: f32,
  has_delta: u32,
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;          // (B, T)
@group(0) @binding(1) var<storage, read> old_logp: array<f32>;      // (B, T)
@group(0) @binding(2) var<storage, read> kl: array<f32>;            // (B, T)
@group(0) @binding(3) var<storage, read> advantages: array<f32>;    // (B)
@group(0) @binding(4) var<storage, read> mask: array<i32>;          // (B, T)
@group(0) @binding(5) var<storage, read_write> loss: array<f32>;    // (B, T)
@group(0) @binding(6) var<storage, read_write> ratio: array<f32>;   // (B, T)
@group(0) @binding(7) var<storage, read_write> clip: array<u32>;    // (B, T)
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> sh_sum: array<f32, WG>;
var<workgroup> sh_cnt: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let b = wid.x + wid.y * nwg.x;
  if (b >= p.B) { return; } // uniform: the same for the whole workgroup
  let row = b * p.T;
  let A = advantages[b];

  var log_r_seq = 0.0;
  if (SEQUENCE_LEVEL) {
    var sum = 0.0;
    var cnt = 0.0;
    for (var t = lid; t < p.T; t += WG) {
      if (mask[row + t] != 0) {
        sum += logp[row + t] - old_logp[row + t];
        cnt += 1.0;
      }
    }
    sh_sum[lid] = sum;
    sh_cnt[lid] = cnt;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
      if (lid < stride) {
        sh_sum[lid] += sh_sum[lid + stride];
        sh_cnt[lid] += sh_cnt[lid + stride];
      }
      workgroupBarrier();
    }
    log_r_seq = sh_sum[0] / max(1.0, sh_cnt[0]);
  }

  for (var t = lid; t < p.T; t += WG) {
    let i = row + t;
    let r = exp(select(logp[i] - old_logp[i], log_r_seq, SEQUENCE_LEVEL));
    let rt = select(r, min(r, p.delta), p.has_delta != 0u);
    let c = clamp(r, 1.0 - p.eps_low, 1.0 + p.eps_high);
    var l = -min(rt * A, c * A);
    if (p.beta != 0.0) { l += p.beta * kl[i]; }
    var flags = 0u;
    if (rt < 1.0 - p.eps_low && A < 0.0) { flags |= 1u; }
    if (rt > 1.0 + p.eps_high && A > 0.0) { flags |= 2u; }
    if (p.has_delta != 0u && r > p.delta && rt * A < c * A) { flags |= 4u; }
    loss[i] = l;
    ratio[i] = r;
    clip[i] = flags;
  }
}
