// RMSNorm backward, out = weight * x * rstd, split into two deterministic kernels (no atomics).
//   main:     one workgroup per row. dnorm = weight * dout,
//             dinp = rstd * (dnorm - x * rstd^2 * mean(dnorm * x))   (= or += dinp)
//   dweight:  one thread per (row chunk, column): partial sums over R rows of dout * x * rstd,
//             written as (P, C) partials; colsum_forward.wgsl then adds the P partials per column.
// The two entry points share bindings 0-2; the rest differ (each pipeline sees only its own), and the
// params uniform follows each entry point's last binding (main @5, dweight @4).

override WG: u32 = 256; // main: threads per row, a power of two

struct Params { N: u32, C: u32, accumulate: u32, R: u32 }

@group(0) @binding(0) var<storage, read> dout: array<f32>;   // (N, C)
@group(0) @binding(1) var<storage, read> inp: array<f32>;    // (N, C)
@group(0) @binding(2) var<storage, read> rstd: array<f32>;   // (N)
@group(0) @binding(3) var<storage, read> weight: array<f32>;             // (C)      main
@group(0) @binding(4) var<storage, read_write> dinp: array<f32>;         // (N, C)   main
@group(0) @binding(3) var<storage, read_write> dweight_part: array<f32>; // (P, C)   dweight
@group(0) @binding(5) var<uniform> p: Params;                            //          main
@group(0) @binding(4) var<uniform> pw: Params;                           //          dweight

//#include "common/reduce.wgsl"
//#include "common/norm_dweight.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.N) { return; }
  let C = p.C;
  let base = row * C;
  let r = rstd[row];

  var s = 0.0;
  for (var i = t; i < C; i += WG) {
    s += weight[i] * dout[base + i] * inp[base + i];
  }
  let k = r * r * reduce_sum(t, s) / f32(C);

  for (var i = t; i < C; i += WG) {
    let g = r * (weight[i] * dout[base + i] - inp[base + i] * k);
    dinp[base + i] = select(g, dinp[base + i] + g, p.accumulate != 0u);
  }
}

@compute @workgroup_size(WG)
fn dweight(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  let C = pw.C;
  let ch = norm_chunk(i, pw.N, C, pw.R);
  if (!ch.valid) { return; }
  let j = ch.j;
  var s = 0.0;
  for (var n = ch.n0; n < ch.n1; n++) {
    s += dout[n * C + j] * (inp[n * C + j] * rstd[n]);
  }
  dweight_part[i] = s;
}
