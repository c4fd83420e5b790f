// Each process's totals over its rank_rows rows of trl_loss_forward's row sums, for trl_loss_backward: N = Σ n (its
// loss-mask tokens, bnpo's divisor) and E = Σ M' (its entropy-masked tokens, the entropy bonus's). One workgroup per
// process, a strided loop then a tree reduction (common/reduce.wgsl): the backward reads two numbers per row instead
// of every invocation summing its process's rows, which was O(B²) over one process (50,000 rows: 70 s). Both sums are
// counts, exact in f32 below 2^24 whatever the order.

override WG: u32 = 256; // a power of two

struct Params { B: u32, rank_rows: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> rows: array<f32>;          // (B, 8) from the forward
@group(0) @binding(1) var<storage, read_write> totals: array<f32>;  // (ranks, 2): N, E
@group(0) @binding(2) var<uniform> p: Params;

//#include "common/reduce.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) t: u32) {
  let r0 = wid.x * p.rank_rows;
  var n = 0.0;
  var e = 0.0;
  for (var k = r0 + t; k < r0 + p.rank_rows; k += WG) {
    n += rows[k * 8u + 1u];
    e += rows[k * 8u + 4u];
  }
  let N = reduce_sum(t, n);
  let E = reduce_sum(t, e);
  if (t == 0u) {
    totals[wid.x * 2u] = N;
    totals[wid.x * 2u + 1u] = E;
  }
}
