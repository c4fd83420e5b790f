// The chunking of the norms' weight-gradient passes (rmsnorm_backward and layernorm_backward, entry
// `dweight`): one thread per (row chunk, column) of a (P, C) partial-sum grid, P = ceil(N / R); thread i
// sums column j = i % C over rows [n0, n1) of its chunk, and colsum_forward.wgsl then adds the P
// partials per column. Deterministic (fixed order, no atomics).

struct NormChunk { j: u32, n0: u32, n1: u32, valid: bool }

fn norm_chunk(i: u32, N: u32, C: u32, R: u32) -> NormChunk {
  let P = (N + R - 1u) / R;
  let c = i / C;
  return NormChunk(i % C, c * R, min(N, (c + 1u) * R), i < P * C);
}
