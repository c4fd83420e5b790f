// One decode step's sampling on the GPU, with the semantics of the CPU sampler (src/model/sampler.ts, its
// reference): per row, last-position logits (B, V) → repetition / presence / frequency penalties from the
// row's token counts → min_new_tokens (EOS masked) → temperature → top-k → top-p → min-p, then the token
// at the inverse CDF of the counter-based uniform(seed, row, step) (the same u32 hash as the CPU's), or the
// argmax (lowest id on ties) when greedy. Writes only the token id and its log-prob under the processed
// distribution (sampling_per_token_logps), and adds the token to the row's counts when penalties are on,
// so nothing of size V goes back to the host.
// One workgroup per row. Nothing of size V is stored: every pass recomputes the processed logit of a token
// from its raw logit and count. Thresholds are radix-selected 4 bits per pass over the f32 values' ordered
// u32 keys (8 passes for a value: 16 bin counts by workgroup atomics, or 16 bin masses by four vec4
// reductions; ⌈log2 V / 4⌉ passes for a token id):
//   top-k: the k-th largest key, exactly (a radix select on counts); tokens below it go and tokens tied
//          with it stay (HF TopKLogitsWarper: `scores < kth` are removed);
//   top-p: the key c with mass(key > c) < top_p·mass ≤ mass(key ≥ c): the last value kept (walking from
//          the most likely token, a token is kept while the mass before it is < top_p); of the tokens tied
//          at c, the walk takes n (lowest ids first, as the CPU's sort and walk does), found as the n-th
//          tie by a radix select on the id;
//   min-p: tokens with p < min_p·p_max go (HF MinPLogitsWarper, after top-p as HF orders its warpers).
// Removed tokens, −inf logits included, are tested by bits and skipped, never computed with: WGSL
// compilers may assume no infinities. A NaN or +inf logit gives id −1, a row with nothing left id −2
// (the launcher's caller reports them as the CPU sampler's errors).

//#include "common/reduce.wgsl"

override WG: u32 = 256; // threads per row, a power of two
// Which stages exist in this pipeline: the launcher turns off what the settings do not use, so the common
// case compiles without the radix-select loops (software adapters take seconds per big pipeline).
override TOP_K: bool = true;
override TOP_P: bool = true;
override PENALTIES: bool = true;

struct Params {
  V: u32,
  B: u32,
  out_base: u32,       // this step's first slot in ids / logps: step·B
  seed_lo: u32,        // the RNG seed's low and high 32 bits (seeds up to 2^53)
  seed_hi: u32,
  step: u32,           // RNG counter: tokens generated so far
  greedy: u32,         // 1: argmax of the penalised logits, no warpers
  eos_masked: u32,     // 1: min_new_tokens not reached, EOS ids are removed
  n_eos: u32,
  repetition: f32,
  presence: f32,
  frequency: f32,
  temperature: f32,
  top_k: u32,          // TOP_K only
  top_p: f32,          // TOP_P only
  min_p: f32,          // 0: off
  key_digits: u32,     // 8: an f32 key's 4-bit digits (a runtime bound: unrolling the radix passes makes compiles slow)
}

@group(0) @binding(0) var<storage, read> logits: array<u32>;        // (B, V) f32 bits
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;  // (B, V) tokens seen per row (penalty scope)
@group(0) @binding(2) var<storage, read> eos: array<u32>;           // (n_eos)
@group(0) @binding(3) var<storage, read_write> ids: array<i32>;     // (steps, B) sampled ids, −1 / −2 on error
@group(0) @binding(4) var<storage, read_write> logps: array<f32>;   // (steps, B) their log-probs
@group(0) @binding(5) var<uniform> p: Params;

const REMOVED: f32 = -3.0e38; // stands for −inf: never exponentiated (kept() tests it first)

var<workgroup> red_u: array<u32, WG>;
var<workgroup> red4: array<vec4f, WG>;      // four reductions in one tree
var<workgroup> hist: array<atomic<u32>, 16>; // a radix digit's token counts
var<workgroup> cdf: array<f32, WG>;        // each thread's contiguous chunk mass
var<workgroup> pick: vec2u;                // (thread whose chunk holds the goal, 1 if found else 0)
var<workgroup> pick_before: f32;           // mass of the chunks before it

