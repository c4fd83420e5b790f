// The dkdv pass's own bindings (beside common/attention_backward.wgsl's), shared by its row kernel
// (attention_backward_dkdv.wgsl), its workgroup-per-row kernel (attention_wg_backward_dkdv.wgsl) and its tiled one
// (attention_tile_backward_dkdv.wgsl).

//#include "common/attention_backward.wgsl"

@group(0) @binding(4) var<storage, read> dout: array<f32>;           // (B, T, Hq, D)
@group(0) @binding(5) var<storage, read> lse: array<f32>;            // (B, Hq, T)
@group(0) @binding(6) var<storage, read> delta: array<f32>;          // (B, Hq, T)
@group(0) @binding(7) var<storage, read_write> dk: array<f32>;       // (B, T, Hkv, D)
@group(0) @binding(8) var<storage, read_write> dv: array<f32>;       // (B, T, Hkv, D)
@group(0) @binding(9) var<uniform> p: Params;
