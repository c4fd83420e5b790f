// GEMM C = scale·(op(A) · op(B)) (+ bias) (+ C) (+ R) for SwiftShader, the same products, operands and parameters as
// matmul_forward.wgsl (common/matmul.wgsl). SwiftShader runs the invocations of a workgroup as coroutines
// and pays a switch of every one at each barrier, and its subgroup shuffles are slow too: the tiled kernel's
// barriers and the subgroup kernel's shuffles cost more than its loads save (src/kernels/matmul.ts). Here
// nothing is shared: each invocation reads its own TM rows of A and 4 columns of B straight from memory
// (TM + 4 loads per 4·TM FMAs; the CPU's caches stage them) and keeps the TM × 4 block in registers.
// Rows past M and columns past N are clamped to the last one for the loads (their results are not stored).
//
// Accumulation is one fma per k in increasing k, as in matmul_forward.wgsl: the same error bound.

//#include "common/matmul.wgsl"

override TM: u32 = 4;       // rows of C per invocation (1, 2 or 4)
override WG_N: u32 = 16;    // invocations per workgroup along N (4 columns each)
override WG_M: u32 = 4;     // invocations per workgroup along M (TM rows each)

@compute @workgroup_size(WG_N, WG_M)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let m0 = (wid.y * WG_M + lid.y) * TM;
  let n0 = (wid.x * WG_N + lid.x) * 4u;
  if (m0 >= p.M || n0 >= p.N) { return; } // no barriers: idle invocations may leave
  let a0 = p.a_base;
  let b0 = p.b_base;
  let c0 = p.c_base;
  let r = vec4u(min(m0, p.M - 1u), min(m0 + 1u, p.M - 1u), min(m0 + 2u, p.M - 1u), min(m0 + 3u, p.M - 1u));
  let c = vec4u(n0, min(n0 + 1u, p.N - 1u), min(n0 + 2u, p.N - 1u), min(n0 + 3u, p.N - 1u));
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  for (var k = 0u; k < p.K; k++) {
    let bv = vec4f(b_elem(b0, k, c.x), b_elem(b0, k, c.y), b_elem(b0, k, c.z), b_elem(b0, k, c.w));
    acc0 = fma(vec4f(a_elem(a0, r.x, k)), bv, acc0);
    if (TM > 1u) { acc1 = fma(vec4f(a_elem(a0, r.y, k)), bv, acc1); }
    if (TM > 2u) {
      acc2 = fma(vec4f(a_elem(a0, r.z, k)), bv, acc2);
      acc3 = fma(vec4f(a_elem(a0, r.w, k)), bv, acc3);
    }
  }
  let rows = array<vec4f, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < TM; i++) {
    let m = m0 + i;
    if (m >= p.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + j;
      if (n >= p.N) { break; }
      store_c(c0 + m * p.ldc + n, n, rows[i][j]);
    }
  }
}
