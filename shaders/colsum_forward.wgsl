// Column sums of a (P, C) matrix into out (C): out = scale·colsum (+ out) (+ add). The second pass of the
// deterministic reductions (layernorm/rmsnorm dweight, attention's split dk / dv, the GEMM's split-K slices),
// P partials per column summed in a fixed order. scale and add finish a split GEMM as its own epilogue would
// (common/matmul.wgsl store_c: the product scaled, C's previous value, then the residual stream).

override WG: u32 = 256;

struct Params { P: u32, C: u32, accumulate: u32, has_add: u32, scale: f32 }

@group(0) @binding(0) var<storage, read> inp: array<f32>;        // (P, C)
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // (C)
@group(0) @binding(2) var<storage, read> add: array<f32>;        // (C) or a dummy
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let j = gid.x + gid.y * nwg.x * WG;
  if (j >= p.C) { return; }
  var s = 0.0;
  for (var r = 0u; r < p.P; r++) { s += inp[r * p.C + j]; }
  var v = s * p.scale;
  if (p.accumulate != 0u) { v += out[j]; }
  if (p.has_add != 0u) { v += add[j]; }
  out[j] = v;
}
