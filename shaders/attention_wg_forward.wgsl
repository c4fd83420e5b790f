// Fused attention forward for GPUs, flash-attention style: one workgroup per (b, h, i) query row walks
// the visible keys in tiles of WG, one key per thread, keeping a running max m, normaliser l and output
// accumulator (online softmax), so no (B, Hq, Tq, Tk) probability buffer exists. It saves
// lse = m + log(l) per row for the backward (attention_wg_backward_dq / _dkdv, or the row kernels',
// recompute the probabilities from it). B·Hq·Tq workgroups keep a GPU's cores busy; software adapters,
// which pay for every barrier with a coroutine switch, run attention_forward.wgsl (one thread per row)
// instead (src/kernels/attention.ts picks; on an H100 this one ran the SmolLM2-shaped forward 2×, and
// forward + backward 4–6× faster: bench/results-h100-attention-ab.json).
// Causal + attention mask + GQA: query i of a (B, Tq) block sits at absolute position a = Tk - Tq + i
// (Tq = Tk: full forward; Tq = 1: one KV-cache decode step); key j is visible iff j <= a and
// attention_mask[b, j] = 1; query head h reads kv head h / (Hq / Hkv). A query with no visible key
// (a left-pad row) outputs 0 and lse = -inf (HF leaves those rows implementation-defined).
// Deterministic: every sum runs in a fixed order (tree reduction, then keys in order).

override WG: u32 = 64;  // keys per tile = threads per workgroup; power of two (tree reductions)

//#include "common/attention_forward.wgsl"

var<workgroup> qrow: array<f32, DH>;
var<workgroup> acc: array<f32, DH>; // unnormalised output; element d belongs to thread d % WG
var<workgroup> pt: array<f32, WG>;  // the tile's exp(s_j - m)
//#include "common/reduce.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // (b·Hq + h)·Tq + i (blocks = Tq)
  if (row >= p.groups) { return; }
  let t = lid.x;
  let D = p.D;
  let i = row % p.Tq;
  let h = (row / p.Tq) % p.Hq;
  let b = row / (p.Tq * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let last = p.Tk - p.Tq + i; // the query's absolute position: keys past it are never visible
  let qo = ((b * p.Tq + i) * p.Hq + h) * D;
  for (var d = t; d < D; d += WG) {
    qrow[d] = q[qo + d];
    acc[d] = 0.0;
  }
  workgroupBarrier();

  var m = p.neg_inf;
  var l = 0.0;
  for (var j0 = 0u; j0 <= last; j0 += WG) {
    let j = j0 + t;
    var s = p.neg_inf;
    if (j <= last && attention_mask[b * p.Tk + j] != 0) {
      let ko = ((b * p.TkvMax + j) * p.Hkv + kvh) * D;
      var dot = 0.0;
      for (var d = 0u; d < D; d++) { dot = fma(qrow[d], k[ko + d], dot); }
      s = p.scale * dot;
    }
    let mNew = max(m, reduce_max(t, s));
    // Both are 0 while nothing is visible yet (mNew = -inf), so acc and l stay 0 without a branch.
    let e = select(0.0, exp(s - mNew), s > p.neg_inf);
    let alpha = select(0.0, exp(m - mNew), m > p.neg_inf);
    pt[t] = e;
    l = l * alpha + reduce_sum(t, e);
    m = mNew;
    let n = min(WG, last + 1u - j0);
    for (var d = t; d < D; d += WG) {
      var a = acc[d] * alpha;
      for (var u = 0u; u < n; u++) { a = fma(pt[u], v[((b * p.TkvMax + j0 + u) * p.Hkv + kvh) * D + d], a); }
      acc[d] = a;
    }
    workgroupBarrier(); // pt is rewritten by the next tile
  }
  let inv = select(0.0, 1.0 / l, l > 0.0);
  for (var d = t; d < D; d += WG) { out[qo + d] = acc[d] * inv; }
  if (t == 0u) { lse[row] = select(p.neg_inf, m + log(l), l > 0.0); }
}
