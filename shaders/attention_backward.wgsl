// Attention backward, the softmax backward between its batched GEMMs (full sequences, Tq = Tk = T):
//   dP = dout·vᵀ (matmul_forward.wgsl, batched over (b, h), written into the g scratch)
//   g  = scale · att ⊙ (dP − Σ_j att_j·dP_j)        <- this shader, in place on g: ∂L/∂(q·k)
//   dq = g·k, dk = Σ_heads gᵀ·q, dv = Σ_heads attᵀ·dout (matmul_forward.wgsl, batched; GQA heads
//   sharing a kv head accumulate one after another: deterministic, no atomics)
// Keys a query cannot see have att = 0, so masked keys and fully masked (left-pad) query rows get
// g = 0 with no special case. Entries past the diagonal hold stale values (the dP GEMM skips those
// tiles) and are written 0 without being used.
// One workgroup per (b, h, i) row; att and g bigger than the binding limit come in batch windows.

override WG: u32 = 128; // power of two (tree reduction)

struct Params { T: u32, scale: f32, att_base: u32, rows: u32 }

@group(0) @binding(0) var<storage, read> att: array<f32>;      // (B, Hq, T, T), window of batches
@group(0) @binding(1) var<storage, read_write> g: array<f32>;  // (B, Hq, T, T), same window: dP in, g out
@group(0) @binding(2) var<uniform> p: Params;

//#include "common/reduce.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // ((b - b0)·Hq + h)·T + i
  if (row >= p.rows) { return; }
  let t = lid.x;
  let i = row % p.T;
  let off = p.att_base + row * p.T;

  var rowdot = 0.0;
  for (var j = t; j <= i; j += WG) { rowdot = fma(att[off + j], g[off + j], rowdot); }
  rowdot = reduce_sum(t, rowdot);

  for (var j = t; j < p.T; j += WG) {
    var x = 0.0;
    if (j <= i) { x = p.scale * att[off + j] * (g[off + j] - rowdot); }
    g[off + j] = x;
  }
}
