// Fused attention backward, query side (full sequences, Tq = Tk = T): a workgroup takes BQ query rows
// of one (b, h), one thread per row. Each thread first forms delta_i = Σ_d dout_id·out_id
// (= Σ_j p_ij·dP_ij, the softmax backward's row term) and saves it for attention_backward_dkdv.wgsl,
// then walks its visible keys, recomputing p_ij = exp(scale·q_i·k_j − lse_i) from the forward's lse
// (no (B, Hq, T, T) buffer):
//   g_ij = scale · p_ij · (dout_i·v_j − delta_i)    (∂L/∂(q_i·k_j))
//   dq_i = Σ_j g_ij · k_j
// Key j is visible iff j <= i and attention_mask[b, j] = 1; a row with lse = -inf (no visible key)
// gets dq = 0. No atomics and no barriers: each row is one thread's, its sums in key order.

//#include "common/attention_backward_dq.wgsl"

override BQ: u32 = 32; // rows per workgroup = threads (one row each)

var<workgroup> acc: array<f32, BQ * DH>; // row t's dq at [t·DH, t·DH + D)

@compute @workgroup_size(BQ)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x; // (b·Hq + h)·blocks + block
  if (g >= p.groups) { return; }
  let t = lid.x;
  let i = (g % p.blocks) * BQ + t;
  if (i >= p.T) { return; }
  let D = p.D;
  let h = (g / p.blocks) % p.Hq;
  let b = g / (p.blocks * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let qo = ((b * p.T + i) * p.Hq + h) * D;
  let row = (b * p.Hq + h) * p.T + i;
  let ao = t * DH;
  var di = 0.0;
  for (var d = 0u; d < D; d++) {
    di = fma(dout[qo + d], out[qo + d], di);
    acc[ao + d] = 0.0;
  }
  delta[row] = di;
  let li = lse[row];
  if (li > p.neg_inf) {
    for (var j = 0u; j <= i; j++) {
      if (attention_mask[b * p.T + j] == 0) { continue; }
      let ko = ((b * p.T + j) * p.Hkv + kvh) * D;
      let s = score_and_dp(qo, ko, D);
      let gij = p.scale * exp(p.scale * s.x - li) * (s.y - di);
      for (var d = 0u; d < D; d++) { acc[ao + d] = fma(gij, k[ko + d], acc[ao + d]); }
    }
  }
  for (var d = 0u; d < D; d++) { dq[qo + d] = acc[ao + d]; }
}
