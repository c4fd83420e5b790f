// Fused attention forward for GPUs in GEMM-shaped tiles (FlashAttention-2's structure): a workgroup of
// 8 × 16 invocations owns a block of BR = 64 query rows of one (b, h) and a 64-wide chunk of the output's
// D columns, and walks the keys that can be visible to the block in tiles of BC = 32:
//   1. S = scale · Q·Kᵀ (64 × 32) as a GEMM over d in SK-deep slices staged in workgroup memory (vec4s of 4
//      consecutive rows or keys: common/attention_tile.wgsl, shared with the backward), each invocation keeping
//      a 4 × 4 register block: rows 4ty .. 4ty + 3, keys 4tx .. 4tx + 3; invisible keys get -inf;
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
// (its header); sums run in a fixed order (deterministic). Workgroup memory: 1,456 vec4s (22.75 KiB) of
// common/attention_tile.wgsl's 32 KiB array, whatever D is.

//#include "common/attention_forward.wgsl"
//#include "common/attention_tile.wgsl"

/** common/attention_tile.wgsl's operands: 0 = q, 1 = k, 2 = v. */
fn tile_elem(src: u32, i: u32) -> f32 {
  switch src {
    case 0u: { return q[i]; }
    case 1u: { return k[i]; }
    default: { return v[i]; }
  }
}

// tl offsets (vec4s): the Q and K slices, the tile's scores then p as [key][row / 4] (so that the row owners read
// consecutive words), the tile's V rows of the chunk as [key][d / 4], and per row the rescale factor (at the
// end 1 / l) as [row / 4].
const QS: u32 = 0u;
const KS: u32 = ROW_SLICE;
const PT: u32 = ROW_SLICE + COL_SLICE;
const VC: u32 = PT + BC * BR / 4u;
const RF: u32 = VC + CHUNK_TILE;

/** Query row i's output columns d .. d + 3 (those below D), x scaled by 1 / l. */
fn store_out(o: u32, d: u32, x: vec4f) {
  for (var u = 0u; u < 4u; u++) {
    if (d + u < p.D) { out[o + d + u] = x[u]; }
  }
}

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
  var o = acc_zero();

  for (var j0 = 0u; j0 < jEnd; j0 += BC) {
    // 1. The score block: rows 4ty + n against keys 4tx .. 4tx + 3.
    var s = block_zero();
    for (var dk = 0u; dk < D; dk += SK) {
      stage_slice(t, QS, ROW_LD, BR, 0u, qBase, qLd, i0, p.Tq, dk, D);
      stage_slice(t, KS, COL_LD, BC, 1u, kBase, kLd, j0, jEnd, dk, D);
      workgroupBarrier();
      for (var dd = 0u; dd < SK; dd++) { s = block_fma(tl[QS + dd * ROW_LD + ty], tl[KS + dd * COL_LD + tx], s); }
      workgroupBarrier();
    }
    // Scaled, -inf where the key is not visible (past the row's position, masked, or past the tile's end).
    var seen = vec4<bool>(false);
    for (var u = 0u; u < 4u; u++) {
      let j = j0 + 4u * tx + u;
      seen[u] = j < jEnd && attention_mask[b * p.Tk + j] != 0;
    }
    let ib = off + i0 + 4u * ty; // absolute position of row 4ty
    for (var u = 0u; u < 4u; u++) {
      let j = j0 + 4u * tx + u;
      // Key j against rows 4ty .. 4ty + 3 (the block's registers read by constant fields, not an array).
      let ok = vec4<bool>(seen[u]) & (vec4u(j) <= vec4u(ib, ib + 1u, ib + 2u, ib + 3u));
      tl[PT + (4u * tx + u) * (BR / 4u) + ty] = select(vec4f(p.neg_inf), p.scale * vec4f(s.r0[u], s.r1[u], s.r2[u], s.r3[u]), ok);
    }
    workgroupBarrier();

    // 2. Online softmax by the row owners; V staging by everyone.
    if (t < BR) {
      let at = PT + t / 4u;
      let lane = t % 4u;
      var mx = p.neg_inf;
      for (var c = 0u; c < BC; c++) { mx = max(mx, tl[at + c * (BR / 4u)][lane]); }
      let mNew = max(m, mx);
      // Both are 0 while nothing is visible yet (mNew = -inf), so O and l stay 0 without a branch.
      let alpha = select(0.0, exp(m - mNew), m > p.neg_inf);
      var sum = 0.0;
      for (var c = 0u; c < BC; c++) {
        let sc = tl[at + c * (BR / 4u)][lane];
        let e = select(0.0, exp(sc - mNew), sc > p.neg_inf);
        tl[at + c * (BR / 4u)][lane] = e;
        sum += e;
      }
      l = l * alpha + sum;
      m = mNew;
      tl[RF + t / 4u][lane] = alpha;
    }
    stage_chunk(t, VC, 2u, kBase, kLd, j0, jEnd, d0, D);
    workgroupBarrier();

    // 3. O = O·alpha + P·V over the tile's keys (keys past the end have p = 0 and V rows of 0).
    let al = tl[RF + ty];
    o = Acc8(o.a0 * al.x, o.a1 * al.x, o.a2 * al.y, o.a3 * al.y, o.a4 * al.z, o.a5 * al.z, o.a6 * al.w, o.a7 * al.w);
    for (var c = 0u; c < BC; c++) {
      o = acc_fma(tl[PT + c * (BR / 4u) + ty], tl[VC + c * (DC / 4u) + tx], tl[VC + c * (DC / 4u) + 8u + tx], o);
    }
    // No barrier here: the next tile touches P, V and the factors only after its slice loop's barriers.
  }

  workgroupBarrier(); // the last tile's rescale factors are read before they become 1 / l
  if (t < BR) {
    let i = i0 + t;
    if (chunk == 0u && i < p.Tq) { lse[(b * p.Hq + h) * p.Tq + i] = select(p.neg_inf, m + log(l), l > 0.0); }
    tl[RF + t / 4u][t % 4u] = select(0.0, 1.0 / l, l > 0.0);
  }
  workgroupBarrier();
  let inv = tl[RF + ty];
  let i = i0 + 4u * ty;
  let c0 = d0 + 4u * tx;
  let c1 = c0 + 32u;
  if (i < p.Tq) { store_out(qBase + i * qLd, c0, o.a0 * inv.x); store_out(qBase + i * qLd, c1, o.a1 * inv.x); }
  if (i + 1u < p.Tq) { store_out(qBase + (i + 1u) * qLd, c0, o.a2 * inv.y); store_out(qBase + (i + 1u) * qLd, c1, o.a3 * inv.y); }
  if (i + 2u < p.Tq) { store_out(qBase + (i + 2u) * qLd, c0, o.a4 * inv.z); store_out(qBase + (i + 2u) * qLd, c1, o.a5 * inv.z); }
  if (i + 3u < p.Tq) { store_out(qBase + (i + 3u) * qLd, c0, o.a6 * inv.w); store_out(qBase + (i + 3u) * qLd, c1, o.a7 * inv.w); }
}
