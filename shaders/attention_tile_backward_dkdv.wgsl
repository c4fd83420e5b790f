// Fused attention backward for GPUs in GEMM-shaped tiles (FlashAttention-2's structure), key side (full
// sequences, Tq = Tk = T). The maths are attention_wg_backward_dkdv.wgsl's (its header):
//   dv_j = Σ_h Σ_i p_ij·dout_i,   dk_j = Σ_h Σ_i g_ij·q_i,   g_ij = scale·p_ij·(dout_i·v_j − delta_i)
// over the query heads h sharing kv head kvh (GQA) and the queries i >= j that see key j (attention_mask[b, j]
// != 0; rows with lse = -inf contribute 0), with lse from the forward and delta from
// attention_tile_backward_dq.wgsl. A workgroup of 8 × 16 invocations owns a block of BR = 64 key rows of one
// (b, kvh) and a DC = 64-wide chunk of dk's and dv's columns (common/attention_tile.wgsl's layout); for each
// query head of the group in order, it walks the queries from the block's first key on in tiles of BC = 32:
//   1. Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (64 × 32 each) as two GEMMs over d sharing one slice loop (score_pair), each
//      invocation holding keys 4ty .. + 3 × queries 4tx .. + 3;
//   2. Pᵀ and Gᵀ in registers (lse and delta of its 4 queries read from global memory), both to workgroup memory
//      as [key][query / 4] (consecutive invocations store consecutive vec4s; readers broadcast), the tile's Q
//      and dO rows of the chunk as [query][d / 4];
//   3. dv_chunk += Pᵀ·dO_chunk, dk_chunk += Gᵀ·Q_chunk: 16 vec4 FMAs per query from 6 vec4 loads, 16 vec4
//      accumulators (acc_cols4 twice).
// A head_dim over 64 takes ceil(D / 64) chunk workgroups per block, each recomputing Sᵀ and dPᵀ over the whole D.
// Few kv heads leave few workgroups (Qwen2.5-0.5B, Hkv 2, 8 × 512: 128 on an H100's 132 SMs, one 4-warp
// workgroup each): the launcher then splits each group's query heads over `splits` workgroups (contiguous
// runs of heads), each writing its partial dk, dv to scratch (bound as dk, dv; split s at s·n), and
// colsum_forward.wgsl adds the partials in split order. Deterministic: no atomics; each key row's sums run over
// heads, then query tiles, then queries in order (and with splits, over the splits in order).
// Workgroup memory: common/attention_tile.wgsl's 32 KiB array, whatever D is: phase 2–3's P, G, Q and dO tiles
// (8 KiB each) alias phase 1's slices (13,312 bytes), hence a barrier after each tile's accumulation.

//#include "common/attention_backward_dkdv.wgsl"
//#include "common/attention_tile_backward.wgsl"

// tl offsets (vec4s) of phases 2–3 (phase 1's slices take [0, 832) under them).
const PS: u32 = 0u;                          // [key][query / 4]: the tile's p
const GS: u32 = ROW_TILE;                    // [key][query / 4]: the tile's g
const QC: u32 = 2u * ROW_TILE;               // [query][d / 4]: the tile's Q rows, the chunk's columns
const OC: u32 = 2u * ROW_TILE + CHUNK_TILE;  // [query][d / 4]: the tile's dO rows; ends at 2048

