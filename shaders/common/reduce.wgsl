// Workgroup tree reductions (llm.c common.h in spirit), included by kernels with
//   //#include "common/reduce.wgsl"
// One value per thread, WG threads (the including kernel's `override WG`, a power of two); the sum is
// taken in a fixed tree order, so it is deterministic. Every thread of the workgroup must call them in
// uniform control flow (they hold barriers). The trailing barrier lets the caller call again at once:
// without it a fast thread could overwrite red[0] before a slow one has read the previous result.

var<workgroup> red: array<f32, WG>;

fn reduce_sum(t: u32, v: f32) -> f32 {
  red[t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] += red[t + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn reduce_max(t: u32, v: f32) -> f32 {
  red[t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] = max(red[t], red[t + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
