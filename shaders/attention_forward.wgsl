// Causal scaled-dot-product attention with an attention mask and grouped-query heads (GQA).
// Query i of a (B, Tq) block sits at absolute position a = Tk - Tq + i (Tq = Tk: full forward; Tq = 1:
// one KV-cache decode step over Tk valid rows of a (B, TkvMax, Hkv, D) cache). Key j is visible iff
// j <= a and attention_mask[b, j] = 1; query head h reads kv head h / (Hq / Hkv).
// Softmax in f32 with max subtraction. A query with no visible key (a left-pad row) outputs 0 and its
// probability row is 0 (HF leaves those rows implementation-defined; only attention_mask = 1 rows
// are meaningful). The probabilities are saved in att for the backward; lse (optional) gets
// max + log(sum) of the scaled scores (-inf for a row with no visible key).
//
// One workgroup per (b, h, i) row: scores go straight into the row of att (used as scratch), then
// max, exp and sum are workgroup reductions, then each invocation sums a column d of Σ_j att_j·v_j.
// att bigger than the binding limit comes in batch windows [b0, b0 + rows / (Hq·Tq)).

override WG: u32 = 128; // power of two (tree reductions)
override D: u32 = 64;   // head_dim

struct Params {
  Tq: u32, Tk: u32, TkvMax: u32, Hq: u32,
  Hkv: u32, scale: f32, b0: u32, att_base: u32,
  rows: u32, has_lse: u32, neg_inf: f32, _p0: u32, // neg_inf: -inf (WGSL constants cannot be infinite)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;               // (B, Tq, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>;               // (B, TkvMax, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;               // (B, TkvMax, Hkv, D)
@group(0) @binding(3) var<storage, read> attention_mask: array<i32>;  // (B, Tk)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;       // (B, Tq, Hq, D)
@group(0) @binding(5) var<storage, read_write> att: array<f32>;       // (B, Hq, Tq, Tk), window of batches
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;       // (B, Hq, Tq) or a dummy
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> qs: array<f32, D>;
var<workgroup> red: array<f32, WG>;

fn reduce_max(x: f32, t: u32) -> f32 {
  red[t] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] = max(red[t], red[t + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn reduce_sum(x: f32, t: u32) -> f32 {
  red[t] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] += red[t + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // ((b - b0)·Hq + h)·Tq + i
  if (row >= p.rows) { return; }
  let t = lid.x;
  let i = row % p.Tq;
  let h = (row / p.Tq) % p.Hq;
  let bl = row / (p.Tq * p.Hq);
  let b = p.b0 + bl;
  let kvh = h / (p.Hq / p.Hkv);
  let a = p.Tk - p.Tq + i; // absolute position of the query
  let last = min(a, p.Tk - 1u); // keys past `last` are never visible
  let q_off = ((b * p.Tq + i) * p.Hq + h) * D;
  let att_off = p.att_base + row * p.Tk;

  for (var d = t; d < D; d += WG) { qs[d] = q[q_off + d]; }
  workgroupBarrier();

  var mx = p.neg_inf; // -inf
  for (var j = t; j < p.Tk; j += WG) {
    var s = p.neg_inf;
    if (j <= last && attention_mask[b * p.Tk + j] != 0) {
      let k_off = ((b * p.TkvMax + j) * p.Hkv + kvh) * D;
      var dot = 0.0;
      for (var d = 0u; d < D; d++) { dot = fma(qs[d], k[k_off + d], dot); }
      s = p.scale * dot;
    }
    att[att_off + j] = s;
    mx = max(mx, s);
  }
  mx = reduce_max(mx, t);
  let any_visible = mx > p.neg_inf;

  var sum = 0.0;
  for (var j = t; j < p.Tk; j += WG) {
    let s = att[att_off + j];
    let e = select(0.0, exp(s - mx), any_visible && s > p.neg_inf);
    att[att_off + j] = e;
    sum += e;
  }
  sum = reduce_sum(sum, t);
  let inv = select(0.0, 1.0 / sum, sum > 0.0);
  for (var j = t; j < p.Tk; j += WG) { att[att_off + j] *= inv; }
  if (p.has_lse != 0u && t == 0u) {
    lse[(b * p.Hq + h) * p.Tq + i] = select(p.neg_inf, mx + log(sum), any_visible);
  }
  storageBarrier(); // the weighted sum below reads probabilities other invocations wrote

  for (var d = t; d < D; d += WG) {
    var acc = 0.0;
    for (var j = 0u; j <= last; j++) {
      acc = fma(att[att_off + j], v[((b * p.TkvMax + j) * p.Hkv + kvh) * D + d], acc);
    }
    out[q_off + d] = acc;
  }
}
