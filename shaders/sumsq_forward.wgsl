// Sums of squares of several tensors (gradient norms, update sizes) and clip_grad_norm_'s coefficient,
// deterministic, no atomics:
//   main:    the sweep over up to SLOTS tensor windows per dispatch (inp0..inp5; common/slotted_sweep.wgsl):
//            items[first + s] = (n, K, part_base, first workgroup) of slot s; a workgroup finds its slot
//            (uniform: the whole workgroup has one) and sweeps that window -> its partials.
//   finish:  ONE dispatch for every tensor: workgroup i sums tensor i's partials part[starts[i] ..
//            starts[i+1]) (strided, then a tree) -> out[i]. The optimizer steps write their Δθ² partials
//            with the same sweep, so their update sizes finish here too.
//   clip:    one workgroup: total = sqrt(Σ out[i]) and clip_grad_norm_'s coefficient on the GPU, where the
//            optimizer step reads it (torch multiplies the gradients by a tensor coefficient, never read
//            back): clip = [coef, ok, total]; ok = 0 when total is not finite (the steps then write
//            nothing and the launcher refuses, instead of scaling every gradient by NaN).
// Float32 sums of positive terms are off by at most depth·u relative; the launcher keeps K ≥ 64 on CPU adapters (fewer
// barriers: src/kernels/grad_norm.ts MIN_RUN) and caps it so that depth = K + 2·log2(WG) + P/WG stays
// ~550 even for a 136M-element embedding (3e-5 worst case; the golden grad_norm tolerance is rtol 1e-4);
// clip adds log2(WG) + (tensors)/WG more. On SwiftShader's 16-thread workgroups (sweepThreads) K stays and a tensor
// writes 16× as many partials, which the finish sums 16× longer: depth ~1,550 at 136M (9e-5 worst case).

override WG: u32 = 256; // a power of two

// Tensor windows per main dispatch: up to 6 inputs + part + items = 8 storage buffers, WebGPU's default limit.
// The launcher sets 1 on CPU adapters (src/kernels/grad_norm.ts sumsqSlots): there the per-element slot switch
// below costs more than the dispatches it saves, and with one slot it folds away.
override SLOTS: u32 = 6u;

struct MainParams { first: u32, count: u32, _p0: u32, _p1: u32 }
struct FinishParams { P: u32, _p0: u32, _p1: u32, _p2: u32 }
struct ClipParams { P: u32, max_norm: f32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> inp0: array<f32>;         // (n) window of slot 0 main
@group(0) @binding(1) var<storage, read> inp1: array<f32>;         // ...                  main
@group(0) @binding(2) var<storage, read> inp2: array<f32>;         //                      main
@group(0) @binding(3) var<storage, read> inp3: array<f32>;         //                      main
@group(0) @binding(4) var<storage, read> inp4: array<f32>;         //                      main
@group(0) @binding(5) var<storage, read> inp5: array<f32>;         //                      main
@group(0) @binding(6) var<storage, read_write> part: array<f32>;   // (partials)           main
@group(0) @binding(7) var<storage, read> items: array<vec4u>;      // (items)              main
@group(0) @binding(8) var<uniform> pm: MainParams;                 //                      main
@group(0) @binding(0) var<storage, read> parts: array<f32>;        // (partials)           finish
@group(0) @binding(1) var<storage, read> starts: array<u32>;       // (P + 1)              finish
@group(0) @binding(2) var<storage, read_write> out: array<f32>;    // (P)                  finish
@group(0) @binding(3) var<uniform> pf: FinishParams;               //                      finish
@group(0) @binding(0) var<storage, read> sums: array<f32>;         // (P) Σ g² per tensor  clip
@group(0) @binding(1) var<storage, read_write> clip: array<f32>;   // (3) coef, ok, total  clip
@group(0) @binding(2) var<uniform> pc: ClipParams;                 //                      clip

//#include "common/slotted_sweep.wgsl"

// WGSL has no arrays of buffers: one case per binding.
fn elem(i: u32) -> f32 {
  if (SLOTS == 1u) { return inp0[i]; }
  switch slot {
    case 0u: { return inp0[i]; }
    case 1u: { return inp1[i]; }
    case 2u: { return inp2[i]; }
    case 3u: { return inp3[i]; }
    case 4u: { return inp4[i]; }
    default: { return inp5[i]; }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  slotted_sweep(wid.x + wid.y * nwg.x, t, pm.first, pm.count);
}

@compute @workgroup_size(WG)
fn finish(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) t: u32) {
  let k = wid.x + wid.y * nwg.x;
  if (k >= pf.P) { return; } // whole workgroup: uniform
  var s = 0.0;
  for (var j = starts[k] + t; j < starts[k + 1u]; j += WG) { s += parts[j]; }
  let total = reduce_sum(t, s);
  if (t == 0u) { out[k] = total; }
}

@compute @workgroup_size(WG)
fn clip_coef(@builtin(local_invocation_index) t: u32) {
  var s = 0.0;
  for (var i = t; i < pc.P; i += WG) { s += sums[i]; }
  let total = sqrt(reduce_sum(t, s));
  if (t == 0u) {
    // Finite by its bits: WGSL lets compilers assume no NaN / Inf in float comparisons.
    let ok = (bitcast<u32>(total) & 0x7f800000u) != 0x7f800000u;
    // torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1.
    clip[0] = select(1.0, min(1.0, pc.max_norm / (total + 1e-6)), pc.max_norm > 0.0);
    clip[1] = select(0.0, 1.0, ok);
    clip[2] = total;
  }
}
