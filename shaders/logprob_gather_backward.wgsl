// Gradient of the gathered log-probs (and, with ENTROPY, of the row entropies) back to the raw logits:
//   dlogits[v] = [dlogp·(onehot(v = id) − p[v]) − dentropy·p[v]·(log p[v] + H)] / temperature,
// z = logits / temperature, p = softmax(z), H = −Σ p·log p (the forward's entropy): ∂H/∂z[v] = −p[v]·(log p[v] + H).
// Entropy bonuses (TRL entropy_coef, verl entropy_coeff, OpenRLHF entropy_coef) need the second term.
// with softmax(z)[v] = exp((z[v] − max) − log Σ) from the forward's split log-sum-exp (a second read of
// the logits, one write, no reductions). Rows with mask 0 are written as exact zeros. IN_PLACE reads the
// logits from the dlogits binding and overwrites them (f32 only), so a step needs no second [N, V] buffer;
// then the logits binding is an unused placeholder. Windows as in logprob_gather_forward.wgsl.

override WG: u32 = 256;
override F16: bool = false;
override IN_PLACE: bool = false;
override ENTROPY: bool = false; // read dentropy / entropy (else they are unused placeholders)

struct Params {
  row_start: u32,
  rows: u32,
  V: u32,
  elem_base: u32,    // element index of row_start inside the logits window
  dlogits_base: u32, // element index of row_start inside the dlogits window
  inv_temperature: f32, // 1 / temperature: a multiply, not a (multi-instruction, full-precision) divide per element
}

@group(0) @binding(0) var<storage, read> logits: array<u32>;          // (rows, V) window, f32 or f16 pairs
@group(0) @binding(1) var<storage, read> ids: array<i32>;             // (N)
@group(0) @binding(2) var<storage, read> mask: array<i32>;            // (N)
@group(0) @binding(3) var<storage, read> lse: array<vec2f>;           // (N, 2)
@group(0) @binding(4) var<storage, read> dlogp: array<f32>;           // (N)
@group(0) @binding(5) var<storage, read_write> dlogits: array<f32>;   // (rows, V) window
@group(0) @binding(6) var<storage, read> dentropy: array<f32>;        // (N) ∂loss/∂H, when ENTROPY
@group(0) @binding(7) var<storage, read> entropy: array<f32>;         // (N) H from the forward, when ENTROPY
@group(0) @binding(8) var<uniform> p: Params;

fn is_neg_inf(x: f32) -> bool {
  return bitcast<u32>(x) == 0xff800000u; // bit test: compilers may assume no infinities in arithmetic
}

fn logit(e: u32, o: u32) -> f32 {
  if (IN_PLACE) {
    return dlogits[o];
  }
  if (F16) {
    let h = unpack2x16float(logits[e >> 1u]);
    return select(h.x, h.y, (e & 1u) == 1u);
  }
  return bitcast<f32>(logits[e]);
}

/** Per-row factors: g = dlogp/T, ge = dentropy/T, H the row entropy; l the split log-sum-exp. */
struct Row {
  g: f32,
  ge: f32,
  H: f32,
  l: vec2f,
}

/** g·(onehot − p) − ge·p·(log p + H) for element v of a row (a −inf logit has p = 0, p·log p → 0). */
fn grad(x: f32, v: u32, id: u32, r: Row) -> f32 {
  let onehot = select(0.0, 1.0, v == id);
  if (is_neg_inf(x)) { return r.g * onehot; }
  let lp = (x * p.inv_temperature - r.l.x) - r.l.y;
  let prob = exp(lp);
  var d = r.g * (onehot - prob);
  if (ENTROPY) { d -= r.ge * prob * (lp + r.H); }
  return d;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; }
  let n = p.row_start + r;
  let base = p.elem_base + r * p.V;
  let obase = p.dlogits_base + r * p.V;
  if (mask[n] == 0) {
    for (var i = lid; i < p.V; i += WG) { dlogits[obase + i] = 0.0; }
    return;
  }
  var row = Row(dlogp[n] * p.inv_temperature, 0.0, 0.0, lse[n]);
  if (ENTROPY) {
    row.ge = dentropy[n] * p.inv_temperature;
    row.H = entropy[n];
  }
  let id = u32(ids[n]);
  // Four loads issued before any use (memory-level parallelism), then the tail one at a time.
  var i = lid;
  for (; i + 3u * WG < p.V; i += 4u * WG) {
    let x0 = logit(base + i, obase + i);
    let x1 = logit(base + i + WG, obase + i + WG);
    let x2 = logit(base + i + 2u * WG, obase + i + 2u * WG);
    let x3 = logit(base + i + 3u * WG, obase + i + 3u * WG);
    dlogits[obase + i] = grad(x0, i, id, row);
    dlogits[obase + i + WG] = grad(x1, i + WG, id, row);
    dlogits[obase + i + 2u * WG] = grad(x2, i + 2u * WG, id, row);
    dlogits[obase + i + 3u * WG] = grad(x3, i + 3u * WG, id, row);
  }
  for (; i < p.V; i += WG) {
    dlogits[obase + i] = grad(logit(base + i, obase + i), i, id, row);
  }
}
