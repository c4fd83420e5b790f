// Attention backward, pass 2 of 2 (full sequences: Tq = Tk = T). For one (b, key j, kv head) row,
// summing over the Hq / Hkv query heads that share the kv head (GQA) and the queries i >= j that can
// see key j (causal), in a fixed order (deterministic, no atomics):
//   dv_j = Σ_h Σ_i att[h, i, j] · dout[i, h],     dk_j = Σ_h Σ_i g[h, i, j] · q[i, h]
// with g from attention_backward_dq.wgsl (already scaled). A masked key (attention_mask 0) has att = 0
// and g = 0 in every row, so it gets dk = dv = 0 without reading them.
// One workgroup per (b, j, kv head), one invocation per channel d.

override WG: u32 = 64;
override D: u32 = 64; // head_dim

struct Params { T: u32, Hq: u32, Hkv: u32, b0: u32, att_base: u32, rows: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> dout: array<f32>;            // (B, T, Hq, D)
@group(0) @binding(1) var<storage, read> q: array<f32>;               // (B, T, Hq, D)
@group(0) @binding(2) var<storage, read> att: array<f32>;             // (B, Hq, T, T), window of batches
@group(0) @binding(3) var<storage, read> g: array<f32>;               // (B, Hq, T, T), same window
@group(0) @binding(4) var<storage, read> attention_mask: array<i32>;  // (B, T)
@group(0) @binding(5) var<storage, read_write> dk: array<f32>;        // (B, T, Hkv, D)
@group(0) @binding(6) var<storage, read_write> dv: array<f32>;        // (B, T, Hkv, D)
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.x + wid.y * nwg.x; // ((b - b0)·T + j)·Hkv + kvh
  if (row >= p.rows) { return; }
  let kvh = row % p.Hkv;
  let j = (row / p.Hkv) % p.T;
  let bl = row / (p.Hkv * p.T);
  let b = p.b0 + bl;
  let group = p.Hq / p.Hkv;
  let visible = attention_mask[b * p.T + j] != 0;
  let kv_off = ((b * p.T + j) * p.Hkv + kvh) * D;
  for (var d = lid.x; d < D; d += WG) {
    var acc_k = 0.0;
    var acc_v = 0.0;
    if (visible) {
      for (var h = kvh * group; h < (kvh + 1u) * group; h++) {
        let col = p.att_base + (bl * p.Hq + h) * p.T * p.T + j; // att[b, h, i, j] at col + i·T
        for (var i = j; i < p.T; i++) {
          let q_off = ((b * p.T + i) * p.Hq + h) * D + d;
          acc_v = fma(att[col + i * p.T], dout[q_off], acc_v);
          acc_k = fma(g[col + i * p.T], q[q_off], acc_k);
        }
      }
    }
    dk[kv_off + d] = acc_k;
    dv[kv_off + d] = acc_v;
  }
}
