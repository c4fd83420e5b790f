// First pass of the embedding backward: links tokens that share an id into chains, so that the
// scatter-add (embedding_backward.wgsl) can sum each id's rows in token order without float atomics
// (WGSL has none) and deterministically. links[n] = index of the next token with the same (clamped)
// id, or N at the end of a chain; bit 31 marks the chain's first token (its leader).
// One invocation per token scans the ids: O(N²) integer compares, cheap for N ≤ a few thousand rows.

override WG: u32 = 256;

const LEADER: u32 = 0x80000000u;

struct Params { N: u32, V: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> ids: array<i32>;          // (N)
@group(0) @binding(1) var<storage, read_write> links: array<u32>;  // (N)
@group(0) @binding(2) var<uniform> p: Params;

fn id_at(n: u32) -> i32 {
  return clamp(ids[n], 0, i32(p.V) - 1);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let n = gid.x + gid.y * nwg.x * WG;
  if (n >= p.N) { return; }
  let id = id_at(n);
  var leader = LEADER;
  for (var m = 0u; m < n; m++) {
    if (id_at(m) == id) { leader = 0u; break; }
  }
  var next = p.N;
  for (var m = n + 1u; m < p.N; m++) {
    if (id_at(m) == id) { next = m; break; }
  }
  links[n] = next | leader;
}
