// One torch.optim.AdamW step over one window of a parameter tensor per dispatch (common/adamw_step.wgsl has
// the update): what CPU adapters and adapters without the 15 storage buffers per stage of adamw_step_x3 run
// (src/kernels/optimizer.ts adamwSlots), and the windows a launch of three leaves over.

override WG: u32 = 256;

const SLOTS = 1u;

struct Params {
  first: u32,           // this dispatch's window in items
  count: u32,           // 1
  decay0: f32,          // 1 - lr * weight_decay
  one_minus_beta1: f32,
  beta2: f32,
  one_minus_beta2: f32,
  step_size: f32,       // lr / (1 - beta1^t)
  bc2_sqrt: f32,        // sqrt(1 - beta2^t)
  eps: f32,
}

@group(0) @binding(0) var<storage, read_write> param0: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> grad0: array<f32>;         // (n)
@group(0) @binding(2) var<storage, read_write> m0: array<f32>;      // (n) exp_avg
@group(0) @binding(3) var<storage, read_write> v0: array<f32>;      // (n) exp_avg_sq
@group(0) @binding(4) var<storage, read> clip: array<f32>;          // (3) coef, ok, total norm (sumsq_forward clip_coef)
@group(0) @binding(5) var<storage, read_write> part: array<f32>;    // partial sums of Δθ²
@group(0) @binding(6) var<storage, read> items: array<vec4u>;       // (windows) n, K, part_base, first workgroup
@group(0) @binding(7) var<uniform> p: Params;

//#include "common/adamw_step.wgsl"

fn elem(i: u32) -> f32 {
  if (clip[1] == 0.0) { return 0.0; }
  let before = param0[i];
  let u = adamw(before, grad0[i], m0[i], v0[i], p.decay0);
  param0[i] = u.x;
  m0[i] = u.y;
  v0[i] = u.z;
  return u.x - before;
}
