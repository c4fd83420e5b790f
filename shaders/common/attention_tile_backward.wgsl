// What the 'tile' attention backward kernels (attention_tile_backward_dq / _dkdv.wgsl) add to the pass's common
// bindings (common/attention_backward_dq.wgsl or _dkdv.wgsl, included first: its Params carry chunks, splits and
// n) and common/attention_tile.wgsl: the operand numbers of `tile_elem` over q, k, v and dout. A workgroup
// g < groups takes ((b·heads + head)·blocks + block)·chunks + chunk (dkdv: times splits, + split): a block of BR
// rows (query rows in dq, key rows in dkdv; `blocks` = ceil(T / BR) per head) and a DC-wide chunk of the head's
// D columns of the gradient it writes (chunks = ceil(D / DC)).

//#include "common/attention_tile.wgsl"

// Operand numbers for tile_elem (the kernels map them to their bindings).
const SRC_Q: u32 = 0u;
const SRC_K: u32 = 1u;
const SRC_V: u32 = 2u;
const SRC_DOUT: u32 = 3u;

fn tile_elem(src: u32, i: u32) -> f32 {
  switch src {
    case 0u: { return q[i]; }
    case 1u: { return k[i]; }
    case 2u: { return v[i]; }
    default: { return dout[i]; }
  }
}
