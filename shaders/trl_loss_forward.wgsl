// TRL GRPOTrainer._compute_loss per token (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577), one
// invocation per row b of the micro-batch: the row's sums come first (sequence log-ratio, mask count, vLLM
// sequence IS, off-policy mean KL, VESPO's gamma weight), then every token's per_token_loss =
//   policy(r)·off_policy_mask·entropy_mask·vllm_is + β·k3 (× r with use_bias_correction_kl)
// with policy = −min(min(r, δ)·A, clamp(r, 1 − ε_low, 1 + ε_high)·A) (grpo/bnpo/dr_grpo/dapo/luspo),
// −min(r, ε_high)·A·logp (cispo), −σ(τ(r − 1))·4/τ·A (sapo), −φ·A·logp (vespo; no IS factor).
// Rows are independent and T is small next to V, so a row per invocation keeps every sum in registers with
// no cross-thread reduction. The per-row sums the aggregation needs go to `rows`; the host reads B·8 floats
// for the loss and the backward reads them for the normalisers. The float64 twin is src/oracle/trl_loss.ts.

override WG: u32 = 64;
override SEQUENCE: bool = false;  // importance_sampling_level = "sequence"
override HAS_OLD: bool = true;    // false: old = per_token_logps.detach()
override KL: bool = false;        // β ≠ 0
override BIAS_KL: bool = false;   // use_bias_correction_kl
override DELTA: bool = false;     // δ set
override IS_MODE: u32 = 0u;       // 0 off, 1 token_truncate, 2 token_mask, 3 sequence_truncate, 4 sequence_mask
override OPSM: bool = false;      // off_policy_mask_threshold set
override HAS_SAMPLING: bool = false; // OPSM reads sampling log-probs (else old)
override EMASK: bool = false;     // top_entropy_quantile < 1

