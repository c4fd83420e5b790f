// Packed bfloat16 weights, two per u32 word with the lower half first (a checkpoint's little-endian bytes as
// stored): frozen weights kept in their checkpoint dtype. Each element is widened to f32 exactly (bf16 is the
// top half of an f32), so arithmetic on it is f32 arithmetic. Included with
//   //#include "common/bf16.wgsl"
// by the kernels that read such weights (the GEMMs' B, the few-row product's W, the embedding table).

/** Element i of a packed array, given the word that holds it (word i >> 1), widened to f32. */
fn bf16_widen(word: u32, i: u32) -> f32 {
  return bitcast<f32>(((word >> ((i & 1u) * 16u)) & 0xffffu) << 16u);
}
