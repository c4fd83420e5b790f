// Fused attention backward, key side (full sequences, Tq = Tk = T): a workgroup takes BQ key rows of
// one (b, kvh), one thread per key row j. It walks, for each query head h sharing kv head kvh (GQA)
// and in order, the queries i >= j, recomputing p_ij = exp(scale·q_i·k_j − lse_i) and
// g_ij = scale·p_ij·(dout_i·v_j − delta_i) (lse from attention_forward.wgsl, delta from
// attention_backward_dq.wgsl; no (B, Hq, T, T) buffer):
//   dv_j = Σ_h Σ_i p_ij · dout_i,   dk_j = Σ_h Σ_i g_ij · q_i
// A masked key (attention_mask[b, j] = 0) and query rows with lse = -inf contribute 0. No atomics and
// no barriers: each key row is one thread's, its sums in a fixed order (heads in order, i ascending).
// The threads of a workgroup walk the queries in lockstep from the block's first key row, each skipping
// the queries before its own: at every step they all read the same q / dout row, which the cache
// broadcasts (a walk from each thread's own j read BQ different rows at once: 25% slower on an H100).

//#include "common/attention_backward_dkdv.wgsl"

override BQ: u32 = 32; // rows per workgroup = threads (one row each)

var<workgroup> accK: array<f32, BQ * DH>; // row t's dk at [t·DH, t·DH + D)
var<workgroup> accV: array<f32, BQ * DH>;

@compute @workgroup_size(BQ)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x; // (b·Hkv + kvh)·blocks + block
  if (g >= p.groups) { return; }
  let t = lid.x;
  let j0 = (g % p.blocks) * BQ; // the block's first key row: where the lockstep walk starts
  let j = j0 + t;
  if (j >= p.T) { return; }
  let D = p.D;
  let kvh = (g / p.blocks) % p.Hkv;
  let b = g / (p.blocks * p.Hkv);
  let group = p.Hq / p.Hkv;
  let ko = ((b * p.T + j) * p.Hkv + kvh) * D;
  let ao = t * DH;
  for (var d = 0u; d < D; d++) {
    accK[ao + d] = 0.0;
    accV[ao + d] = 0.0;
  }
  if (attention_mask[b * p.T + j] != 0) {
    for (var r = 0u; r < group; r++) {
      let h = kvh * group + r;
      for (var i = j0; i < p.T; i++) {
        let li = lse[(b * p.Hq + h) * p.T + i];
        if (i < j || !(li > p.neg_inf)) { continue; }
        let qo = ((b * p.T + i) * p.Hq + h) * D;
        let s = score_and_dp(qo, ko, D);
        let pij = exp(p.scale * s.x - li);
        let gij = p.scale * pij * (s.y - delta[(b * p.Hq + h) * p.T + i]);
        for (var d = 0u; d < D; d++) {
          accK[ao + d] = fma(gij, q[qo + d], accK[ao + d]);
          accV[ao + d] = fma(pij, dout[qo + d], accV[ao + d]);
        }
      }
    }
  }
  for (var d = 0u; d < D; d++) {
    dk[ko + d] = accK[ao + d];
    dv[ko + d] = accV[ao + d];
  }
}
