// Fused attention backward for GPUs in GEMM-shaped tiles (FlashAttention-2's structure), query side (full
// sequences, Tq = Tk = T). The maths are attention_wg_backward_dq.wgsl's (its header):
//   delta_i = dout_i·out_i,  p_ij = exp(scale·q_i·k_j − lse_i),  g_ij = scale·p_ij·(dout_i·v_j − delta_i),
//   dq_i = Σ_j g_ij·k_j   (key j visible iff j <= i and attention_mask[b, j] != 0; lse_i = -inf: dq_i = 0).
// A workgroup of 8 × 16 invocations owns a block of BR = 64 query rows of one (b, h) and a DC = 64-wide chunk of
// dq's columns (common/attention_tile.wgsl's layout). It first forms delta for its rows (over the whole D; chunk
// 0 saves it for attention_tile_backward_dkdv.wgsl), then walks the key tiles of BC = 32 that can hold a key
// visible to the block (j0 <= its last row):
//   1. S = Q·Kᵀ and dP = dO·Vᵀ (64 × 32 each) as two GEMMs over d sharing one slice loop (score_pair: per d an
//      invocation reads 4 vec4s for 32 FMAs), each invocation holding rows 4ty .. + 3 × keys 4tx .. + 3;
//   2. P and G in registers (lse and delta of the 4 rows are known up front: no row-owner phase), G to workgroup
//      memory as [row][key / 4] (consecutive invocations store consecutive vec4s; readers broadcast), the tile's
//      K rows of the chunk as [key][d / 4];
//   3. dq_chunk += G·K_chunk: 8 vec4 FMAs per key from 3 vec4 loads (acc_cols4), 8 vec4 accumulators.
// A head_dim over 64 takes ceil(D / 64) chunk workgroups per block, each recomputing S and dP over the whole D.
// Blocks run last-first: the last block of a head walks the most keys, so the causal triangle's long rows
// start early and the grid's tail is short. Deterministic: no atomics, every sum in a fixed order (delta's
// partials over d ≡ tx mod 8 summed in tx order, identical in every chunk). Workgroup memory: 29,696 bytes
// (slices 13,312, G 8,192, K chunk 8,192) of common/attention_tile.wgsl's 32 KiB array, whatever D is.

//#include "common/attention_backward_dq.wgsl"
//#include "common/attention_tile_backward.wgsl"

// tl offsets (vec4s): score_pair's slices take [0, GS); G and the K chunk lie past them, so a tile's slice
// staging never waits for the previous tile's accumulation.
const GS: u32 = 2u * ROW_SLICE + 2u * COL_SLICE; // [row][key / 4]: the tile's g (before the loop: delta partials)
const KC: u32 = GS + ROW_TILE;                   // [key][d / 4]: the tile's K rows, the chunk's columns

/** g of one row's 4 keys: scale·p·(dP − delta); 0 where the key is not visible (ok false) or lse = -inf. */
fn grad_row(s: vec4f, dp: vec4f, l: f32, dl: f32, ok: vec4<bool>) -> vec4f {
  let pr = exp(p.scale * s - l);
  return select(vec4f(0.0), p.scale * pr * (dp - dl), ok & vec4<bool>(l > p.neg_inf));
}

/** Σ_d dout·out over d ≡ tx (mod 8) of query row i (0 past T). */
fn delta_part(qo: u32, i: u32, tx: u32) -> f32 {
  var s = 0.0;
  if (i < p.T) {
    for (var d = tx; d < p.D; d += 8u) { s = fma(dout[qo + d], out[qo + d], s); }
  }
  return s;
}

/** The 8 partials of row n (tl[GS + 2n], tl[GS + 2n + 1]) summed in tx order. */
fn delta_sum(n: u32) -> f32 {
  let a = tl[GS + 2u * n];
  let c = tl[GS + 2u * n + 1u];
  return ((((((a.x + a.y) + a.z) + a.w) + c.x) + c.y) + c.z) + c.w;
}

