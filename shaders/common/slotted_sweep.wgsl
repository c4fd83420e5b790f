// The sweep of common/partials.wgsl over up to SLOTS tensor windows per dispatch (sumsq_forward's main,
// adamw_step{,_x3}): items[first + s] = (n, K, part_base, first workgroup) of slot s. A workgroup finds its
// slot (uniform: the whole workgroup has one), keeps it in `slot` for the including shader's elem(), and
// sweeps that window. The including shader declares SLOTS, `items` (read array<vec4u>), `part` and elem().

//#include "common/partials.wgsl"

var<private> slot: u32;

/** Workgroup k of a dispatch whose windows are items[first .. first + count). */
fn slotted_sweep(k: u32, t: u32, first: u32, count: u32) {
  var s = 0u;
  for (var j = 1u; j < min(count, SLOTS); j++) {
    if (items[first + j].w <= k) { s = j; }
  }
  slot = s;
  let it = items[first + s];
  sweep_sumsq(k - it.w, t, it.x, it.y, it.z); // past the last slot's workgroups (a 2-D grid's spare): start >= n, returns
}
