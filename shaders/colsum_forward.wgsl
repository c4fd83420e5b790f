// Column sums of a (P, C) matrix into out (C): out = colsum (or out += colsum). The second pass of the
// deterministic weight-gradient reductions (layernorm/rmsnorm dweight, dbias), P row-chunk partials
// per column summed in a fixed order; also serves any bias gradient (sum of dout over rows).

override WG: u32 = 256;

struct Params { P: u32, C: u32, accumulate: u32, _p0: u32 }

@group(0) @binding(0) var<storage, read> inp: array<f32>;        // (P, C)
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // (C)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let j = gid.x + gid.y * nwg.x * WG;
  if (j >= p.C) { return; }
  var s = 0.0;
  for (var r = 0u; r < p.P; r++) { s += inp[r * p.C + j]; }
  out[j] = select(s, out[j] + s, p.accumulate != 0u);
}
