// The PPO-family policy objectives of verl and OpenRLHF on one micro-batch, one workgroup per sequence b:
// per token the policy term L_t (verl `pg_losses`, OpenRLHF's loss matrix), the KL estimator, the token's
// weighted share of the final loss and ∂loss/∂logp (and ∂loss/∂entropy), so the backward of the log-probs
// (logprob_gather_backward) can take it straight to the logits. Fused: the local derivative needs the same
// per-row reductions (sequence ratios) as the value. Sources of each formula:
//   verl/trainer/ppo/core_algos.py (volcengine/verl): compute_policy_loss_{vanilla,gspo,sapo,cispo,gpg,
//     clip_cov,kl_cov,geo_mean}, compute_policy_loss_reinforce, kl_penalty_forward;
//   openrlhf/models/loss.py PolicyLoss.forward, openrlhf/models/utils.py compute_approx_kl (OpenRLHF/OpenRLHF).
// x = logp − old (old is whatever the trainer divides by: old, rollout or, on-policy, logp itself).
//   CLIP       r = exp(clamp(x, ±ratio_clamp)) (no clamp when ratio_clamp = 0); L = max(−A·r, −A·clip(r, 1−ε_l, 1+ε_h)),
//              dual clip (A < 0): min(L, −A·c); × sel (clip_cov's corr) × isw (rollout IS weight)
//   GSPO_TOKEN r = exp(min(mean_b(x), 10)) with a per-token straight-through gradient (verl gspo); L as CLIP
//   SAPO       L = −A·sigmoid(τ(r − 1))·4/τ, τ = τ_pos (A > 0) or τ_neg;  CISPO L = −A·sg(clip(r))·logp
//   PG         L = −A·logp (gpg; bypass-mode reinforce)
//   KL_COV     L = −A·exp(x) + sel·k·|x| (sel: the top-covariance tokens)
//   GEO_MEAN   one value per row: −mean_b(A)·exp(mean_b(c))·exp(mean_b(log(isw + 1e-10)))  (c: x clipped
//              toward A's sign), written at every token of the row, weighted at t = 0
//   GSPO_SEQ   r_t = exp(Σ M·x / max(1, n))·M_t with the gradient through the row mean (OpenRLHF gspo)
// KL (d = logp − ref): k1 d, abs |d|, k2 d²/2, k3 exp(k) − k − 1 with k = clamp(−d, ±kl_inner); then clamp ±kl_outer.
// contrib = w_pg·L + kl_coef·w_aux·KL − ent_coef·w_aux·H; the loss is Σ contrib.

override WG: u32 = 128;
override KL: u32 = 0u;   // none 0, k1 1, abs 2, k2 3, k3 4

struct Params {
  B: u32,
  T: u32,
  eps_low: f32,
  eps_high: f32,
  dual_clip: f32,   // 0 = off
  ratio_clamp: f32, // 0 = off
  kl_inner: f32,
  kl_outer: f32,
  kl_coef: f32,
  ent_coef: f32,
  tau_pos: f32,
  tau_neg: f32,
  kl_cov_coef: f32,
  geo_seq_is: u32,  // GEO_MEAN: apply the sequence IS weight
  // The policy term: CLIP 0, GSPO_TOKEN 1, SAPO 2, CISPO 3, PG 4, KL_COV 5, GEO_MEAN 6, GSPO_SEQ 7. A uniform, not an
  // override constant: one pipeline serves every column of the page's loss table (a pipeline per mode cost
  // ~0.1 s of compilation each on SwiftShader).
  mode: u32,
  _pad: u32,
}

// Per-token inputs, 8 floats: old, ref, A, isw, sel, M (effective loss mask), w_pg, w_aux.
@group(0) @binding(0) var<storage, read> logp: array<f32>;              // (B, T)
@group(0) @binding(1) var<storage, read> entropy: array<f32>;           // (B, T)
@group(0) @binding(2) var<storage, read> inp: array<f32>;               // (B, T, 8)
@group(0) @binding(3) var<storage, read_write> outp: array<f32>;        // (B, T, 4): L, KL, contrib, ratio
@group(0) @binding(4) var<storage, read_write> dlogp: array<f32>;       // (B, T)
@group(0) @binding(5) var<storage, read_write> dentropy: array<f32>;    // (B, T)
@group(0) @binding(6) var<uniform> p: Params;

