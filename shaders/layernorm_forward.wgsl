// LayerNorm forward (GPT-2): out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps),
// one workgroup per row. mean and rstd are saved for the backward pass.
// The variance uses the corrected two-pass algorithm (Chan, Golub & LeVeque): a first pass gives a
// provisional mean m0, the second sums d = x - m0 and d^2 together; mean = m0 + sum(d)/C and
// var = sum(d^2)/C - (sum(d)/C)^2. This removes most of m0's rounding error (the tree sum's), which
// matters for rows whose variance is tiny next to their mean: rstd multiplies the mean's error.

override WG: u32 = 256; // threads per row, a power of two

struct Params { N: u32, C: u32, eps: f32, _p0: u32 }

@group(0) @binding(0) var<storage, read> inp: array<f32>;          // (N, C)
@group(0) @binding(1) var<storage, read> weight: array<f32>;       // (C)
@group(0) @binding(2) var<storage, read> bias: array<f32>;         // (C)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;    // (N, C)
@group(0) @binding(4) var<storage, read_write> mean: array<f32>;   // (N)
@group(0) @binding(5) var<storage, read_write> rstd: array<f32>;   // (N)
@group(0) @binding(6) var<uniform> p: Params;

//#include "common/reduce_vec2.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.N) { return; }
  let C = p.C;
  let base = row * C;
  let fc = f32(C);

  var s = 0.0;
  for (var i = t; i < C; i += WG) { s += inp[base + i]; }
  let m0 = reduce_sum2(t, vec2f(s, 0.0)).x / fc;

  var acc = vec2f(0.0);
  for (var i = t; i < C; i += WG) {
    let d = inp[base + i] - m0;
    acc += vec2f(d, d * d);
  }
  let sums = reduce_sum2(t, acc);
  let dm = sums.x / fc;
  let m = m0 + dm;
  let r = inverseSqrt(max(sums.y / fc - dm * dm, 0.0) + p.eps);

  for (var i = t; i < C; i += WG) {
    out[base + i] = (inp[base + i] - m) * r * weight[i] + bias[i];
  }
  if (t == 0u) {
    mean[row] = m;
    rstd[row] = r;
  }
}
