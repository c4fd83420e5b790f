// A test fixture, not a model kernel: x *= factor in place, the simplest dispatch whose result depends on the
// order of the dispatches and on each one's params. The GPU layer's tests (tests/gpu: recorder, streaming, submit
// groups, errors, binding checks) dispatch it by hand. (The LoRA scalings it served are the GEMM's epilogue now:
// src/kernels/matmul.ts scale.)

override WG: u32 = 256;

struct Params { n: u32, factor: f32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read_write> x: array<f32>;  // (n)
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  x[i] = x[i] * p.factor;
}
