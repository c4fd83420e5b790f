// One torch.optim.SGD step over one window of a parameter tensor, elementwise:
//   d = grad * coef + weight_decay * p                       (coef: clip_grad_norm_'s, clip[0]; L2 weight decay)
//   MOMENTUM:  buf = d on the first step, else momentum * buf + (1 - dampening) * d;
//              d = d + momentum * buf (nesterov) or d = buf
//   p = p - lr * d
// and the partial sums of Δθ² of the sweep (common/partials.wgsl), as adamw_step. With clip[1] = 0 (a
// non-finite gradient norm) nothing is written. Without MOMENTUM `buf` is never touched (bind a stand-in).

override WG: u32 = 256;
override MOMENTUM: bool = false;

struct Params {
  n: u32,
  K: u32,
  part_base: u32,
  lr: f32,
  weight_decay: f32,
  momentum: f32,
  one_minus_dampening: f32,
  nesterov: u32,
  first: u32,           // 1 on the first step: buf = d
}

@group(0) @binding(0) var<storage, read_write> param: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> grad: array<f32>;         // (n)
@group(0) @binding(2) var<storage, read_write> buf: array<f32>;    // (n) momentum_buffer (MOMENTUM)
@group(0) @binding(3) var<storage, read> clip: array<f32>;         // (3) coef, ok, total norm
@group(0) @binding(4) var<storage, read_write> part: array<f32>;   // partial sums of Δθ²
@group(0) @binding(5) var<uniform> p: Params;

//#include "common/partials.wgsl"

/** Steps element i; returns its Δθ. */
fn elem(i: u32) -> f32 {
  if (clip[1] == 0.0) { return 0.0; }
  let before = param[i];
  var d = grad[i] * clip[0] + p.weight_decay * before;
  if (MOMENTUM) {
    let b = select(p.momentum * buf[i] + p.one_minus_dampening * d, d, p.first != 0u);
    buf[i] = b;
    d = select(b, d + p.momentum * b, p.nesterov != 0u);
  }
  let after = before - p.lr * d;
  param[i] = after;
  return after - before;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  sweep_sumsq(wid.x + wid.y * nwg.x, t, p.n, p.K, p.part_base);
}
