// Fused attention backward for GPUs, key side (full sequences, Tq = Tk = T): one workgroup per
// (b, kvh, j) key row (the row kernel attention_backward_dkdv.wgsl is the software adapters'; why: the
// header of attention_wg_forward.wgsl) walks, for each query head h sharing kv head kvh (GQA) and in
// order, the queries i >= j in tiles of WG, recomputing p_ij = exp(scale·q_i·k_j − lse_i) and g_ij = scale·p_ij·(dout_i·v_j − delta_i)
// (lse from the forward, delta from attention_wg_backward_dq.wgsl; no (B, Hq, T, T) buffer):
//   dv_j = Σ_h Σ_i p_ij · dout_i,   dk_j = Σ_h Σ_i g_ij · q_i
// A masked key (attention_mask[b, j] = 0) and query rows with lse = -inf contribute 0. No atomics:
// each key row is written by one workgroup, its sums in a fixed order.

override WG: u32 = 64; // queries per tile = threads per workgroup

//#include "common/attention_backward_dkdv.wgsl"

var<workgroup> krow: array<f32, DH>;
var<workgroup> vrow: array<f32, DH>;
var<workgroup> accK: array<f32, DH>; // element d belongs to thread d % WG
var<workgroup> accV: array<f32, DH>;
var<workgroup> pt: array<f32, WG>;   // the tile's p_ij
var<workgroup> gt: array<f32, WG>;   // the tile's g_ij

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // (b·T + j)·Hkv + kvh, the k / v row index
  if (row >= p.groups) { return; }
  let t = lid.x;
  let D = p.D;
  let kvh = row % p.Hkv;
  let j = (row / p.Hkv) % p.T;
  let b = row / (p.Hkv * p.T);
  let group = p.Hq / p.Hkv;
  let ko = row * D;
  for (var d = t; d < D; d += WG) {
    krow[d] = k[ko + d];
    vrow[d] = v[ko + d];
    accK[d] = 0.0;
    accV[d] = 0.0;
  }
  workgroupBarrier();
  let visible = attention_mask[b * p.T + j] != 0;

  for (var r = 0u; r < group; r++) {
    let h = kvh * group + r;
    for (var i0 = j; i0 < p.T; i0 += WG) {
      let i = i0 + t;
      var pij = 0.0;
      var g = 0.0;
      if (visible && i < p.T) {
        let li = lse[(b * p.Hq + h) * p.T + i];
        if (li > p.neg_inf) {
          let qo = ((b * p.T + i) * p.Hq + h) * D;
          var sc = 0.0;
          var dp = 0.0;
          for (var d = 0u; d < D; d++) {
            sc = fma(q[qo + d], krow[d], sc);
            dp = fma(dout[qo + d], vrow[d], dp);
          }
          pij = exp(p.scale * sc - li);
          g = p.scale * pij * (dp - delta[(b * p.Hq + h) * p.T + i]);
        }
      }
      pt[t] = pij;
      gt[t] = g;
      workgroupBarrier();
      let n = min(WG, p.T - i0);
      for (var d = t; d < D; d += WG) {
        var ak = accK[d];
        var av = accV[d];
        for (var u = 0u; u < n; u++) {
          let qo = ((b * p.T + i0 + u) * p.Hq + h) * D + d;
          ak = fma(gt[u], q[qo], ak);
          av = fma(pt[u], dout[qo], av);
        }
        accK[d] = ak;
        accV[d] = av;
      }
      workgroupBarrier(); // pt, gt are rewritten by the next tile
    }
  }
  for (var d = t; d < D; d += WG) {
    dk[ko + d] = accK[d];
    dv[ko + d] = accV[d];
  }
}