struct Params {
  B: u32, T: u32, eps_low: f32, eps_high: f32,
  delta: f32, beta: f32, is_min: f32, is_max: f32,
  opsm_threshold: f32, entropy_threshold: f32, tau_pos: f32, tau_neg: f32,
  k_pos: f32, lambda_pos: f32, k_neg: f32, lambda_neg: f32,
  divisor: f32, gas: f32, entropy_coef: f32, loss: u32, // divisor, gas, entropy_coef, agg, ent_global: the backward's
  // The loss type's branches are uniforms, not override constants: one pipeline serves every column of the page's
  // loss table (a pipeline per loss type cost ~0.1 s of compilation each on SwiftShader, 1.4 s of the first update).
  is_apply: u32, // 1: the IS ratio multiplies the loss (not for vespo)
  agg: u32, // 0 per-sequence mean (grpo, sapo), 1 bnpo, 2 fixed divisor (dr_grpo, dapo, cispo, vespo), 3 luspo
  ent_global: u32, // 1: the entropy bonus divides by `divisor` (dapo, cispo, vespo)
  rank_rows: u32, // rows per process (B: one process); the backward's bnpo and entropy totals are each rank's
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;        // (B, T)
@group(0) @binding(1) var<storage, read> entropy: array<f32>;     // (B, T)
@group(0) @binding(2) var<storage, read> aux: array<vec4f>;       // (B, T): old, ref, sampling, mask
@group(0) @binding(3) var<storage, read> advantages: array<f32>;  // (B)
@group(0) @binding(4) var<storage, read_write> tok: array<vec4f>; // (B, T): per_token_loss, per_token_kl, IS ratio, entropy_mask
@group(0) @binding(5) var<storage, read_write> rows: array<f32>;  // (B, 8): Σ L·M, n, Σ L, Σ H·M', Σ M', off_policy_mask, r_seq, φ
@group(0) @binding(6) var<uniform> p: Params;

const LOG_1E8: f32 = -18.420680743952367;

//#include "common/kl.wgsl"

fn old_of(i: u32) -> f32 {
  return select(logp[i], aux[i].x, HAS_OLD);
}

/** vLLM IS ratio from a log-ratio: truncate clamps, mask zeroes what falls outside [min, max]. */
fn vllm_is(x: f32) -> f32 {
  let r = exp(x);
  if (IS_MODE == 1u || IS_MODE == 3u) {
    return clamp(r, p.is_min, p.is_max);
  }
  return select(r, 0.0, r < p.is_min || r > p.is_max);
}

fn clamped_log(x: f32) -> f32 {
  return select(clamp(log(x), LOG_1E8, 20.0), LOG_1E8, x <= 1e-8);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let b = gid.x;
  if (b >= p.B) { return; }
  let T = p.T;
  let o = b * T;
  let A = advantages[b];
  var n = 0.0;
  var s_ratio = 0.0;   // Σ M·(logp − old)
  var s_is = 0.0;      // Σ M·(old − sampling)
  var s_off = 0.0;     // Σ M·(sampling − logp)
  var s_vespo = 0.0;   // Σ M·clamp(logp − old, ±20) + Σ clamped log IS
  for (var t = 0u; t < T; t++) {
    let i = o + t;
    let a = aux[i];
    let M = a.w;
    let lr = logp[i] - old_of(i);
    n += M;
    s_ratio += M * lr;
    if (IS_MODE != 0u) { s_is += M * (old_of(i) - a.z); }
    if (OPSM) { s_off += M * (select(old_of(i), a.z, HAS_SAMPLING) - logp[i]); }
    if (p.loss == 3u) {
      s_vespo += M * clamp(lr, -20.0, 20.0);
      if (IS_MODE == 1u || IS_MODE == 2u) { s_vespo += clamped_log(vllm_is((old_of(i) - a.z) * M)); }
    }
  }
  let nb = max(1.0, n);
  let r_seq = exp(s_ratio / nb);
  let is_seq = vllm_is(s_is);
  var off = 1.0;
  if (OPSM) { off = select(0.0, 1.0, A >= 0.0 || s_off / nb <= p.opsm_threshold); }
  var phi = 0.0;
  if (p.loss == 3u) {
    if (IS_MODE == 3u || IS_MODE == 4u) { s_vespo += clamped_log(is_seq); }
    let lw = clamp(s_vespo, LOG_1E8, 20.0);
    let pos = A >= 0.0;
    let k = select(p.k_neg, p.k_pos, pos);
    let lam = max(select(p.lambda_neg, p.lambda_pos, pos), 1e-4);
    let f = exp(lam + k * lw - lam * exp(lw));
    phi = select(f, 0.0, f != f || f > 3.0e38);
  }
  var sum_lm = 0.0;
  var sum_l = 0.0;
  var sum_hm = 0.0;
  var sum_m = 0.0;
  for (var t = 0u; t < T; t++) {
    let i = o + t;
    let a = aux[i];
    let M = a.w;
    let lp = logp[i];
    let r = select(exp(lp - old_of(i)), r_seq, SEQUENCE);
    var L: f32;
    if (p.loss == 1u) {
      L = -min(r, p.eps_high) * A * lp;
    } else if (p.loss == 2u) {
      let tau = select(p.tau_neg, p.tau_pos, A > 0.0);
      L = -(1.0 / (1.0 + exp(-tau * (r - 1.0)))) * 4.0 / tau * A;
    } else if (p.loss == 3u) {
      L = -phi * A * lp;
    } else {
      let c = clamp(r, 1.0 - p.eps_low, 1.0 + p.eps_high);
      let r1 = select(r, min(r, p.delta), DELTA);
      L = -min(r1 * A, c * A);
    }
    var em = 1.0;
    if (EMASK) { em = select(0.0, 1.0, M != 0.0 && entropy[i] * M >= p.entropy_threshold); }
    var isw = 1.0;
    if (IS_MODE == 1u || IS_MODE == 2u) { isw = vllm_is((old_of(i) - a.z) * M); }
    if (IS_MODE >= 3u) { isw = is_seq; }
    L *= off * em;
    if (p.is_apply != 0u) { L *= isw; }
    var kl = 0.0;
    if (KL) {
      kl = k3_value(a.y - lp) * select(1.0, r, BIAS_KL);
      L += p.beta * kl;
    }
    tok[i] = vec4f(L, kl, isw, em);
    sum_lm += L * M;
    sum_l += L;
    sum_hm += entropy[i] * M * em;
    sum_m += M * em;
  }
  let q = b * 8u;
  rows[q] = sum_lm;
  rows[q + 1u] = n;
  rows[q + 2u] = sum_l;
  rows[q + 3u] = sum_hm;
  rows[q + 4u] = sum_m;
  rows[q + 5u] = off;
  rows[q + 6u] = r_seq;
  rows[q + 7u] = phi;
}
