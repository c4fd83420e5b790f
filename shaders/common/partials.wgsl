// The partial-sum sweep shared by sumsq_forward's main and the optimizer steps (adamw_step, sgd_step),
// which sum Δθ² of the update they write in the same pass instead of copying θ_old and re-reading it:
// workgroup k of a window takes elements [k·WG·K, (k+1)·WG·K), each thread K of them strided by WG
// (coalesced), in order, then a tree over the workgroup -> part[part_base + k]. sumsq_forward's finish
// then sums each tensor's partials. The including kernel declares `part` (read_write array<f32>) and
// defines `fn elem(i: u32) -> f32`: the value whose square is summed (doing its own update first).

//#include "common/reduce.wgsl"

fn sweep_sumsq(k: u32, t: u32, n: u32, K: u32, part_base: u32) {
  let start = k * WG * K;
  if (start >= n) { return; } // whole workgroup: uniform
  var s = 0.0;
  for (var j = 0u; j < K; j++) {
    let i = start + j * WG + t;
    if (i < n) {
      let x = elem(i);
      s += x * x;
    }
  }
  let total = reduce_sum(t, s);
  if (t == 0u) { part[part_base + k] = total; }
}
