// Per row of logits: z = logits / temperature, the target token's log-prob z[id] − logsumexp(z), the
// log-sum-exp (kept split as (max z, log Σ exp(z − max)) so the backward recovers softmax without losing
// the ulps of a large max), and the entropy −Σ softmax(z)·log_softmax(z). ONE pass over the row: each
// thread keeps an online (max m, s = Σ e^{z−m}, t = Σ e^{z−m}·(z − m)) and rescales when m grows; the
// entropy is then log s − t/s. Nothing of size V is written: the logits are read once (plus one element).
// The f32 path takes four elements per iteration (at ~1.05× a plain read of the same bytes on an H200).
// z is logits·(1/T), within an ulp of TRL's logits / T (the README's zmax-scaled atol covers it).
// One workgroup per row (WG must be a power of two). Logits are f32 bits or packed f16 pairs (F16), read
// through one array<u32> binding so either storage needs no copy. The binding is a row window of a bigger
// buffer when [N, V] exceeds maxStorageBufferBindingSize (elem_base = offset of row_start in the window).

override WG: u32 = 256;
override F16: bool = false;

struct Params {
  row_start: u32,   // first global row of this dispatch
  rows: u32,        // rows in this dispatch
  V: u32,
  elem_base: u32,   // element index of row_start inside the logits window
  inv_temperature: f32, // 1 / temperature: a multiply, not a (multi-instruction, full-precision) divide per element
  skip_masked: u32, // 1: rows with mask 0 write zeros without reading the logits
}

@group(0) @binding(0) var<storage, read> logits: array<u32>;          // (rows, V) window, f32 or f16 pairs
@group(0) @binding(1) var<storage, read> ids: array<i32>;             // (N)
@group(0) @binding(2) var<storage, read> mask: array<i32>;            // (N)
@group(0) @binding(3) var<storage, read_write> logp: array<f32>;      // (N)
@group(0) @binding(4) var<storage, read_write> lse: array<vec2f>;     // (N, 2): max z, log Σ exp(z − max)
@group(0) @binding(5) var<storage, read_write> entropy: array<f32>;   // (N)
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> sh_m: array<f32, WG>;
var<workgroup> sh_s: array<f32, WG>;
var<workgroup> sh_t: array<f32, WG>;

// This thread's running state. m starts at a finite "-inf": exp(m0 − z) underflows to 0 with no inf − inf.
var<private> m: f32 = -3.0e38;
var<private> s: f32 = 0.0;
var<private> t: f32 = 0.0;
// NaN for a target id outside [0, V) (must not look like a number); a private, so not a const-expression.
var<private> nan_bits: u32 = 0x7fc00000u;

fn is_neg_inf(x: f32) -> bool {
  // Bit test, not a comparison: WGSL compilers may assume infinities never occur in arithmetic.
  return bitcast<u32>(x) == 0xff800000u;
}

fn logit(e: u32) -> f32 {
  if (F16) {
    let h = unpack2x16float(logits[e >> 1u]);
    return select(h.x, h.y, (e & 1u) == 1u);
  }
  return bitcast<f32>(logits[e]);
}

fn push(x: f32) {
  if (is_neg_inf(x)) { return; } // probability 0; (z − m)·0 would be NaN
  let z = x * p.inv_temperature;
  if (z > m) {
    let d = m - z;
    let c = exp(d);
    t = c * (t + d * s);
    s = c * s + 1.0;
    m = z;
  } else {
    let d = z - m;
    let e = exp(d);
    s += e;
    t += d * e;
  }
}

// Four elements at once (f32 path): one max test and at most one rescale per four, and four independent
// loads in flight. -inf becomes a finite sentinel (−1e30/T, finite for T > 3e-9) so no infinity enters the
// arithmetic: exp(sentinel − m) is exactly 0 once any real logit is seen (a stripe that is all -inf until
// then is rescaled away; only a row that is -inf everywhere, which has no softmax, gives a wrong value).
fn push4(x: vec4f) {
  let z = select(x, vec4f(-1.0e30), bitcast<vec4u>(x) == vec4u(0xff800000u)) * p.inv_temperature;
  let mx = max(max(z.x, z.y), max(z.z, z.w));
  if (mx > m) {
    let d = m - mx;
    let c = exp(d);
    t = c * (t + d * s);
    s = c * s;
    m = mx;
  }
  let d = z - vec4f(m);
  let e = exp(d);
  s += (e.x + e.y) + (e.z + e.w);
  t += dot(d, e);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; } // uniform: the same for the whole workgroup
  let n = p.row_start + r;
  let scored = p.skip_masked == 0u || mask[n] != 0;
  let base = p.elem_base + r * p.V;
  let len = select(0u, p.V, scored);

  if (F16) {
    // Whole u32 words: two halves per load; the row may start or end in the middle of a word.
    let w_end = (base + len + 1u) >> 1u;
    for (var w = (base >> 1u) + lid; w < w_end && len > 0u; w += WG) {
      let h = unpack2x16float(logits[w]);
      if (2u * w >= base) { push(h.x); }
      if (2u * w + 1u < base + len) { push(h.y); }
    }
  } else {
    var i = lid;
    for (; i + 3u * WG < len; i += 4u * WG) {
      let e = base + i;
      push4(vec4f(bitcast<f32>(logits[e]), bitcast<f32>(logits[e + WG]), bitcast<f32>(logits[e + 2u * WG]), bitcast<f32>(logits[e + 3u * WG])));
    }
    for (; i < len; i += WG) {
      push(bitcast<f32>(logits[base + i]));
    }
  }

  sh_m[lid] = m;
  sh_s[lid] = s;
  sh_t[lid] = t;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      let ma = sh_m[lid];
      let mb = sh_m[lid + stride];
      let mm = max(ma, mb);
      let ca = exp(ma - mm);
      let cb = exp(mb - mm);
      let sa = sh_s[lid];
      let sb = sh_s[lid + stride];
      sh_t[lid] = ca * (sh_t[lid] + (ma - mm) * sa) + cb * (sh_t[lid + stride] + (mb - mm) * sb);
      sh_s[lid] = ca * sa + cb * sb;
      sh_m[lid] = mm;
    }
    workgroupBarrier();
  }

  if (lid == 0u) {
    if (!scored) {
      logp[n] = 0.0;
      lse[n] = vec2f(0.0);
      entropy[n] = 0.0;
      return;
    }
    let mm = sh_m[0];
    let ls = log(sh_s[0]);
    let id = ids[n];
    var lp = bitcast<f32>(nan_bits);
    if (id >= 0 && u32(id) < p.V) {
      lp = (logit(base + u32(id)) * p.inv_temperature - mm) - ls;
    }
    logp[n] = lp;
    lse[n] = vec2f(mm, ls);
    entropy[n] = ls - sh_t[0] / sh_s[0];
  }
}