const CLIP = 0u;
const GSPO_TOKEN = 1u;
const SAPO = 2u;
const CISPO = 3u;
const PG = 4u;
const KL_COV = 5u;
const GEO_MEAN = 6u;
const GSPO_SEQ = 7u;

var<workgroup> sh: array<vec4f, WG>;

/** Sum of v over the workgroup (every thread gets it). */
fn row_sum(v: vec4f, lid: u32) -> vec4f {
  sh[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { sh[lid] += sh[lid + s]; }
    workgroupBarrier();
  }
  let total = sh[0];
  workgroupBarrier();
  return total;
}

/** Clipped surrogate and its derivative in r: max(−A·r, −A·clip(r)), dual clip for A < 0 when c > 0. */
fn surrogate(r: f32, a: f32, dual: f32) -> vec2f {
  let lo = 1.0 - p.eps_low;
  let hi = 1.0 + p.eps_high;
  let l1 = -a * r;
  let l2 = -a * clamp(r, lo, hi);
  var v = max(l1, l2);
  var d = select(select(0.0, -a, r >= lo && r <= hi), -a, l1 >= l2);
  if (dual > 0.0 && a < 0.0 && -a * dual < v) {
    v = -a * dual;
    d = 0.0;
  }
  return vec2f(v, d);
}

//#include "common/kl.wgsl"

/** KL estimator value and ∂/∂logp. */
fn kl_term(lp: f32, rf: f32) -> vec2f {
  let d = lp - rf;
  var v = 0.0;
  var g = 0.0;
  if (KL == 1u) {
    v = d;
    g = 1.0;
  } else if (KL == 2u) {
    v = abs(d);
    g = sign(d);
  } else if (KL == 3u) {
    v = 0.5 * d * d;
    g = d;
  } else if (KL == 4u) {
    let k = clamp(-d, -p.kl_inner, p.kl_inner);
    v = k3_value(k);
    g = select(0.0, -(exp(k) - 1.0), -d >= -p.kl_inner && -d <= p.kl_inner);
  }
  if (v < -p.kl_outer || v > p.kl_outer) { g = 0.0; }
  return vec2f(clamp(v, -p.kl_outer, p.kl_outer), g);
}

