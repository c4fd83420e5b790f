// Gradient of TRL's loss (shaders/trl_loss_forward.wgsl) with respect to the per-token log-probs and entropies,
// one invocation per row, as autograd forms it: the aggregation weight w_t = ∂loss/∂per_token_loss[b, t]
// (grpo/sapo M/(n_b·B·gas), bnpo M/(N·gas), dr_grpo/dapo/cispo/vespo M/divisor, luspo n_b/(B·T·gas)) times
// ∂per_token_loss/∂logp: through the ratio r = exp(logp − old) (token level) or r_b = exp(Σ M(logp − old)/n_b)
// (sequence level: ∂r_b/∂logp_t = r_b·M_t/n_b, summed over the row first), directly for cispo/vespo (their
// ratio factor is detached) and through the k3 KL. torch.minimum splits a tie's gradient in halves; clamp
// passes gradient where min ≤ x ≤ max. dentropy = −entropy_coef·M'_t / (divisor or Σ M'·gas). Totals over the
// micro-batch (N, Σ M') come from shaders/trl_loss_totals.wgsl over the forward's `rows`; a batch of several
// processes' micro-batches (rank_rows rows each) takes each row's process's totals and averages the processes
// (bnpo and entropy ÷ ranks; divisor already holds it). The float64 twin is src/oracle/trl_loss.ts.

override WG: u32 = 64;
override SEQUENCE: bool = false;
override HAS_OLD: bool = true;
override KL: bool = false;
override BIAS_KL: bool = false;
override DELTA: bool = false;

struct Params {
  B: u32, T: u32, eps_low: f32, eps_high: f32,
  delta: f32, beta: f32, is_min: f32, is_max: f32,
  opsm_threshold: f32, entropy_threshold: f32, tau_pos: f32, tau_neg: f32,
  k_pos: f32, lambda_pos: f32, k_neg: f32, lambda_neg: f32,
  divisor: f32, gas: f32, entropy_coef: f32, loss: u32, // loss: 0 clipped surrogate, 1 cispo, 2 sapo, 3 vespo
  is_apply: u32, agg: u32, ent_global: u32, rank_rows: u32, // (see the forward's Params)
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;           // (B, T)
@group(0) @binding(1) var<storage, read> aux: array<vec4f>;          // (B, T): old, ref, sampling, mask
@group(0) @binding(2) var<storage, read> advantages: array<f32>;     // (B)
@group(0) @binding(3) var<storage, read> tok: array<vec4f>;          // (B, T) from the forward
@group(0) @binding(4) var<storage, read> rows: array<f32>;           // (B, 8) from the forward
@group(0) @binding(5) var<storage, read_write> dlogp: array<f32>;    // (B, T)
@group(0) @binding(6) var<storage, read_write> dentropy: array<f32>; // (B, T)
@group(0) @binding(7) var<storage, read> totals: array<f32>;         // (ranks, 2): N, Σ M' (trl_loss_totals)
@group(0) @binding(8) var<uniform> p: Params;

fn old_of(i: u32) -> f32 {
  return select(logp[i], aux[i].x, HAS_OLD);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let b = gid.x;
  if (b >= p.B) { return; }
  let T = p.T;
  let o = b * T;
  let A = advantages[b];
  // Totals over this row's process (rank_rows consecutive rows); the ranks' gradients are averaged (÷ ranks).
  let rank = b / p.rank_rows;
  let ranks = f32(p.B / p.rank_rows);
  let N = totals[rank * 2u];
  let E = totals[rank * 2u + 1u];
  let n = rows[b * 8u + 1u];
  let nb = max(1.0, n);
  let off = rows[b * 8u + 5u];
  let r_seq = rows[b * 8u + 6u];
  let phi = rows[b * 8u + 7u];
  let fB = f32(p.B);
  var dr = 0.0;
  for (var t = 0u; t < T; t++) {
    let i = o + t;
    let a = aux[i];
    let M = a.w;
    let f = tok[i];
    let lp = logp[i];
    let r = select(exp(lp - old_of(i)), r_seq, SEQUENCE);
    var w: f32;
    if (p.agg == 0u) {
      w = M / nb / fB / p.gas;
    } else if (p.agg == 1u) {
      w = M / max(1.0, N) / p.gas / ranks;
    } else if (p.agg == 2u) {
      w = M / p.divisor;
    } else {
      w = n / (fB * f32(T)) / p.gas;
    }
    var g = off * f.w;
    if (p.is_apply != 0u) { g *= f.z; }
    var dPdr = 0.0;
    var direct = 0.0;
    if (p.loss == 1u) {
      direct = -min(r, p.eps_high) * A;
    } else if (p.loss == 3u) {
      direct = -phi * A;
    } else if (p.loss == 2u) {
      let tau = select(p.tau_neg, p.tau_pos, A > 0.0);
      let s = 1.0 / (1.0 + exp(-tau * (r - 1.0)));
      dPdr = -4.0 * A * s * (1.0 - s);
    } else {
      let lo = 1.0 - p.eps_low;
      let hi = 1.0 + p.eps_high;
      let r1 = select(r, min(r, p.delta), DELTA);
      let u = r1 * A;
      let c = clamp(r, lo, hi) * A;
      let du = select(0.0, -A, !DELTA || r <= p.delta);
      let dc = select(0.0, -A, r >= lo && r <= hi);
      dPdr = select(select(0.5 * (du + dc), dc, c < u), du, u < c);
    }
    var d_ratio = dPdr * g;
    var d_direct = direct * g;
    if (KL) {
      let d = a.y - lp;
      d_direct += p.beta * (1.0 - exp(d)) * select(1.0, r, BIAS_KL);
      // The forward stored k3·r under bias correction; ∂/∂r of that is k3 = stored / r.
      if (BIAS_KL && r > 0.0) { d_ratio += p.beta * f.y / r; }
    }
    var dl = w * d_direct;
    if (SEQUENCE) {
      dr += w * d_ratio;
    } else {
      dl += w * d_ratio * r;
    }
    dlogp[i] = dl;
    let me = M * f.w;
    dentropy[i] = -p.entropy_coef * me / select(max(1.0, E) * p.gas * ranks, p.divisor, p.ent_global != 0u);
  }
  if (SEQUENCE) {
    let scale = dr * r_seq / nb;
    for (var t = 0u; t < T; t++) {
      dlogp[o + t] += scale * aux[o + t].w;
    }
  }
}
