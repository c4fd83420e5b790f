// GEMM C = scale·(op(A) · op(B)) (+ bias) (+ C) (+ R) for lavapipe, the same products, operands and parameters as
// matmul_forward.wgsl (common/matmul.wgsl); src/kernels/matmul.ts picks it on software adapters whose
// subgroup size is fixed (SG), but SwiftShader, which runs it slower than the tiled kernel (gemmKernels).
//
// Why a second kernel: a CPU adapter runs a subgroup as one SIMD register (lane = invocation), so a load
// whose address differs per lane is a gather, and a uniform load inside a loop is done lane by lane; only a
// register shuffle hands every lane one value cheaply. On lavapipe the FMAs alone run at the peak probe's
// rate and the loads are what costs, so the plan is the fewest loads per FMA. There is no workgroup memory
// (matmul_forward.wgsl's tiles cost two vec4 gathers from it per 16 FMAs, plus staging and barriers): the
// WG invocations of a workgroup own TM rows each (row m0 + i·WG + invocation, i < TM) and share the same TN
// columns; per k, each invocation loads its TM values of A, each lane of a subgroup loads B for one of SG
// columns (TN / SG loads), and subgroupShuffle hands every lane all TN values of B: TM + TN / SG loads per
// TM · TN FMAs (4 × 16 on lavapipe: 6 loads per 64 FMAs). Rows past M and columns past N are clamped to
// the last one (their results are not stored), so every lane stays active for the shuffles and no load
// leaves its operand. Measured on lavapipe (bench/gemm.ts, kernel column): 4–10× the tiled kernel.
//
// Accumulation is one fma per k in increasing k, as in matmul_forward.wgsl: the same error bound.

enable subgroups;

//#include "common/matmul.wgsl"

override TM: u32 = 4;  // rows of C per invocation (≤ MAX_TM; fewer when M fills fewer subgroups)
override TN: u32 = 16; // columns of C per workgroup, a multiple of SG (≤ MAX_TN)
override WG: u32 = 64; // invocations per workgroup, a multiple of SG
override SG: u32 = 8;  // the adapter's subgroup size (subgroupMinSize = subgroupMaxSize)

const MAX_TM: u32 = 8u;
const MAX_TN: u32 = 32u;
const MAX_Q: u32 = 8u; // MAX_TN / the smallest SG the launcher accepts (4)

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u, @builtin(subgroup_invocation_id) lane: u32) {
  let mb = wid.y * (WG * TM) + lid;
  let n0 = wid.x * TN;
  let a0 = p.a_base;
  let b0 = p.b_base;
  let c0 = p.c_base;
  var rows: array<u32, MAX_TM>;
  for (var i = 0u; i < TM; i++) { rows[i] = min(mb + i * WG, p.M - 1u); }
  var cols: array<u32, MAX_Q>; // the column this lane loads B for, in each group of SG columns
  for (var q = 0u; q < TN / SG; q++) { cols[q] = min(n0 + q * SG + lane, p.N - 1u); }

  var acc: array<array<f32, MAX_TN>, MAX_TM>;
  for (var k = 0u; k < p.K; k++) {
    var av: array<f32, MAX_TM>;
    for (var i = 0u; i < TM; i++) { av[i] = a_elem(a0, rows[i], k); }
    var bl: array<f32, MAX_Q>;
    for (var q = 0u; q < TN / SG; q++) { bl[q] = b_elem(b0, k, cols[q]); }
    for (var j = 0u; j < TN; j++) {
      let bv = subgroupShuffle(bl[j / SG], j % SG); // B (k, n0 + j), from the lane that loaded it
      for (var i = 0u; i < TM; i++) { acc[i][j] = fma(av[i], bv, acc[i][j]); }
    }
  }

  for (var i = 0u; i < TM; i++) {
    let m = mb + i * WG;
    if (m >= p.M) { break; }
    for (var j = 0u; j < TN; j++) {
      let n = n0 + j;
      if (n >= p.N) { break; }
      store_c(c0 + m * p.ldc + n, n, acc[i][j]);
    }
  }
}
