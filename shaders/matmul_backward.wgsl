// Bias gradient of a matmul: dbias[n] (+)= Σ_m dout[m, n]. The other two gradients (dinp, dweight)
// are GEMMs and reuse matmul_forward.wgsl with transposed operands.
// One invocation per column walks the rows in order (deterministic, no atomics); consecutive
// invocations read consecutive columns of a row, so the walk is coalesced. A dout bigger than the
// binding limit comes in row windows; every window after the first accumulates.

override WG: u32 = 256;

struct Params { rows: u32, N: u32, base: u32, accumulate: u32 }

@group(0) @binding(0) var<storage, read> dout: array<f32>;         // (M, N), a window of rows
@group(0) @binding(1) var<storage, read_write> dbias: array<f32>;  // (N)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let n = gid.x + gid.y * nwg.x * WG;
  if (n >= p.N) { return; }
  var s = 0.0;
  for (var m = 0u; m < p.rows; m++) {
    s += dout[p.base + m * p.N + n];
  }
  if (p.accumulate != 0u) { s += dbias[n]; }
  dbias[n] = s;
}