@compute @workgroup_size(8, 16)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= p.groups) { return; }
  let tx = lid.x;
  let ty = lid.y;
  let t = ty * 8u + tx;
  let T = p.T;
  let D = p.D;
  let split = g % p.splits;
  let chunk = (g / p.splits) % p.chunks;
  let blk = (g / (p.splits * p.chunks)) % p.blocks;
  let kvh = (g / (p.splits * p.chunks * p.blocks)) % p.Hkv;
  let b = g / (p.splits * p.chunks * p.blocks * p.Hkv);
  let group = p.Hq / p.Hkv;
  let hps = (group + p.splits - 1u) / p.splits; // query heads per split: this one takes [r0, r1)
  let r0 = min(group, split * hps);
  let r1 = min(group, r0 + hps);
  let j0 = blk * BR; // the block's first key
  let qLd = p.Hq * D; // between consecutive query rows
  let kLd = p.Hkv * D; // between consecutive key rows
  let kBase = (b * T * p.Hkv + kvh) * D;
  let d0 = chunk * DC;
  let n0 = 4u * ty;
  let jb = j0 + n0; // the invocation's keys: jb .. jb + 3
  var keyOk = vec4<bool>(false); // present and not masked
  for (var n = 0u; n < 4u; n++) { keyOk[n] = jb + n < T && attention_mask[b * T + jb + n] != 0; }

  var ak = acc_zero();
  var av = acc_zero();
  for (var r = r0; r < r1; r++) {
    let h = kvh * group + r;
    let qBase = (b * T * p.Hq + h) * D;
    let lrow = (b * p.Hq + h) * T; // lse / delta of query 0
    for (var i0 = j0; i0 < T; i0 += BC) {
      let sp = score_pair(t, tx, ty, SRC_K, SRC_V, kBase, kLd, j0, T, SRC_Q, SRC_DOUT, qBase, qLd, i0, T, D);
      var L = vec4f(p.neg_inf); // lse of queries 4tx + u of the tile (-inf past T: nothing visible)
      var dl = vec4f(0.0);
      for (var u = 0u; u < 4u; u++) {
        let i = i0 + 4u * tx + u;
        if (i < T) {
          L[u] = lse[lrow + i];
          dl[u] = delta[lrow + i];
        }
      }
      let iv = vec4u(i0 + 4u * tx) + vec4u(0u, 1u, 2u, 3u);
      let seen = L > vec4f(p.neg_inf);
      // Key n sees query u iff both are live and jb + n <= i.
      let ok0 = seen & (iv >= vec4u(jb)) & vec4<bool>(keyOk.x);
      let ok1 = seen & (iv >= vec4u(jb + 1u)) & vec4<bool>(keyOk.y);
      let ok2 = seen & (iv >= vec4u(jb + 2u)) & vec4<bool>(keyOk.z);
      let ok3 = seen & (iv >= vec4u(jb + 3u)) & vec4<bool>(keyOk.w);
      let p0 = select(vec4f(0.0), exp(p.scale * sp.s.r0 - L), ok0);
      let p1 = select(vec4f(0.0), exp(p.scale * sp.s.r1 - L), ok1);
      let p2 = select(vec4f(0.0), exp(p.scale * sp.s.r2 - L), ok2);
      let p3 = select(vec4f(0.0), exp(p.scale * sp.s.r3 - L), ok3);
      tl[PS + n0 * 8u + tx] = p0;
      tl[PS + (n0 + 1u) * 8u + tx] = p1;
      tl[PS + (n0 + 2u) * 8u + tx] = p2;
      tl[PS + (n0 + 3u) * 8u + tx] = p3;
      // p = 0 wherever not visible, and dP, delta are finite there: g is 0 too.
      tl[GS + n0 * 8u + tx] = p.scale * p0 * (sp.dp.r0 - dl);
      tl[GS + (n0 + 1u) * 8u + tx] = p.scale * p1 * (sp.dp.r1 - dl);
      tl[GS + (n0 + 2u) * 8u + tx] = p.scale * p2 * (sp.dp.r2 - dl);
      tl[GS + (n0 + 3u) * 8u + tx] = p.scale * p3 * (sp.dp.r3 - dl);
      stage_chunk(t, QC, SRC_Q, qBase, qLd, i0, T, d0, D);
      stage_chunk(t, OC, SRC_DOUT, qBase, qLd, i0, T, d0, D);
      workgroupBarrier();
      for (var c = 0u; c < BC / 4u; c++) {
        let at = 4u * c * (DC / 4u);
        av = acc_cols4(tl[PS + n0 * 8u + c], tl[PS + (n0 + 1u) * 8u + c], tl[PS + (n0 + 2u) * 8u + c], tl[PS + (n0 + 3u) * 8u + c], OC + at, tx, av);
        ak = acc_cols4(tl[GS + n0 * 8u + c], tl[GS + (n0 + 1u) * 8u + c], tl[GS + (n0 + 2u) * 8u + c], tl[GS + (n0 + 3u) * 8u + c], QC + at, tx, ak);
      }
      workgroupBarrier(); // the next tile's slices overwrite P and G
    }
  }

  let ob = split * p.n + kBase; // this split's partial (splits = 1: dk, dv themselves)
  let ka = array<vec4f, 8>(ak.a0, ak.a1, ak.a2, ak.a3, ak.a4, ak.a5, ak.a6, ak.a7);
  let va = array<vec4f, 8>(av.a0, av.a1, av.a2, av.a3, av.a4, av.a5, av.a6, av.a7);
  for (var n = 0u; n < 4u; n++) {
    let j = jb + n;
    if (j >= T) { break; }
    for (var half = 0u; half < 2u; half++) {
      let d = d0 + 32u * half + 4u * tx;
      let kx = ka[2u * n + half];
      let vx = va[2u * n + half];
      for (var u = 0u; u < 4u; u++) {
        if (d + u < D) {
          dk[ob + j * kLd + d + u] = kx[u];
          dv[ob + j * kLd + d + u] = vx[u];
        }
      }
    }
  }
}
