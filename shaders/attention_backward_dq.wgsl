// Attention backward, pass 1 of 2 (full sequences: Tq = Tk = T). For one (b, h, i) query row:
//   datt_j = dout_i · v_j,   g_j = scale · att_j · (datt_j − Σ_j' att_j' · datt_j')   (softmax backward)
//   dq_i = Σ_j g_j · k_j
// g (the gradient of the raw q·k dot products) is written to a scratch shaped like att, which
// attention_backward_dkv.wgsl reads column-wise to form dk. Keys that are not visible have att = 0,
// so they get g = 0 and a fully masked query row gets dq = 0, with no special case.
// One workgroup per row, as in the forward; att/g bigger than the binding limit come in batch windows.

override WG: u32 = 128; // power of two (tree reduction)
override D: u32 = 64;   // head_dim

struct Params { T: u32, Hq: u32, Hkv: u32, scale: f32, b0: u32, att_base: u32, rows: u32, _p0: u32 }

@group(0) @binding(0) var<storage, read> dout: array<f32>;      // (B, T, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>;         // (B, T, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;         // (B, T, Hkv, D)
@group(0) @binding(3) var<storage, read> att: array<f32>;       // (B, Hq, T, T), window of batches
@group(0) @binding(4) var<storage, read_write> g: array<f32>;   // (B, Hq, T, T), same window
@group(0) @binding(5) var<storage, read_write> dq: array<f32>;  // (B, T, Hq, D)
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> dos: array<f32, D>;
var<workgroup> red: array<f32, WG>;

fn reduce_sum(x: f32, t: u32) -> f32 {
  red[t] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] += red[t + s]; }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // ((b - b0)·Hq + h)·T + i
  if (row >= p.rows) { return; }
  let t = lid.x;
  let i = row % p.T;
  let h = (row / p.T) % p.Hq;
  let b = p.b0 + row / (p.T * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let q_off = ((b * p.T + i) * p.Hq + h) * D;
  let att_off = p.att_base + row * p.T;

  for (var d = t; d < D; d += WG) { dos[d] = dout[q_off + d]; }
  workgroupBarrier();

  // Causal: only keys j <= i can have att > 0.
  var rowdot = 0.0;
  for (var j = t; j <= i; j += WG) {
    let kv_off = ((b * p.T + j) * p.Hkv + kvh) * D;
    var datt = 0.0;
    for (var d = 0u; d < D; d++) { datt = fma(dos[d], v[kv_off + d], datt); }
    g[att_off + j] = datt;
    rowdot = fma(att[att_off + j], datt, rowdot);
  }
  rowdot = reduce_sum(rowdot, t);
  for (var j = t; j <= i; j += WG) {
    g[att_off + j] = p.scale * att[att_off + j] * (g[att_off + j] - rowdot);
  }
  storageBarrier(); // dq below reads g values other invocations wrote

  for (var d = t; d < D; d += WG) {
    var acc = 0.0;
    for (var j = 0u; j <= i; j++) {
      acc = fma(g[att_off + j], k[((b * p.T + j) * p.Hkv + kvh) * D + d], acc);
    }
    dq[q_off + d] = acc;
  }
}