@compute @workgroup_size(8, 16)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= p.groups) { return; }
  let tx = lid.x;
  let ty = lid.y;
  let t = ty * 8u + tx;
  let T = p.T;
  let D = p.D;
  let chunk = g % p.chunks;
  let blk = p.blocks - 1u - (g / p.chunks) % p.blocks; // last block first (header)
  let h = (g / (p.chunks * p.blocks)) % p.Hq;
  let b = g / (p.chunks * p.blocks * p.Hq);
  let kvh = h / (p.Hq / p.Hkv);
  let i0 = blk * BR;
  let last = min(i0 + BR, T) - 1u; // the block's last query row
  let qLd = p.Hq * D; // between consecutive query rows
  let kLd = p.Hkv * D; // between consecutive key rows
  let qBase = (b * T * p.Hq + h) * D;
  let kBase = (b * T * p.Hkv + kvh) * D;
  let lrow = (b * p.Hq + h) * T; // lse / delta of query 0
  let d0 = chunk * DC;
  let ib = i0 + 4u * ty; // the invocation's rows: ib .. ib + 3

  // delta of the block's rows: row 4ty + n's partial over d ≡ tx (mod 8) at tl[GS + 2(4ty + n) + tx / 4][tx % 4].
  let n0 = 4u * ty;
  tl[GS + 2u * n0 + tx / 4u][tx % 4u] = delta_part(qBase + ib * qLd, ib, tx);
  tl[GS + 2u * (n0 + 1u) + tx / 4u][tx % 4u] = delta_part(qBase + (ib + 1u) * qLd, ib + 1u, tx);
  tl[GS + 2u * (n0 + 2u) + tx / 4u][tx % 4u] = delta_part(qBase + (ib + 2u) * qLd, ib + 2u, tx);
  tl[GS + 2u * (n0 + 3u) + tx / 4u][tx % 4u] = delta_part(qBase + (ib + 3u) * qLd, ib + 3u, tx);
  workgroupBarrier();
  let dl = vec4f(delta_sum(n0), delta_sum(n0 + 1u), delta_sum(n0 + 2u), delta_sum(n0 + 3u));
  var L = vec4f(p.neg_inf); // lse of the 4 rows; -inf past T (their g is 0)
  for (var n = 0u; n < 4u; n++) {
    if (ib + n < T) {
      L[n] = lse[lrow + ib + n];
      if (chunk == 0u && tx == 0u) { delta[lrow + ib + n] = dl[n]; }
    }
  }
  // The reads above finish before any invocation passes score_pair's barriers, after which G overwrites them.

  var o = acc_zero();
  for (var j0 = 0u; j0 <= last; j0 += BC) {
    let sp = score_pair(t, tx, ty, SRC_Q, SRC_DOUT, qBase, qLd, i0, T, SRC_K, SRC_V, kBase, kLd, j0, T, D);
    var seen = vec4<bool>(false); // keys 4tx + u of the tile: present and not masked
    for (var u = 0u; u < 4u; u++) {
      let j = j0 + 4u * tx + u;
      seen[u] = j < T && attention_mask[b * T + j] != 0;
    }
    let jv = vec4u(j0 + 4u * tx) + vec4u(0u, 1u, 2u, 3u);
    tl[GS + n0 * 8u + tx] = grad_row(sp.s.r0, sp.dp.r0, L.x, dl.x, seen & (jv <= vec4u(ib)));
    tl[GS + (n0 + 1u) * 8u + tx] = grad_row(sp.s.r1, sp.dp.r1, L.y, dl.y, seen & (jv <= vec4u(ib + 1u)));
    tl[GS + (n0 + 2u) * 8u + tx] = grad_row(sp.s.r2, sp.dp.r2, L.z, dl.z, seen & (jv <= vec4u(ib + 2u)));
    tl[GS + (n0 + 3u) * 8u + tx] = grad_row(sp.s.r3, sp.dp.r3, L.w, dl.w, seen & (jv <= vec4u(ib + 3u)));
    stage_chunk(t, KC, SRC_K, kBase, kLd, j0, T, d0, D);
    workgroupBarrier();
    for (var c = 0u; c < BC / 4u; c++) {
      let w0 = tl[GS + n0 * 8u + c];
      let w1 = tl[GS + (n0 + 1u) * 8u + c];
      let w2 = tl[GS + (n0 + 2u) * 8u + c];
      let w3 = tl[GS + (n0 + 3u) * 8u + c];
      o = acc_cols4(w0, w1, w2, w3, KC + 4u * c * (DC / 4u), tx, o);
    }
    // No barrier: the next tile writes G and the K chunk only after score_pair's barriers.
  }

  let oa = array<vec4f, 8>(o.a0, o.a1, o.a2, o.a3, o.a4, o.a5, o.a6, o.a7);
  for (var n = 0u; n < 4u; n++) {
    let i = ib + n;
    if (i >= T) { break; }
    for (var half = 0u; half < 2u; half++) {
      let d = d0 + 32u * half + 4u * tx;
      let val = oa[2u * n + half];
      for (var u = 0u; u < 4u; u++) {
        if (d + u < D) { dq[qBase + i * qLd + d + u] = val[u]; }
      }
    }
  }
}
