// Benchmark only: the adapter's f32 FMA throughput, the ceiling `npm run bench` reports GEMM and model
// rows against. Each thread runs CHAINS independent vec4 chains x ← fma(x, a, b) for ITERS steps (enough
// independent work to fill the pipelines; no memory traffic but one store per thread, which keeps the
// chains from being optimised away). FLOPs = threads · ITERS · CHAINS · 4 lanes · 2.

override WG: u32 = 256;
override ITERS: u32 = 1024;

struct Params { a: f32, b: f32, threads: u32, _p: u32 }

@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (threads)
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.threads) { return; }
  let s = f32(i % 1024u) * (1.0 / 1024.0);
  let a = vec4f(p.a);
  let b = vec4f(p.b);
  var x0 = vec4f(s, s + 0.125, s + 0.25, s + 0.375);
  var x1 = x0 + vec4f(0.5);
  var x2 = x0 - vec4f(0.5);
  var x3 = x0 * vec4f(2.0);
  for (var k = 0u; k < ITERS; k++) {
    x0 = fma(x0, a, b);
    x1 = fma(x1, a, b);
    x2 = fma(x2, a, b);
    x3 = fma(x3, a, b);
  }
  out[i] = dot(x0 + x1 + x2 + x3, vec4f(1.0));
}
