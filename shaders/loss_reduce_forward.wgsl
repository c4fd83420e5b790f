// Every masked aggregation of one per-token loss in ONE launch (one workgroup), so the studio can show
// them side by side, plus the counts the backward's weights and the clip metrics need.
// LANES threads work on one sequence b (strided over t, then a tree over the lanes gives the row sums
// S_b = Σ_t L·M, n_b, clip counts); WG / LANES sequences go per pass. The launcher picks LANES from T so
// that a long completion is not summed by one thread (serial over T is ~1 ms at T = 8192 on an H200).
// Lane 0 of each group folds its rows into its own partials (the per-row nonlinear terms S_b / n_b need
// the whole row first); one tree over the workgroup ends it.
// out (16): [0..7] grpo, bnpo, dr_grpo, dapo, token-mean, seq-mean-token-sum, seq-mean-token-mean,
// seq-mean-token-sum-norm (src/oracle/loss_reduce.ts AGGREGATIONS order); [8] N = Σ M; [9] #(n_b > 0);
// [10] low-clipped, [11] high-clipped, [12] region (low or high), [13] δ binding. Counts are exact in
// f32 up to 2^24 tokens.

override WG: u32 = 256;
override LANES: u32 = 32; // power of two, <= WG

struct Params {
  B: u32,
  T: u32,
  max_completion_length: f32,
  num_items_in_batch: f32, // dapo's normalizer; 0 = N
  loss_scale_factor: f32,  // verl seq-mean-token-sum-norm's divisor (the launcher's default: T)
}

@group(0) @binding(0) var<storage, read> loss: array<f32>;        // (B, T)
@group(0) @binding(1) var<storage, read> mask: array<i32>;        // (B, T)
@group(0) @binding(2) var<storage, read> clip: array<u32>;        // (B, T)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (16)
@group(0) @binding(4) var<uniform> p: Params;

// Row sums per thread: 0 S, 1 n, 2 low, 3 high, 4 δ binding, 5 region (low or high).
const R = 6u;
var<workgroup> sh_row: array<array<f32, R>, WG>;
// Batch partials per thread: 0 Σ S_b, 1 Σ S_b / max(1, n_b), 2 Σ_{n_b>0} S_b / (n_b + 1e-8), 3 N,
// 4 #(n_b > 0), 5 low, 6 high, 7 δ binding, 8 region.
const K = 9u;
var<workgroup> sh: array<array<f32, K>, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
  let lane = lid % LANES;
  var acc: array<f32, K>;
  for (var b0 = 0u; b0 < p.B; b0 += WG / LANES) {
    let b = b0 + lid / LANES;
    var row = array<f32, R>(); // explicit zeros: some compilers hoist a loop-local var without an initializer
    if (b < p.B) {
      for (var t = lane; t < p.T; t += LANES) {
        let i = b * p.T + t;
        if (mask[i] != 0) {
          let f = clip[i];
          row[0] += loss[i];
          row[1] += 1.0;
          row[2] += f32(f & 1u);
          row[3] += f32((f >> 1u) & 1u);
          row[4] += f32((f >> 2u) & 1u);
          row[5] += select(0.0, 1.0, (f & 3u) != 0u);
        }
      }
    }
    sh_row[lid] = row;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride >>= 1u) {
      if (lane < stride) {
        for (var k = 0u; k < R; k++) { sh_row[lid][k] += sh_row[lid + stride][k]; }
      }
      workgroupBarrier();
    }
    if (lane == 0u && b < p.B) {
      let S = sh_row[lid][0];
      let nb = sh_row[lid][1];
      acc[0] += S;
      acc[1] += S / max(1.0, nb);
      if (nb > 0.0) {
        acc[2] += S / (nb + 1e-8);
        acc[4] += 1.0;
      }
      acc[3] += nb;
      acc[5] += sh_row[lid][2];
      acc[6] += sh_row[lid][3];
      acc[7] += sh_row[lid][4];
      acc[8] += sh_row[lid][5];
    }
    workgroupBarrier(); // sh_row is rewritten by the next pass
  }
  sh[lid] = acc;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      for (var k = 0u; k < K; k++) { sh[lid][k] += sh[lid + stride][k]; }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let r = sh[0];
    let N = r[3];
    let nz = max(1.0, r[4]);
    let items = select(max(1.0, N), p.num_items_in_batch, p.num_items_in_batch > 0.0);
    out[0] = r[1] / f32(p.B);
    out[1] = r[0] / max(1.0, N);
    out[2] = r[0] / (f32(p.B) * p.max_completion_length);
    out[3] = r[0] / items;
    out[4] = r[0] / max(1.0, N);
    out[5] = r[0] / nz;
    out[6] = r[2] / nz;
    out[7] = r[0] / p.loss_scale_factor;
    out[8] = N;
    out[9] = r[4];
    out[10] = r[5];
    out[11] = r[6];
    out[12] = r[8];
    out[13] = r[7];
  }
}
