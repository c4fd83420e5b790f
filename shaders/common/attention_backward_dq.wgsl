// The dq pass's own bindings (beside common/attention_backward.wgsl's), shared by its row kernel
// (attention_backward_dq.wgsl), its workgroup-per-row kernel (attention_wg_backward_dq.wgsl) and its tiled one
// (attention_tile_backward_dq.wgsl).

//#include "common/attention_backward.wgsl"

@group(0) @binding(4) var<storage, read> out: array<f32>;            // (B, T, Hq, D) forward output
@group(0) @binding(5) var<storage, read> dout: array<f32>;           // (B, T, Hq, D)
@group(0) @binding(6) var<storage, read> lse: array<f32>;            // (B, Hq, T)
@group(0) @binding(7) var<storage, read_write> delta: array<f32>;    // (B, Hq, T)
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;       // (B, T, Hq, D)
@group(0) @binding(9) var<uniform> p: Params;