// (max, sum, sum) in one tree: pass 1's three results for the barriers of one reduction (counts below 2^24 are exact in f32).
fn reduce_first(t: u32, v: vec3f) -> vec3f {
  red4[t] = vec4f(v, 0.0);
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      let a = red4[t];
      let b = red4[t + s];
      red4[t] = vec4f(max(a.x, b.x), a.yz + b.yz, 0.0);
    }
    workgroupBarrier();
  }
  let r = red4[0].xyz;
  workgroupBarrier();
  return r;
}

// Four sums in one tree (the top-p digit's 16 bin masses go in four of these).
fn reduce_vec4(t: u32, v: vec4f) -> vec4f {
  red4[t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red4[t] += red4[t + s]; }
    workgroupBarrier();
  }
  let r = red4[0];
  workgroupBarrier();
  return r;
}

fn reduce_min_u(t: u32, v: u32) -> u32 {
  red_u[t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red_u[t] = min(red_u[t], red_u[t + s]); }
    workgroupBarrier();
  }
  let r = red_u[0];
  workgroupBarrier();
  return r;
}

// ---------------------------------------------------------------- the RNG (sampler.ts uniform)

// lowbias32 (C. Wellons), as sampler.ts mix32: u32 multiplies wrap as Math.imul does.
fn mix32(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

// uniform(seed, row, step) ∈ [0, 1): the CPU's 27 + 26 random bits, rounded to f32.
fn draw_uniform(row: u32) -> f32 {
  var k = mix32(p.seed_lo ^ mix32(p.seed_hi + 0x9e3779b9u));
  k = mix32(k ^ mix32(row + 0x85ebca6bu));
  k = mix32(k ^ mix32(p.step + 0xc2b2ae35u));
  let a = mix32(k ^ 0x68e31da4u) >> 5u;
  let c = mix32(k ^ 0x1b56c4e9u) >> 6u;
  return f32(a) * exp2(-27.0) + f32(c) * exp2(-53.0);
}

// ---------------------------------------------------------------- the processed logits

// A token's score after penalties, min_new_tokens and temperature; REMOVED for −inf and masked EOS.
fn score(row: u32, v: u32) -> f32 {
  let bits = logits[row * p.V + v];
  if (bits == 0xff800000u) { return REMOVED; }
  var x = bitcast<f32>(bits);
  if (PENALTIES) {
    let c = counts[row * p.V + v];
    if (c > 0u) {
      if (p.repetition != 1.0) { x = select(x / p.repetition, x * p.repetition, x < 0.0); }
      x = x - p.frequency * f32(c) - p.presence;
    }
  }
  if (p.eos_masked != 0u) {
    for (var e = 0u; e < p.n_eos; e++) {
      if (eos[e] == v) { return REMOVED; }
    }
  }
  if (p.greedy == 0u && p.temperature != 1.0) { x = x / p.temperature; }
  return x;
}

fn kept(z: f32) -> bool {
  return z > REMOVED;
}

// Order-preserving u32 key of an f32 (−0 as +0, as the CPU's comparisons see them); 0 is below every number.
fn key(z: f32) -> u32 {
  var b = bitcast<u32>(z);
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn unkey(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// The warpers' verdict on a token of score z (top-k / top-p thresholds as found below).
struct Cut {
  kth: u32,      // top-k: keys below it go (0: none)
  c: u32,        // top-p: keys below it go, and of those equal to it, ids above last_tie (0: none)
  last_tie: u32,
  min_z: f32,    // min-p: scores below it go (REMOVED: none)
}

fn survives(z: f32, v: u32, cut: Cut) -> bool {
  let k = key(z);
  return kept(z) && k >= cut.kth && (k > cut.c || (k == cut.c && v <= cut.last_tie)) && z >= cut.min_z;
}

// hist[digit] = how many surviving tokens match `prefix` on the bits of `hi` (by key, or by id among the
// tokens of key `tie` when by_id), per 4-bit digit at `shift`. Ends with a barrier: hist is then complete.
fn count_digits(t: u32, row: u32, cut: Cut, prefix: u32, hi: u32, shift: u32, by_id: bool, tie: u32) {
  if (t < 16u) { atomicStore(&hist[t], 0u); }
  workgroupBarrier();
  for (var v = t; v < p.V; v += WG) {
    let z = score(row, v);
    let k = key(z);
    let x = select(k, v, by_id);
    if (survives(z, v, cut) && (!by_id || k == tie) && (x & hi) == (prefix & hi)) { atomicAdd(&hist[(x >> shift) & 15u], 1u); }
  }
  workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) t: u32) {
  let row = wid.x;
  if (row >= p.B) { return; } // uniform: the same for the whole workgroup
  let V = p.V;
  let slot = p.out_base + row;

  // Pass 1: the max score, how many tokens are left, and whether any logit is NaN or +inf.
  var m_t = REMOVED;
  var n_t = 0u;
  var bad_t = 0u;
  for (var v = t; v < V; v += WG) {
    let bits = logits[row * V + v];
    if ((bits & 0x7f800000u) == 0x7f800000u && bits != 0xff800000u) { bad_t = 1u; }
    let z = score(row, v);
    if (kept(z)) {
      m_t = max(m_t, z);
      n_t += 1u;
    }
  }
  let first = reduce_first(t, vec3f(m_t, f32(n_t), f32(bad_t)));
  let m = first.x;
  let n_left = u32(first.y);
  let bad = u32(first.z);

  var cut = Cut(0u, 0u, V, REMOVED);
  if (p.greedy == 0u) {
    // top-k: the k-th largest key, radix-selected 4 bits at a time from the top.
    if (TOP_K && p.top_k < V) {
      var prefix = 0u;
      var rank = p.top_k; // rank from the top among the keys in the prefix's range
      for (var di = i32(p.key_digits) - 1i; di >= 0i; di--) {
        let shift = 4u * u32(di);
        let hi = select(0xffffffffu << (shift + 4u), 0u, di == 7i);
        count_digits(t, row, cut, prefix, hi, shift, false, 0u);
        var above = 0u;
        for (var b = 15i; b >= 0i; b--) {
          let c = atomicLoad(&hist[b]);
          if (above + c >= rank) { prefix |= u32(b) << shift; rank -= above; break; }
          above += c;
        }
        workgroupBarrier(); // every thread has read hist before the next digit clears it
      }
      cut.kth = select(prefix, 0u, n_left <= p.top_k); // fewer than k tokens left: nothing goes
    }
    // top-p: the key c of the token whose cumulative mass from the top reaches top_p (mass above c < top_p
    // ≤ mass from c on), radix-selected on the keys with each digit's 16 bin masses.
    if (TOP_P) {
      var s_t = 0.0;
      for (var v = t; v < V; v += WG) {
        let z = score(row, v);
        if (survives(z, v, cut)) { s_t += exp(z - m); }
      }
      let need = p.top_p * reduce_sum(t, s_t);
      var c = 0u;
      var above = 0.0; // mass of the keys above c's range
      var ties = 0u;
      for (var di = i32(p.key_digits) - 1i; di >= 0i; di--) {
        let shift = 4u * u32(di);
        let hi = select(0xffffffffu << (shift + 4u), 0u, di == 7i);
        var bins: array<f32, 16>;
        for (var i = 0u; i < 16u; i++) { bins[i] = 0.0; } // explicitly: a loop-body var kept its last value on lavapipe
        for (var v = t; v < V; v += WG) {
          let z = score(row, v);
          let k = key(z);
          if (survives(z, v, cut) && (k & hi) == (c & hi)) { bins[(k >> shift) & 15u] += exp(z - m); }
        }
        var mass: array<f32, 16>;
        for (var q = 0u; q < 4u; q++) {
          let r4 = reduce_vec4(t, vec4f(bins[4u * q], bins[4u * q + 1u], bins[4u * q + 2u], bins[4u * q + 3u]));
          mass[4u * q] = r4.x;
          mass[4u * q + 1u] = r4.y;
          mass[4u * q + 2u] = r4.z;
          mass[4u * q + 3u] = r4.w;
        }
        // The first bin from the top that reaches top_p; rounding short of it: the lowest bin with mass.
        var digit = 16u;
        var lowest = 0u;
        var acc = above;
        for (var b = 15i; b >= 0i; b--) {
          if (mass[b] > 0.0) { lowest = u32(b); }
          if (digit == 16u) {
            if (acc + mass[b] >= need) { digit = u32(b); } else { acc += mass[b]; }
          }
        }
        if (digit == 16u) { digit = lowest; acc = above; for (var b = 15u; b > lowest; b--) { acc += mass[b]; } }
        above = acc;
        c |= digit << shift;
      }
      // The walk reaches c with `above` behind it and takes tied tokens until the mass reaches top_p.
      count_digits(t, row, cut, c, 0xffffffffu, 0u, false, 0u);
      ties = atomicLoad(&hist[c & 15u]);
      let pc = exp(unkey(c) - m);
      // A tie mass that underflows f32 adds nothing: the walk would take them all.
      var take = max(ties, 1u);
      if (pc > 0.0) { take = clamp(u32(clamp(ceil((need - above) / pc), 1.0, f32(take))), 1u, take); }
      // The take-th tie in id order, radix-selected on the ids 4 bits at a time.
      var last = 0u;
      var rank = take;
      let id_digits = (35u - countLeadingZeros(max(V - 1u, 1u))) / 4u;
      for (var di = i32(id_digits) - 1i; di >= 0i; di--) {
        let shift = 4u * u32(di);
        let hi = select(0xffffffffu << (shift + 4u), 0u, di == 7i);
        workgroupBarrier(); // every thread has read hist before it is cleared again
        count_digits(t, row, cut, last, hi, shift, true, c);
        var below = 0u;
        for (var b = 0u; b < 16u; b++) {
          let n = atomicLoad(&hist[b]);
          if (below + n >= rank) { last |= b << shift; rank -= below; break; }
          below += n;
        }
      }
      cut.c = c;
      cut.last_tie = last;
    }
    // min-p: p < min_p·p_max ⇔ z − m < log(min_p).
    if (p.min_p > 0.0) { cut.min_z = m + log(p.min_p); }
  }

  // Greedy: the lowest id at the max score. Its log-prob is that of the penalised logits at temperature 1.
  var best = 0xffffffffu;
  if (p.greedy != 0u) {
    var b_t = 0xffffffffu;
    for (var v = t; v < V; v += WG) {
      if (score(row, v) == m) { b_t = min(b_t, v); }
    }
    best = reduce_min_u(t, b_t);
  }

  // The inverse CDF: each thread sums a contiguous chunk of ids; thread 0 finds the chunk holding
  // u·total, and that chunk's thread walks it in id order (the CPU walks all ids in order).
  let chunk = (V + WG - 1u) / WG;
  let lo = min(t * chunk, V);
  let hi = min(lo + chunk, V);
  var w_t = 0.0;
  for (var v = lo; v < hi; v++) {
    let z = score(row, v);
    if (survives(z, v, cut)) { w_t += exp(z - m); }
  }
  cdf[t] = w_t;
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var j = 0u; j < WG; j++) { total += cdf[j]; }
    let goal = draw_uniform(row) * total;
    var acc = 0.0;
    var found = vec2u(0u, 0u);
    var before = 0.0;
    for (var j = 0u; j < WG; j++) {
      if (cdf[j] == 0.0) { continue; }
      found = vec2u(j, 0u); // the last chunk with mass, unless one holds the goal
      before = acc;
      if (acc + cdf[j] > goal) { found.y = 1u; break; }
      acc += cdf[j];
    }
    pick = found;
    pick_before = before;
    cdf[0] = total; // read back below as the normaliser
  }
  workgroupBarrier();
  let total = cdf[0];
  if (p.greedy != 0u) {
    if (t == 0u) {
      if (bad != 0u || n_left == 0u) {
        ids[slot] = select(-2, -1, bad != 0u);
        logps[slot] = 0.0;
        return;
      }
      ids[slot] = i32(best);
      logps[slot] = -log(total);
      if (PENALTIES) { counts[row * V + best] += 1u; }
    }
    return;
  }
  if (t != pick.x) { return; }
  if (bad != 0u || n_left == 0u || total == 0.0) {
    ids[slot] = select(-2, -1, bad != 0u);
    logps[slot] = 0.0;
    return;
  }
  let goal = draw_uniform(row) * total;
  var acc = pick_before;
  var tok = 0u;
  var zt = 0.0;
  for (var v = lo; v < hi; v++) {
    let z = score(row, v);
    if (!survives(z, v, cut)) { continue; }
    acc += exp(z - m);
    tok = v;
    zt = z;
    if (pick.y != 0u && acc > goal) { break; }
  }
  ids[slot] = i32(tok);
  logps[slot] = (zt - m) - log(total);
  if (PENALTIES) { counts[row * V + tok] += 1u; }
}
