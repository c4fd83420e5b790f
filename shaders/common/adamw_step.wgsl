// The AdamW step shared by adamw_step (one tensor window per dispatch) and adamw_step_x3 (up to three):
// torch.optim.AdamW's single-tensor algorithm per element,
//   g = grad * coef                              (coef: clip_grad_norm_'s coefficient, clip[0], made on the GPU)
//   p = p * (1 - lr * weight_decay)              (decoupled weight decay; `decay` per tensor window)
//   m = m + (1 - beta1) (g - m)                  (torch: exp_avg.lerp_(grad, 1 - beta1))
//   v = beta2 v + (1 - beta2) g^2
//   p = p - step_size * m / (sqrt(v) / bc2_sqrt + eps),  step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t)
// with the partial sums of Δθ² = (p_new - p_old)² in the same sweep (common/slotted_sweep.wgsl, as
// sumsq_forward's main; its finish sums them per tensor). With clip[1] = 0 (a non-finite gradient norm)
// nothing is written. The including shader declares SLOTS, its slots' bindings from 3 on, the params uniform
// `p` after them, and `fn elem(i: u32) -> f32` that updates element i of the slot's window through adamw()
// and returns its Δθ.

struct Params {
  first: u32,           // this dispatch's first window in items
  count: u32,           // its windows (≤ SLOTS)
  decay0: f32,          // 1 - lr * weight_decay of slot 0's tensor
  decay1: f32,          // slot 1's (adamw_step_x3)
  decay2: f32,          // slot 2's (adamw_step_x3)
  one_minus_beta1: f32,
  beta2: f32,
  one_minus_beta2: f32,
  step_size: f32,       // lr / (1 - beta1^t)
  bc2_sqrt: f32,        // sqrt(1 - beta2^t)
  eps: f32,
}

@group(0) @binding(0) var<storage, read> clip: array<f32>;          // (3) coef, ok, total norm (sumsq_forward clip_coef)
@group(0) @binding(1) var<storage, read_write> part: array<f32>;    // partial sums of Δθ²
@group(0) @binding(2) var<storage, read> items: array<vec4u>;       // (windows) n, K, part_base, first workgroup

//#include "common/slotted_sweep.wgsl"

/** (p_new, m_new, v_new) of one element; `decay` = 1 - lr * weight_decay of its tensor. */
fn adamw(before: f32, grad: f32, m: f32, v: f32, decay: f32) -> vec3f {
  let g = grad * clip[0];
  let mi = m + p.one_minus_beta1 * (g - m);
  let vi = p.beta2 * v + p.one_minus_beta2 * g * g;
  return vec3f(before * decay - p.step_size * mi / (sqrt(vi) / p.bc2_sqrt + p.eps), mi, vi);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  slotted_sweep(wid.x + wid.y * nwg.x, t, p.first, p.count);
}
