// Workgroup tree sum of two values at once (LayerNorm's mean and variance, or its two backward sums):
// reduce.wgsl's reduction over vec2f, with the same rules (WG a power of two, every thread calls it in
// uniform control flow, trailing barrier so it can be called again at once).

var<workgroup> red2: array<vec2f, WG>;

fn reduce_sum2(t: u32, v: vec2f) -> vec2f {
  red2[t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red2[t] += red2[t + s]; }
    workgroupBarrier();
  }
  let r = red2[0];
  workgroupBarrier();
  return r;
}
