// Fused attention forward for GPUs in GEMM-shaped tiles (FlashAttention-2's structure): a workgroup of
// 8 × 16 invocations owns a block of BR = 64 query rows of one (b, h) and a 64-wide chunk of the output's
// D columns, and walks the keys that can be visible to the block in tiles of BC = 32:
//   1. S = scale · Q·Kᵀ (64 × 32) as a GEMM over d in SK-deep slices staged in workgroup memory (vec4s of 4
//      consecutive rows or keys, as common/matmul_tiles.wgsl stages a matmul), each invocation keeping a
//      4 × 4 register block: rows 4ty .. 4ty + 3, keys 4tx .. 4tx + 3; invisible keys get -inf;
//   2. the tile's scores go to workgroup memory, transposed ([key][row]), and the first 64 invocations, one
//      per row, fold them into the row's running max m and normaliser l (online softmax), turning them into
//      p = exp(s − m) and leaving the rescale factor exp(m_old − m); meanwhile every invocation stages the
//      tile's V rows of the chunk;
//   3. O = O·rescale + P·V, each invocation holding rows 4ty .. 4ty + 3 × chunk columns {4tx .., 32 + 4tx ..}
//      (8 vec4s indexed by constants only: an H100 spilled a register block indexed by loop counters).
// Each value read from workgroup memory feeds 4 FMAs (the tiled GEMM's ratio), where attention_wg_forward.wgsl
// (one workgroup per row, one key per thread, tree reductions) fed one and paid ~16 barriers per 64 keys:
// ~1.5% of an H100's FMA probe. A head_dim over 64 takes ceil(D / 64) chunk workgroups per block, each
// recomputing the scores over the whole D (the scores cost D per key, as the chunk's P·V does).
// The maths, masks, GQA, left-pad rows (out 0, lse -inf) and the saved lse are attention_wg_forward.wgsl's
// (its header); sums run in a fixed order (deterministic). Workgroup memory: 22.8 KiB, whatever D is.

//#include "common/attention_forward.wgsl"

const BR: u32 = 64u; // query rows per workgroup (4 per invocation row ty)
const BC: u32 = 32u; // keys per tile (4 per invocation column tx)
const SK: u32 = 16u; // d per staged slice of the score GEMM
const DC: u32 = 64u; // output columns per chunk (two vec4s per invocation column)
// Slices are [d][row]: a row of BR (BC) floats plus one vec4 of padding, so that the staging stores of
// consecutive invocations (consecutive d of one row) fall in different banks.
const QS_LD: u32 = BR / 4u + 1u;
const KS_LD: u32 = BC / 4u + 1u;

var<workgroup> Qs: array<vec4f, SK * QS_LD>; // [d][i / 4]: 4 consecutive query rows
var<workgroup> Ks: array<vec4f, SK * KS_LD>; // [d][j / 4]: 4 consecutive keys
var<workgroup> Ps: array<vec4f, BC * BR / 4u>; // [j][i / 4]: the tile's scores, then its p
var<workgroup> Vs: array<vec4f, BC * DC / 4u>; // [j][d / 4]: the tile's V rows, the chunk's columns
var<workgroup> rowf: array<f32, BR>; // per row: the tile's rescale factor, at the end 1 / l

