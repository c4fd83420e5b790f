// Attention forward, the masked softmax between its two batched GEMMs (llm.c's layout):
//   scores = q·kᵀ (matmul_forward.wgsl, batched over (b, h), written into att)
//   att    = softmax(scale · scores) over the visible keys      <- this shader, in place on att
//   out    = att·v (matmul_forward.wgsl, batched)
// Causal + attention mask + GQA: query i of a (B, Tq) block sits at absolute position a = Tk - Tq + i
// (Tq = Tk: full forward; Tq = 1: one KV-cache decode step); key j is visible iff j <= a and
// attention_mask[b, j] = 1. Only visible scores are read (the scores GEMM skips tiles above the
// diagonal, leaving stale values there); every entry of the row is written, 0 where not visible.
// A query with no visible key (a left-pad row) gets an all-zero row, so its output is 0, and
// lse = -inf (HF leaves those rows implementation-defined; only attention_mask = 1 rows matter).
// f32 softmax with max subtraction; lse (optional) = max + log(sum) of the scaled scores.
// One workgroup per (b, h, i) row; att bigger than the binding limit comes in batch windows.

override WG: u32 = 128; // power of two (tree reductions)

struct Params {
  Tq: u32, Tk: u32, Hq: u32, scale: f32,
  b0: u32, att_base: u32, rows: u32, has_lse: u32,
  neg_inf: f32, _p0: u32, _p1: u32, _p2: u32, // neg_inf = -inf (WGSL constants cannot be infinite)
}

@group(0) @binding(0) var<storage, read> attention_mask: array<i32>;  // (B, Tk)
@group(0) @binding(1) var<storage, read_write> att: array<f32>;       // (B, Hq, Tq, Tk), window of batches
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;       // (B, Hq, Tq) or a dummy
@group(0) @binding(3) var<uniform> p: Params;

//#include "common/reduce.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // ((b - b0)·Hq + h)·Tq + i
  if (row >= p.rows) { return; }
  let t = lid.x;
  let i = row % p.Tq;
  let h = (row / p.Tq) % p.Hq;
  let b = p.b0 + row / (p.Tq * p.Hq);
  let last = p.Tk - p.Tq + i; // the query's absolute position: keys past it are never visible
  let off = p.att_base + row * p.Tk;

  var mx = p.neg_inf;
  for (var j = t; j <= last; j += WG) {
    if (attention_mask[b * p.Tk + j] != 0) { mx = max(mx, p.scale * att[off + j]); }
  }
  mx = reduce_max(t, mx);
  let any_visible = mx > p.neg_inf;

  var sum = 0.0;
  for (var j = t; j < p.Tk; j += WG) {
    var e = 0.0;
    if (any_visible && j <= last && attention_mask[b * p.Tk + j] != 0) { e = exp(p.scale * att[off + j] - mx); }
    att[off + j] = e;
    sum += e;
  }
  sum = reduce_sum(t, sum);
  let inv = select(0.0, 1.0 / sum, sum > 0.0);
  for (var j = t; j < p.Tk; j += WG) { att[off + j] *= inv; }
  if (p.has_lse != 0u && t == 0u) {
    lse[(b * p.Hq + h) * p.Tq + i] = select(p.neg_inf, mx + log(sum), any_visible);
  }
}
