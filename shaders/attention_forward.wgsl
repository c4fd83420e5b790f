// Fused attention forward, flash-attention style: a workgroup takes BQ consecutive query rows in (b, h, i)
// order; each thread owns one row and walks its visible keys in steps of BK, keeping a running max m, normaliser
// l and output accumulator (online softmax: one rescale per step), so no (B, Hq, Tq, Tk) probability
// buffer exists. It saves lse = m + log(l) per row for the backward (attention_backward_dq / _dkdv
// recompute the probabilities from it). The threads of a workgroup read the same key at the same time
// (neighbouring query rows of a head; in a decode step, Tq = 1, a sample's heads, whose GQA groups share k / v
// rows), so k / v rows are shared through the cache instead of barrier-synchronised tiles: no barriers at all,
// which software adapters (one coroutine per invocation) pay dearly for. Rows in order, no workgroup is idle for
// want of rows of its own head: a decode step's B·Hq rows take B·Hq / BQ workgroups, not B·Hq.
// Causal + attention mask + GQA: query i of a (B, Tq) block sits at absolute position a = Tk - Tq + i
// (Tq = Tk: full forward; Tq = 1: one KV-cache decode step); key j is visible iff j <= a and
// attention_mask[b, j] = 1; query head h reads kv head h / (Hq / Hkv). A query with no visible key
// (a left-pad row) outputs 0 and lse = -inf (HF leaves those rows implementation-defined).
// Deterministic: every sum runs in key order. D is a multiple of 4: rows of q, k, v, out and the accumulator are
// read as vec4s (common/attention_rows.wgsl).

override BQ: u32 = 32; // query rows per workgroup = threads
const BK = 16u; // keys per online-softmax step (one rescale of the accumulator per step)
//#include "common/attention_forward.wgsl"
//#include "common/attention_rows.wgsl"

@group(0) @binding(4) var<storage, read_write> out4: array<vec4f>; // (B, Tq, Hq, D / 4)

@compute @workgroup_size(BQ)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let t = lid.x;
  let row = (wid.x + wid.y * nwg.x) * BQ + t; // (b·Hq + h)·Tq + i
  if (row >= p.rows) { return; } // no barriers below: idle threads may leave
  let D4 = p.D / 4u;
  let i = row % p.Tq;
  let h = (row / p.Tq) % p.Hq;
  let b = row / (p.Tq * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let last = p.Tk - p.Tq + i; // the query's absolute position: keys past it are never visible
  let qo = ((b * p.Tq + i) * p.Hq + h) * D4;
  var acc: array<vec4f, D4_MAX>; // this row's unnormalised output (its first D / 4; zero-initialised)
  var pt: array<f32, BK>;         // this row's scores, then exp(s - m), of the current step

  var m = p.neg_inf;
  var l = 0.0;
  for (var j0 = 0u; j0 <= last; j0 += BK) {
    let n = min(BK, last + 1u - j0);
    var smax = p.neg_inf;
    for (var u = 0u; u < n; u++) {
      var s = p.neg_inf;
      if (attention_mask[b * p.Tk + j0 + u] != 0) {
        let ko = ((b * p.TkvMax + j0 + u) * p.Hkv + kvh) * D4;
        var dot = 0.0;
        for (var d = 0u; d < D4; d++) { dot = fma4(q4[qo + d], k4[ko + d], dot); }
        s = p.scale * dot;
      }
      pt[u] = s;
      smax = max(smax, s);
    }
    if (smax == p.neg_inf) { continue; } // nothing visible in this step: m, l, acc unchanged
    let mNew = max(m, smax);
    let alpha = select(0.0, exp(m - mNew), m > p.neg_inf);
    var sum = 0.0;
    for (var u = 0u; u < n; u++) {
      let s = pt[u];
      let e = select(0.0, exp(s - mNew), s > p.neg_inf);
      pt[u] = e;
      sum += e;
    }
    l = l * alpha + sum;
    m = mNew;
    let vo = ((b * p.TkvMax + j0) * p.Hkv + kvh) * D4;
    for (var d = 0u; d < D4; d++) {
      var a = acc[d] * alpha;
      for (var u = 0u; u < n; u++) { a = fma(vec4f(pt[u]), v4[vo + u * p.Hkv * D4 + d], a); }
      acc[d] = a;
    }
  }
  let inv = select(0.0, 1.0 / l, l > 0.0);
  for (var d = 0u; d < D4; d++) { out4[qo + d] = acc[d] * inv; }
  lse[row] = select(p.neg_inf, m + log(l), l > 0.0);
}
