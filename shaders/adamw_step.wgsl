// One torch.optim.AdamW step over one window of a parameter tensor per dispatch (common/adamw_step.wgsl has
// the update): what CPU adapters and adapters without the 15 storage buffers per stage of adamw_step_x3 run
// (src/kernels/optimizer.ts adamwSlots), and the windows a launch of three leaves over.

override WG: u32 = 256;

const SLOTS = 1u;

@group(0) @binding(3) var<storage, read_write> param0: array<f32>;  // (n)
@group(0) @binding(4) var<storage, read> grad0: array<f32>;         // (n)
@group(0) @binding(5) var<storage, read_write> m0: array<f32>;      // (n) exp_avg
@group(0) @binding(6) var<storage, read_write> v0: array<f32>;      // (n) exp_avg_sq
@group(0) @binding(7) var<uniform> p: Params;                       // decay1, decay2 unused

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
