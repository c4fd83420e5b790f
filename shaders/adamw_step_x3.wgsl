// One torch.optim.AdamW step over three parameter-tensor windows per dispatch (common/adamw_step.wgsl has
// the update and the slot search): a third of adamw_step's dispatches, for adapters with at least 15 storage
// buffers per shader stage (4 per slot + clip, part, items). WGSL has no arrays of buffers: one case per slot.

override WG: u32 = 256;

const SLOTS = 3u;

@group(0) @binding(3) var<storage, read_write> param0: array<f32>;  // (n) of slot 0's window
@group(0) @binding(4) var<storage, read_write> param1: array<f32>;
@group(0) @binding(5) var<storage, read_write> param2: array<f32>;
@group(0) @binding(6) var<storage, read> grad0: array<f32>;
@group(0) @binding(7) var<storage, read> grad1: array<f32>;
@group(0) @binding(8) var<storage, read> grad2: array<f32>;
@group(0) @binding(9) var<storage, read_write> m0: array<f32>;      // exp_avg
@group(0) @binding(10) var<storage, read_write> m1: array<f32>;
@group(0) @binding(11) var<storage, read_write> m2: array<f32>;
@group(0) @binding(12) var<storage, read_write> v0: array<f32>;     // exp_avg_sq
@group(0) @binding(13) var<storage, read_write> v1: array<f32>;
@group(0) @binding(14) var<storage, read_write> v2: array<f32>;
@group(0) @binding(15) var<uniform> p: Params;

//#include "common/adamw_step.wgsl"

fn elem(i: u32) -> f32 {
  if (clip[1] == 0.0) { return 0.0; }
  var before: f32;
  var u: vec3f;
  switch slot {
    case 0u: {
      before = param0[i];
      u = adamw(before, grad0[i], m0[i], v0[i], p.decay0);
      param0[i] = u.x;
      m0[i] = u.y;
      v0[i] = u.z;
    }
    case 1u: {
      before = param1[i];
      u = adamw(before, grad1[i], m1[i], v1[i], p.decay1);
      param1[i] = u.x;
      m1[i] = u.y;
      v1[i] = u.z;
    }
    default: {
      before = param2[i];
      u = adamw(before, grad2[i], m2[i], v2[i], p.decay2);
      param2[i] = u.x;
      m2[i] = u.y;
      v2[i] = u.z;
    }
  }
  return u.x - before;
}
