// One torch.optim.AdamW step (single-tensor path), elementwise over a parameter tensor:
//   g = grad * grad_scale                        (grad_scale: the clip_grad_norm_ coefficient)
//   p = p * (1 - lr * weight_decay)              (decoupled weight decay)
//   m = m + (1 - beta1) (g - m)                  (torch: exp_avg.lerp_(grad, 1 - beta1))
//   v = beta2 v + (1 - beta2) g^2
//   p = p - step_size * m / (sqrt(v) / bc2_sqrt + eps),  step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t)
// The step-dependent scalars come from the CPU in float64 (as torch computes them in Python floats).

override WG: u32 = 256;

struct Params {
  n: u32,
  decay: f32,           // 1 - lr * weight_decay
  one_minus_beta1: f32,
  beta2: f32,
  one_minus_beta2: f32,
  step_size: f32,       // lr / (1 - beta1^t)
  bc2_sqrt: f32,        // sqrt(1 - beta2^t)
  eps: f32,
  grad_scale: f32,
}

@group(0) @binding(0) var<storage, read_write> param: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> grad: array<f32>;         // (n)
@group(0) @binding(2) var<storage, read_write> m: array<f32>;      // (n) exp_avg
@group(0) @binding(3) var<storage, read_write> v: array<f32>;      // (n) exp_avg_sq
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let g = grad[i] * p.grad_scale;
  let mi = m[i] + p.one_minus_beta1 * (g - m[i]);
  let vi = p.beta2 * v[i] + p.one_minus_beta2 * g * g;
  m[i] = mi;
  v[i] = vi;
  param[i] = param[i] * p.decay - p.step_size * mi / (sqrt(vi) / p.bc2_sqrt + p.eps);
}
