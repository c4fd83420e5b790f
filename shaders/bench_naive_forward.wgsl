// Benchmark only: the textbook log-prob gather the fused kernel replaces, as PyTorch eager runs it:
// PASS 0 row max, PASS 1 log-sum-exp, PASS 2 materialise log_softmax (N, V), PASS 3 gather the target
// and the entropy −Σ exp(ls)·ls from the materialised rows. Five reads/writes of (N, V) instead of one,
// and an (N, V) temporary. One file, one pipeline per PASS (override), the same bindings for all.

override WG: u32 = 256;
override PASS: u32 = 0u;

struct Params { row_start: u32, rows: u32, V: u32, elem_base: u32, temperature: f32 }

@group(0) @binding(0) var<storage, read> logits: array<f32>;            // (rows, V) window
@group(0) @binding(1) var<storage, read> ids: array<i32>;               // (N)
@group(0) @binding(2) var<storage, read_write> row_max: array<f32>;     // (N)
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;         // (N)
@group(0) @binding(4) var<storage, read_write> log_softmax: array<f32>; // (rows, V) window, same layout as logits
@group(0) @binding(5) var<storage, read_write> logp: array<f32>;        // (N)
@group(0) @binding(6) var<storage, read_write> entropy: array<f32>;     // (N)
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> sh: array<f32, WG>;

fn reduce(v: f32, lid: u32, is_max: bool) -> f32 {
  sh[lid] = v;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) { sh[lid] = select(sh[lid] + sh[lid + stride], max(sh[lid], sh[lid + stride]), is_max); }
    workgroupBarrier();
  }
  return sh[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; }
  let n = p.row_start + r;
  let base = p.elem_base + r * p.V;
  if (PASS == 0u) {
    var m = -3.0e38;
    for (var i = lid; i < p.V; i += WG) { m = max(m, logits[base + i] / p.temperature); }
    let mm = reduce(m, lid, true);
    if (lid == 0u) { row_max[n] = mm; }
  } else if (PASS == 1u) {
    let m = row_max[n];
    var s = 0.0;
    for (var i = lid; i < p.V; i += WG) { s += exp(logits[base + i] / p.temperature - m); }
    let ss = reduce(s, lid, false);
    if (lid == 0u) { lse[n] = m + log(ss); }
  } else if (PASS == 2u) {
    let l = lse[n];
    for (var i = lid; i < p.V; i += WG) { log_softmax[base + i] = logits[base + i] / p.temperature - l; }
  } else {
    var h = 0.0;
    for (var i = lid; i < p.V; i += WG) {
      let ls = log_softmax[base + i];
      h -= exp(ls) * ls;
    }
    let hh = reduce(h, lid, false);
    if (lid == 0u) {
      logp[n] = log_softmax[base + u32(ids[n])];
      entropy[n] = hh;
    }
  }
}
