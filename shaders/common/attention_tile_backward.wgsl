// What the 'tile' attention backward kernels (attention_tile_backward_dq / _dkdv.wgsl) share beside
// common/attention_tile.wgsl: the uniform block and the forward inputs both read. Each kernel declares its
// other bindings (4 ..) and `tile_elem`. A workgroup g < groups takes ((b·heads + head)·blocks + block)·chunks
// + chunk (dkdv: times splits, + split): a block of BR rows (query rows in dq, key rows in dkdv; `blocks` =
// ceil(T / BR) per head) and a DC-wide chunk of the head's D columns of the gradient it writes (chunks =
// ceil(D / DC)).

//#include "common/attention_tile.wgsl"

struct Params {
  T: u32, Hq: u32, Hkv: u32, D: u32,
  blocks: u32, scale: f32, neg_inf: f32, groups: u32, // neg_inf = -inf (WGSL constants cannot be infinite)
  chunks: u32, splits: u32, n: u32, _p3: u32, // splits, n: the dkdv pass's (its header); dq: 1, 0
}

@group(0) @binding(0) var<storage, read> q: array<f32>;              // (B, T, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>;              // (B, T, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;              // (B, T, Hkv, D)
@group(0) @binding(3) var<storage, read> attention_mask: array<i32>; // (B, T)

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
