// Benchmark only: f16 FMA throughput where the adapter has `shader-f16` (the ceiling an f16 GEMM with f32
// accumulation would be held to). The same chains as bench_peak_fma, in vec4<f16>; the store is f32.
enable f16;

override WG: u32 = 256;
override ITERS: u32 = 1024;

struct Params { a: f32, b: f32, threads: u32, _p: u32 }

@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (threads)
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.threads) { return; }
  let s = f16(f32(i % 1024u) * (1.0 / 1024.0));
  let a = vec4<f16>(f16(p.a));
  let b = vec4<f16>(f16(p.b));
  var x0 = vec4<f16>(s, s + 0.125h, s + 0.25h, s + 0.375h);
  var x1 = x0 + vec4<f16>(0.5h);
  var x2 = x0 - vec4<f16>(0.5h);
  var x3 = x0 * vec4<f16>(2.0h);
  for (var k = 0u; k < ITERS; k++) {
    x0 = fma(x0, a, b);
    x1 = fma(x1, a, b);
    x2 = fma(x2, a, b);
    x3 = fma(x3, a, b);
  }
  out[i] = f32(dot(x0 + x1 + x2 + x3, vec4<f16>(1.0h)));
}
