// The 'rows' attention set's operands as vec4s (attention_forward.wgsl, attention_backward_dq.wgsl,
// attention_backward_dkdv.wgsl: one thread per row, for SwiftShader), included after the set's common piece.
// The launcher runs the set only for a head_dim D that is a multiple of 4: a (…, D) row then starts on a vec4, so
// q, k and v (and each kernel's own (…, D) bindings) are bound as arrays of vec4 at the bindings of the common
// piece's f32 views (the same buffers): a thread loads 4 of D at once where it loaded one (SwiftShader loads per
// lane). Offsets below count vec4s (D4 = D / 4 per row); each sum still takes one fma per d in increasing d, as the
// one-element loops did, so the results are theirs bitwise.

// Each thread keeps its row's accumulators in function memory, sized for the largest head_dim the set takes (the
// launcher's ROWS_MAX_D): an array in workgroup memory would be zeroed by the implementation behind a barrier
// (WebGPU zero-initialises workgroup memory), which on SwiftShader doubled the three kernels' compile time (941
// vs 462 ms) and made every invocation a coroutine.
const D4_MAX = 64u;

@group(0) @binding(0) var<storage, read> q4: array<vec4f>; // (B, T, Hq, D / 4)
@group(0) @binding(1) var<storage, read> k4: array<vec4f>; // (B, TkvMax, Hkv, D / 4)
@group(0) @binding(2) var<storage, read> v4: array<vec4f>; // (B, TkvMax, Hkv, D / 4)

/** acc + x·y as four fmas over the components in order (one d at a time). */
fn fma4(x: vec4f, y: vec4f, acc: f32) -> f32 {
  return fma(x.w, y.w, fma(x.z, y.z, fma(x.y, y.y, fma(x.x, y.x, acc))));
}

