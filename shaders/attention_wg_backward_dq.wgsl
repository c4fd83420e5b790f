// Fused attention backward for GPUs, query side (full sequences, Tq = Tk = T): one workgroup per
// (b, h, i) query row (the row kernel attention_backward_dq.wgsl is the software adapters'; why: the
// header of attention_wg_forward.wgsl). It first forms delta_i = Σ_d dout_id·out_id (= Σ_j p_ij·dP_ij, the softmax backward's
// row term) and saves it for attention_wg_backward_dkdv.wgsl, then walks the visible keys in tiles of
// WG, recomputing p_ij = exp(scale·q_i·k_j − lse_i) from the forward's lse (no (B, Hq, T, T) buffer),
//   g_ij = scale · p_ij · (dout_i·v_j − delta_i)    (∂L/∂(q_i·k_j))
//   dq_i = Σ_j g_ij · k_j
// Key j is visible iff j <= i and attention_mask[b, j] = 1; a row with lse = -inf (no visible key)
// gets dq = 0. No atomics: each row is written by one workgroup, its sums in a fixed order.

override WG: u32 = 64; // keys per tile = threads per workgroup; power of two (tree reduction)

//#include "common/attention_backward_dq.wgsl"

var<workgroup> qrow: array<f32, DH>;
var<workgroup> grow: array<f32, DH>; // dout_i
var<workgroup> acc: array<f32, DH>;  // dq_i; element d belongs to thread d % WG
var<workgroup> gt: array<f32, WG>;   // the tile's g_ij

//#include "common/reduce.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // (b·Hq + h)·T + i
  if (row >= p.groups) { return; }
  let t = lid.x;
  let D = p.D;
  let i = row % p.T;
  let h = (row / p.T) % p.Hq;
  let b = row / (p.T * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let qo = ((b * p.T + i) * p.Hq + h) * D;
  var part = 0.0;
  for (var d = t; d < D; d += WG) {
    qrow[d] = q[qo + d];
    grow[d] = dout[qo + d];
    acc[d] = 0.0;
    part = fma(dout[qo + d], out[qo + d], part);
  }
  let di = reduce_sum(t, part); // its barriers also publish qrow / grow
  if (t == 0u) { delta[row] = di; }
  let li = lse[row];

  for (var j0 = 0u; j0 <= i; j0 += WG) {
    let j = j0 + t;
    var g = 0.0;
    if (j <= i && li > p.neg_inf && attention_mask[b * p.T + j] != 0) {
      let ko = ((b * p.T + j) * p.Hkv + kvh) * D;
      var sc = 0.0;
      var dp = 0.0;
      for (var d = 0u; d < D; d++) {
        sc = fma(qrow[d], k[ko + d], sc);
        dp = fma(grow[d], v[ko + d], dp);
      }
      g = p.scale * exp(p.scale * sc - li) * (dp - di);
    }
    gt[t] = g;
    workgroupBarrier();
    let n = min(WG, i + 1u - j0);
    for (var d = t; d < D; d += WG) {
      var a = acc[d];
      for (var u = 0u; u < n; u++) { a = fma(gt[u], k[((b * p.T + j0 + u) * p.Hkv + kvh) * D + d], a); }
      acc[d] = a;
    }
    workgroupBarrier(); // gt is rewritten by the next tile
  }
  for (var d = t; d < D; d += WG) { dq[qo + d] = acc[d]; }
}
