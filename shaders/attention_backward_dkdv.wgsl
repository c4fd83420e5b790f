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

// D is a multiple of 4: rows are read and accumulated as vec4s (common/attention_rows.wgsl,
// common/attention_rows_backward.wgsl).

//#include "common/attention_backward_dkdv.wgsl"
//#include "common/attention_rows_backward.wgsl"

override BQ: u32 = 32; // rows per workgroup = threads (one row each)

@group(0) @binding(4) var<storage, read> dout4: array<vec4f>;       // (B, T, Hq, D / 4)
@group(0) @binding(7) var<storage, read_write> dk4: array<vec4f>;   // (B, T, Hkv, D / 4)
@group(0) @binding(8) var<storage, read_write> dv4: array<vec4f>;   // (B, T, Hkv, D / 4)

@compute @workgroup_size(BQ)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x; // (b·Hkv + kvh)·blocks + block
  if (g >= p.groups) { return; }
  let t = lid.x;
  let j0 = (g % p.blocks) * BQ; // the block's first key row: where the lockstep walk starts
  let j = j0 + t;
  if (j >= p.T) { return; }
  let D4 = p.D / 4u;
  let kvh = (g / p.blocks) % p.Hkv;
  let b = g / (p.blocks * p.Hkv);
  let group = p.Hq / p.Hkv;
  let ko = ((b * p.T + j) * p.Hkv + kvh) * D4;
  var accK: array<vec4f, D4_MAX>; // this key row's dk and dv (their first D / 4; zero-initialised)
  var accV: array<vec4f, D4_MAX>;
  if (attention_mask[b * p.T + j] != 0) {
    for (var r = 0u; r < group; r++) {
      let h = kvh * group + r;
      for (var i = j0; i < p.T; i++) {
        let li = lse[(b * p.Hq + h) * p.T + i];
        if (i < j || !(li > p.neg_inf)) { continue; }
        let qo = ((b * p.T + i) * p.Hq + h) * D4;
        let s = score_and_dp(qo, ko, D4);
        let pij = exp(p.scale * s.x - li);
        let gij = p.scale * pij * (s.y - delta[(b * p.Hq + h) * p.T + i]);
        for (var d = 0u; d < D4; d++) {
          accK[d] = fma(vec4f(gij), q4[qo + d], accK[d]);
          accV[d] = fma(vec4f(pij), dout4[qo + d], accV[d]);
        }
      }
    }
  }
  for (var d = 0u; d < D4; d++) {
    dk4[ko + d] = accK[d];
    dv4[ko + d] = accV[d];
  }
}