@compute @workgroup_size(8, 16)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= p.groups) { return; }
  let tx = lid.x;
  let ty = lid.y;
  let t = ty * 8u + tx;
  let chunk = g % p.chunks;
  let blk = (g / p.chunks) % p.blocks;
  let h = (g / (p.chunks * p.blocks)) % p.Hq;
  let b = g / (p.chunks * p.blocks * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let D = p.D;
  let i0 = blk * BR;
  let off = p.Tk - p.Tq; // query i sits at absolute position off + i
  let jEnd = off + min(i0 + BR, p.Tq); // keys [0, jEnd) can be visible to some row of the block
  let qLd = p.Hq * D; // between consecutive query (output) rows
  let kLd = p.Hkv * D; // between consecutive key / value rows
  let qBase = (b * p.Tq * p.Hq + h) * D;
  let kBase = (b * p.TkvMax * p.Hkv + kvh) * D;
  let d0 = chunk * DC;

  var m = p.neg_inf; // row owner (t < BR): row t's running max and normaliser
  var l = 0.0;
  var o0 = vec4f(0.0); var o1 = vec4f(0.0); var o2 = vec4f(0.0); var o3 = vec4f(0.0); // rows 4ty + r, half 0 / 1:
  var o4 = vec4f(0.0); var o5 = vec4f(0.0); var o6 = vec4f(0.0); var o7 = vec4f(0.0); // o(2r + half)

  for (var j0 = 0u; j0 < jEnd; j0 += BC) {
    // 1. The score block: s_r (r = 0..3) holds row 4ty + r against keys 4tx .. 4tx + 3.
    var s0 = vec4f(0.0); var s1 = vec4f(0.0); var s2 = vec4f(0.0); var s3 = vec4f(0.0);
    for (var dk = 0u; dk < D; dk += SK) {
      for (var e = t; e < BR * SK; e += 128u) {
        let r = e / SK;
        let dd = e % SK;
        var x = 0.0;
        if (i0 + r < p.Tq && dk + dd < D) { x = q[qBase + (i0 + r) * qLd + dk + dd]; }
        Qs[dd * QS_LD + r / 4u][r % 4u] = x;
      }
      for (var e = t; e < BC * SK; e += 128u) {
        let c = e / SK;
        let dd = e % SK;
        var x = 0.0;
        if (j0 + c < jEnd && dk + dd < D) { x = k[kBase + (j0 + c) * kLd + dk + dd]; }
        Ks[dd * KS_LD + c / 4u][c % 4u] = x;
      }
      workgroupBarrier();
      for (var dd = 0u; dd < SK; dd++) {
        let a = Qs[dd * QS_LD + ty];
        let kv = Ks[dd * KS_LD + tx];
        s0 = fma(vec4f(a.x), kv, s0);
        s1 = fma(vec4f(a.y), kv, s1);
        s2 = fma(vec4f(a.z), kv, s2);
        s3 = fma(vec4f(a.w), kv, s3);
      }
      workgroupBarrier();
    }
    // Scaled, -inf where the key is not visible (past the row's position, masked, or past the tile's end).
    var seen = vec4<bool>(false);
    for (var u = 0u; u < 4u; u++) {
      let j = j0 + 4u * tx + u;
      seen[u] = j < jEnd && attention_mask[b * p.Tk + j] != 0;
    }
    let ib = off + i0 + 4u * ty; // absolute position of row 4ty
    let rows = array<vec4f, 4>(s0, s1, s2, s3);
    for (var u = 0u; u < 4u; u++) {
      let j = j0 + 4u * tx + u;
      var col = vec4f(p.neg_inf);
      for (var r = 0u; r < 4u; r++) {
        if (seen[u] && j <= ib + r) { col[r] = p.scale * rows[r][u]; }
      }
      Ps[(4u * tx + u) * (BR / 4u) + ty] = col;
    }
    workgroupBarrier();

    // 2. Online softmax by the row owners; V staging by everyone.
    if (t < BR) {
      let at = t / 4u;
      let lane = t % 4u;
      var mx = p.neg_inf;
      for (var c = 0u; c < BC; c++) { mx = max(mx, Ps[c * (BR / 4u) + at][lane]); }
      let mNew = max(m, mx);
      // Both are 0 while nothing is visible yet (mNew = -inf), so O and l stay 0 without a branch.
      let alpha = select(0.0, exp(m - mNew), m > p.neg_inf);
      var sum = 0.0;
      for (var c = 0u; c < BC; c++) {
        let s = Ps[c * (BR / 4u) + at][lane];
        let e = select(0.0, exp(s - mNew), s > p.neg_inf);
        Ps[c * (BR / 4u) + at][lane] = e;
        sum += e;
      }
      l = l * alpha + sum;
      m = mNew;
      rowf[t] = alpha;
    }
    for (var e = t; e < BC * DC / 4u; e += 128u) {
      let c = e / (DC / 4u);
      let d = d0 + 4u * (e % (DC / 4u));
      let vo = kBase + (j0 + c) * kLd + d;
      var x = vec4f(0.0);
      if (j0 + c < jEnd) {
        if (d + 3u < D) {
          x = vec4f(v[vo], v[vo + 1u], v[vo + 2u], v[vo + 3u]);
        } else {
          for (var u = 0u; u < 4u; u++) { if (d + u < D) { x[u] = v[vo + u]; } }
        }
      }
      Vs[e] = x;
    }
    workgroupBarrier();

    // 3. O = O·alpha + P·V over the tile's keys (keys past the end have p = 0 and V rows of 0).
    let al = vec4f(rowf[4u * ty], rowf[4u * ty + 1u], rowf[4u * ty + 2u], rowf[4u * ty + 3u]);
    o0 *= al.x; o1 *= al.x; o2 *= al.y; o3 *= al.y; o4 *= al.z; o5 *= al.z; o6 *= al.w; o7 *= al.w;
    for (var c = 0u; c < BC; c++) {
      let pv = Ps[c * (BR / 4u) + ty];
      let v0 = Vs[c * (DC / 4u) + tx];
      let v1 = Vs[c * (DC / 4u) + 8u + tx];
      o0 = fma(vec4f(pv.x), v0, o0);
      o1 = fma(vec4f(pv.x), v1, o1);
      o2 = fma(vec4f(pv.y), v0, o2);
      o3 = fma(vec4f(pv.y), v1, o3);
      o4 = fma(vec4f(pv.z), v0, o4);
      o5 = fma(vec4f(pv.z), v1, o5);
      o6 = fma(vec4f(pv.w), v0, o6);
      o7 = fma(vec4f(pv.w), v1, o7);
    }
    // No barrier here: the next tile touches Ps, Vs and rowf only after its slice loop's barriers.
  }

  workgroupBarrier(); // the last tile's rescale factors are read before rowf takes 1 / l
  if (t < BR) {
    let i = i0 + t;
    if (chunk == 0u && i < p.Tq) { lse[(b * p.Hq + h) * p.Tq + i] = select(p.neg_inf, m + log(l), l > 0.0); }
    rowf[t] = select(0.0, 1.0 / l, l > 0.0);
  }
  workgroupBarrier();
  let o = array<vec4f, 8>(o0, o1, o2, o3, o4, o5, o6, o7);
  for (var r = 0u; r < 4u; r++) {
    let i = i0 + 4u * ty + r;
    if (i >= p.Tq) { break; }
    let inv = rowf[4u * ty + r];
    for (var half = 0u; half < 2u; half++) {
      let d = d0 + 32u * half + 4u * tx;
      let val = o[2u * r + half] * inv;
      for (var u = 0u; u < 4u; u++) {
        if (d + u < D) { out[qBase + i * qLd + d + u] = val[u]; }
      }
    }
  }
}
