// One torch.optim.AdamW step (single-tensor algorithm) over one window of a parameter tensor, elementwise:
//   g = grad * coef                              (coef: clip_grad_norm_'s coefficient, clip[0], made on the GPU)
//   p = p * (1 - lr * weight_decay)              (decoupled weight decay)
//   m = m + (1 - beta1) (g - m)                  (torch: exp_avg.lerp_(grad, 1 - beta1))
//   v = beta2 v + (1 - beta2) g^2
//   p = p - step_size * m / (sqrt(v) / bc2_sqrt + eps),  step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t)
// and, in the same sweep, the partial sums of Δθ² = (p_new - p_old)² for the update size (common/partials.wgsl;
// sumsq_forward's finish sums them per tensor). With clip[1] = 0 (a non-finite gradient norm) nothing is written.
// The step-dependent scalars come from the CPU in float64 (as torch computes them in Python floats).

override WG: u32 = 256;

struct Params {
  n: u32,
  K: u32,               // elements per thread (the sweep's run)
  part_base: u32,       // where this window's partials start in part
  decay: f32,           // 1 - lr * weight_decay
  one_minus_beta1: f32,
  beta2: f32,
  one_minus_beta2: f32,
  step_size: f32,       // lr / (1 - beta1^t)
  bc2_sqrt: f32,        // sqrt(1 - beta2^t)
  eps: f32,
}

@group(0) @binding(0) var<storage, read_write> param: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> grad: array<f32>;         // (n)
@group(0) @binding(2) var<storage, read_write> m: array<f32>;      // (n) exp_avg
@group(0) @binding(3) var<storage, read_write> v: array<f32>;      // (n) exp_avg_sq
@group(0) @binding(4) var<storage, read> clip: array<f32>;         // (3) coef, ok, total norm (sumsq_forward clip_coef)
@group(0) @binding(5) var<storage, read_write> part: array<f32>;   // partial sums of Δθ²
@group(0) @binding(6) var<uniform> p: Params;

//#include "common/partials.wgsl"

/** Steps element i; returns its Δθ. */
fn elem(i: u32) -> f32 {
  if (clip[1] == 0.0) { return 0.0; }
  let before = param[i];
  let g = grad[i] * clip[0];
  let mi = m[i] + p.one_minus_beta1 * (g - m[i]);
  let vi = p.beta2 * v[i] + p.one_minus_beta2 * g * g;
  m[i] = mi;
  v[i] = vi;
  let after = before * p.decay - p.step_size * mi / (sqrt(vi) / p.bc2_sqrt + p.eps);
  param[i] = after;
  return after - before;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  sweep_sumsq(wid.x + wid.y * nwg.x, t, p.n, p.K, p.part_base);
}
