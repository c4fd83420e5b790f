// Embedding scatter-add: dtable[id, c] += Σ_{n : ids[n] = id} dout[n, c], used for dwte (ids) and for
// GPT-2's dwpe (position_ids). One invocation per (chain leader, channel) walks its chain of tokens
// (embedding_backward_links.wgsl) in token order: every row of dtable has exactly one writer, the sum
// order is fixed (deterministic), and no float atomics are needed. The launcher clears dtable first
// unless the gradient accumulates (tied wte: the lm_head's gradient is already there).
// A table bigger than the binding limit comes in row windows [row0, row0 + rows).

override WG: u32 = 256;

const LEADER: u32 = 0x80000000u;

struct Params { N: u32, C: u32, V: u32, row0: u32, rows: u32, base: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> ids: array<i32>;           // (N)
@group(0) @binding(1) var<storage, read> links: array<u32>;         // (N)
@group(0) @binding(2) var<storage, read> dout: array<f32>;          // (N, C)
@group(0) @binding(3) var<storage, read_write> dtable: array<f32>;  // (V, C), window of rows
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.N * p.C) { return; }
  let n = i / p.C;
  let c = i % p.C;
  let link = links[n];
  if ((link & LEADER) == 0u) { return; }
  let id = u32(clamp(ids[n], 0, i32(p.V) - 1));
  if (id < p.row0 || id >= p.row0 + p.rows) { return; }
  var s = 0.0;
  var m = n;
  var next = link & ~LEADER;
  loop {
    s += dout[m * p.C + c];
    if (next >= p.N) { break; }
    m = next;
    next = links[m] & ~LEADER;
  }
  let j = p.base + (id - p.row0) * p.C + c;
  dtable[j] += s;
}
