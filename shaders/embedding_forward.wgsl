// Token (+ learned position) embedding lookup: out[n, c] = wte[ids[n], c] (+ wpe[position_ids[n], c]).
// Ids outside [0, V) (positions outside [0, P)) are clamped so a bad id never reads out of bounds; the
// caller validates ids and reports them. A wte bigger than the binding limit comes in row windows
// [row0, row0 + rows): each dispatch writes only the tokens whose id falls in its window.
// WTE_BF16: wte holds packed bfloat16 (common/bf16.wgsl; a frozen model's checkpoint dtype), widened exactly to
// f32; wte_base then counts bf16 elements.

//#include "common/bf16.wgsl"

override WG: u32 = 256;
override WTE_BF16: bool = false;

struct Params { N: u32, C: u32, V: u32, P: u32, row0: u32, rows: u32, wte_base: u32, has_wpe: u32 }

@group(0) @binding(0) var<storage, read> ids: array<i32>;          // (N)
@group(0) @binding(1) var<storage, read> wte: array<u32>;          // (V, C), window of rows: f32 bits or bf16 pairs
@group(0) @binding(2) var<storage, read> position_ids: array<i32>; // (N) or a dummy
@group(0) @binding(3) var<storage, read> wpe: array<f32>;          // (P, C) or a dummy
@group(0) @binding(4) var<storage, read_write> out: array<f32>;    // (N, C)
@group(0) @binding(5) var<uniform> p: Params;

fn wte_at(i: u32) -> f32 {
  if (WTE_BF16) { return bf16_widen(wte[i >> 1u], i); }
  return bitcast<f32>(wte[i]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.N * p.C) { return; }
  let n = i / p.C;
  let c = i % p.C;
  let id = u32(clamp(ids[n], 0, i32(p.V) - 1));
  if (id < p.row0 || id >= p.row0 + p.rows) { return; }
  var v = wte_at(p.wte_base + (id - p.row0) * p.C + c);
  if (p.has_wpe != 0u) {
    let pos = u32(clamp(position_ids[n], 0, i32(p.P) - 1));
    v += wpe[pos * p.C + c];
  }
  out[i] = v;
}
