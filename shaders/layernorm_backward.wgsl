// LayerNorm backward (llm.c's layernorm_backward, split into two deterministic kernels, no atomics).
//   main:     one workgroup per row. norm = (x - mean) * rstd, dnorm = weight * dout,
//             dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))   (= or += dinp)
//   dweight:  one thread per (row chunk, column): partial sums over R rows of dout * norm and dout,
//             written as (P, C) partials; colsum_forward.wgsl then adds the P partials per column.
// The two entry points share bindings 0-3; binding 4-5 differ (each pipeline sees only its own).

override WG: u32 = 256; // main: threads per row, a power of two

struct Params { N: u32, C: u32, accumulate: u32, R: u32 }

@group(0) @binding(0) var<storage, read> dout: array<f32>;   // (N, C)
@group(0) @binding(1) var<storage, read> inp: array<f32>;    // (N, C)
@group(0) @binding(2) var<storage, read> mean: array<f32>;   // (N)
@group(0) @binding(3) var<storage, read> rstd: array<f32>;   // (N)
@group(0) @binding(4) var<storage, read> weight: array<f32>;           // (C)        main
@group(0) @binding(5) var<storage, read_write> dinp: array<f32>;       // (N, C)     main
@group(0) @binding(4) var<storage, read_write> dweight_part: array<f32>; // (P, C)   dweight
@group(0) @binding(5) var<storage, read_write> dbias_part: array<f32>;   // (P, C)   dweight
@group(0) @binding(6) var<uniform> p: Params;

//#include "common/reduce_vec2.wgsl"
//#include "common/norm_dweight.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.N) { return; }
  let C = p.C;
  let base = row * C;
  let m = mean[row];
  let r = rstd[row];

  var acc = vec2f(0.0);
  for (var i = t; i < C; i += WG) {
    let dnorm = weight[i] * dout[base + i];
    acc += vec2f(dnorm, dnorm * (inp[base + i] - m) * r);
  }
  let sums = reduce_sum2(t, acc) / f32(C);

  for (var i = t; i < C; i += WG) {
    let norm = (inp[base + i] - m) * r;
    let g = r * (weight[i] * dout[base + i] - sums.x - norm * sums.y);
    dinp[base + i] = select(g, dinp[base + i] + g, p.accumulate != 0u);
  }
}

@compute @workgroup_size(WG)
fn dweight(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  let C = p.C;
  let ch = norm_chunk(i, p.N, C, p.R);
  if (!ch.valid) { return; }
  let j = ch.j;
  var sw = 0.0;
  var sb = 0.0;
  for (var n = ch.n0; n < ch.n1; n++) {
    let d = dout[n * C + j];
    sw += d * ((inp[n * C + j] - mean[n]) * rstd[n]);
    sb += d;
  }
  dweight_part[i] = sw;
  dbias_part[i] = sb;
}
