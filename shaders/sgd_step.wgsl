// One torch.optim.SGD step, elementwise over a parameter tensor:
//   d = grad * grad_scale + weight_decay * p                 (L2 weight decay, added to the gradient)
//   momentum:  buf = d on the first step, else momentum * buf + (1 - dampening) * d;
//              d = d + momentum * buf (nesterov) or d = buf
//   p = p - lr * d
// Entry points: main (no momentum: no buffer) and momentum (with the momentum buffer).

override WG: u32 = 256;

struct Params {
  n: u32,
  lr: f32,
  weight_decay: f32,
  momentum: f32,
  one_minus_dampening: f32,
  nesterov: u32,
  first: u32,           // 1 on the first step: buf = d
  grad_scale: f32,
}

@group(0) @binding(0) var<storage, read_write> param: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> grad: array<f32>;         // (n)
@group(0) @binding(2) var<storage, read_write> buf: array<f32>;    // (n) momentum_buffer (entry momentum)
@group(0) @binding(2) var<uniform> p: Params;                      //     (entry main)
@group(0) @binding(3) var<uniform> pm: Params;                     //     (entry momentum)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let d = grad[i] * p.grad_scale + p.weight_decay * param[i];
  param[i] = param[i] - p.lr * d;
}

@compute @workgroup_size(WG)
fn momentum(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= pm.n) { return; }
  var d = grad[i] * pm.grad_scale + pm.weight_decay * param[i];
  let b = select(pm.momentum * buf[i] + pm.one_minus_dampening * d, d, pm.first != 0u);
  buf[i] = b;
  d = select(b, d + pm.momentum * b, pm.nesterov != 0u);
  param[i] = param[i] - pm.lr * d;
}
