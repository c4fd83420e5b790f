// Fused attention backward, query side (full sequences, Tq = Tk = T): a workgroup takes BQ query rows
// of one (b, h), one thread per row. Each thread first forms delta_i = Σ_d dout_id·out_id
// (= Σ_j p_ij·dP_ij, the softmax backward's row term) and saves it for attention_backward_dkdv.wgsl,
// then walks its visible keys, recomputing p_ij = exp(scale·q_i·k_j − lse_i) from the forward's lse
// (no (B, Hq, T, T) buffer):
//   g_ij = scale · p_ij · (dout_i·v_j − delta_i)    (∂L/∂(q_i·k_j))
//   dq_i = Σ_j g_ij · k_j
// Key j is visible iff j <= i and attention_mask[b, j] = 1; a row with lse = -inf (no visible key)
// gets dq = 0. No atomics and no barriers: each row is one thread's, its sums in key order. D is a multiple of
// 4: rows are read and accumulated as vec4s (common/attention_rows.wgsl, common/attention_rows_backward.wgsl).

//#include "common/attention_backward_dq.wgsl"
//#include "common/attention_rows_backward.wgsl"

override BQ: u32 = 32; // rows per workgroup = threads (one row each)

@group(0) @binding(4) var<storage, read> out4: array<vec4f>;        // (B, T, Hq, D / 4)
@group(0) @binding(5) var<storage, read> dout4: array<vec4f>;       // (B, T, Hq, D / 4)
@group(0) @binding(8) var<storage, read_write> dq4: array<vec4f>;   // (B, T, Hq, D / 4)

@compute @workgroup_size(BQ)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x; // (b·Hq + h)·blocks + block
  if (g >= p.groups) { return; }
  let t = lid.x;
  let i = (g % p.blocks) * BQ + t;
  if (i >= p.T) { return; }
  let D4 = p.D / 4u;
  let h = (g / p.blocks) % p.Hq;
  let b = g / (p.blocks * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let qo = ((b * p.T + i) * p.Hq + h) * D4;
  let row = (b * p.Hq + h) * p.T + i;
  var acc: array<vec4f, D4_MAX>; // this row's dq (its first D / 4; zero-initialised)
  var di = 0.0;
  for (var d = 0u; d < D4; d++) { di = fma4(dout4[qo + d], out4[qo + d], di); }
  delta[row] = di;
  let li = lse[row];
  if (li > p.neg_inf) {
    for (var j = 0u; j <= i; j++) {
      if (attention_mask[b * p.T + j] == 0) { continue; }
      let ko = ((b * p.T + j) * p.Hkv + kvh) * D4;
      let s = score_and_dp(qo, ko, D4);
      let gij = p.scale * exp(p.scale * s.x - li) * (s.y - di);
      for (var d = 0u; d < D4; d++) { acc[d] = fma(vec4f(gij), k4[ko + d], acc[d]); }
    }
  }
  for (var d = 0u; d < D4; d++) { dq4[qo + d] = acc[d]; }
}