/** GEO_MEAN's per-token log-ratio clipped toward A's sign, and its derivative in x (0 or 1). */
fn geo_clip(x: f32, a: f32) -> vec2f {
  let s = sign(a);
  let xc = clamp(x, -p.eps_low, p.eps_high);
  let inside = x >= -p.eps_low && x <= p.eps_high;
  let takes_x = s * x < s * xc || inside;
  return vec2f(s * min(s * x, s * xc), select(0.0, s * s, takes_x));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let b = wid.x + wid.y * nwg.x;
  if (b >= p.B) { return; } // uniform: the same for the whole workgroup
  let row = b * p.T;

  // Row sums: n, Σ M·x (GEO_MEAN: Σ M·c), Σ M·A, Σ M·log(isw + 1e-10).
  var acc = vec4f(0.0);
  for (var t = lid; t < p.T; t += WG) {
    let i = row + t;
    let m = inp[8u * i + 5u];
    let x = logp[i] - inp[8u * i];
    let a = inp[8u * i + 2u];
    let c = select(x, geo_clip(x, a).x, p.mode == GEO_MEAN);
    acc += m * vec4f(1.0, c, a, log(inp[8u * i + 3u] + 1e-10));
  }
  let sums = row_sum(acc, lid);
  let n = sums.x;
  let seq_x = sums.y / max(1.0, n);
  let gspo_log = min(seq_x, 10.0);
  let geo_ratio = exp(sums.y / (n + 1e-8));
  let geo_adv = sums.z / (n + 1e-8);
  let geo_is = select(1.0, exp(sums.w / (n + 1e-8)), p.geo_seq_is != 0u);
  let geo_loss = -geo_adv * geo_ratio * geo_is;
  let seq_r = exp(seq_x);

  var g_seq = 0.0; // GSPO_SEQ: Σ_t w_pg·M·∂L_t/∂r_t
  for (var t = lid; t < p.T; t += WG) {
    let i = row + t;
    let lp = logp[i];
    let x = lp - inp[8u * i];
    let a = inp[8u * i + 2u];
    let isw = inp[8u * i + 3u];
    let sel = inp[8u * i + 4u];
    let m = inp[8u * i + 5u];
    let w_pg = inp[8u * i + 6u];
    let w_aux = inp[8u * i + 7u];
    var xc = x;
    var dxc = 1.0;
    if (p.ratio_clamp > 0.0) {
      xc = clamp(x, -p.ratio_clamp, p.ratio_clamp);
      dxc = select(0.0, 1.0, x >= -p.ratio_clamp && x <= p.ratio_clamp);
    }
    let r = exp(xc);
    var L = 0.0;
    var dL = 0.0; // ∂L/∂logp (local)
    var shown_r = r;
    switch p.mode {
      case CLIP: {
        let s = surrogate(r, a, p.dual_clip);
        L = s.x * sel * isw;
        dL = s.y * r * dxc * sel * isw;
      }
      case GSPO_TOKEN: {
        let rs = exp(gspo_log);
        let s = surrogate(rs, a, 0.0);
        L = s.x * isw;
        dL = s.y * select(0.0, rs, seq_x <= 10.0) * isw;
        shown_r = rs;
      }
      case SAPO: {
        let tau = select(p.tau_neg, p.tau_pos, a > 0.0);
        let sg = 1.0 / (1.0 + exp(-tau * (r - 1.0)));
        L = -a * sg * (4.0 / tau) * isw;
        dL = -a * 4.0 * sg * (1.0 - sg) * r * dxc * isw;
      }
      case CISPO: {
        let rc = clamp(r, 1.0 - p.eps_low, 1.0 + p.eps_high);
        L = -rc * a * lp * isw;
        dL = -rc * a * isw;
      }
      case PG: {
        L = -a * lp * isw;
        dL = -a * isw;
      }
      case KL_COV: {
        L = (-a * r + sel * p.kl_cov_coef * abs(x)) * isw;
        dL = (-a * r + sel * p.kl_cov_coef * sign(x)) * isw;
      }
      case GEO_MEAN: {
        L = geo_loss;
        dL = -geo_adv * geo_is * geo_ratio * m * geo_clip(x, a).y / (n + 1e-8);
        shown_r = geo_ratio;
      }
      default: { // GSPO_SEQ
        let rt = seq_r * m;
        let s = surrogate(rt, a, p.dual_clip);
        L = s.x;
        g_seq += w_pg * m * s.y;
        shown_r = rt;
      }
    }
    // GEO_MEAN: w_pg is the row's weight at every token; its one row value enters the loss once, at t = 0.
    let w_l = select(w_pg, select(0.0, w_pg, t == 0u), p.mode == GEO_MEAN);
    let k = kl_term(lp, inp[8u * i + 1u]);
    let H = entropy[i];
    outp[4u * i] = L;
    outp[4u * i + 1u] = k.x;
    outp[4u * i + 2u] = w_l * L + p.kl_coef * w_aux * k.x - p.ent_coef * w_aux * H;
    outp[4u * i + 3u] = shown_r;
    dlogp[i] = w_pg * dL + p.kl_coef * w_aux * k.y;
    dentropy[i] = -p.ent_coef * w_aux;
  }

  if (p.mode == GSPO_SEQ) {
    let G = row_sum(vec4f(g_seq, 0.0, 0.0, 0.0), lid).x;
    for (var t = lid; t < p.T; t += WG) {
      let i = row + t;
      dlogp[i] += inp[8u * i + 5u] / max(1.0, n) * seq_r * G;
    }
  }
}
