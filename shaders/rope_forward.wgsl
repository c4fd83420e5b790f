// Rotary position embedding, Hugging Face rotate-half form, in place on x (N, H, D) and on y (N, HY, D)
// (the queries and the keys, in one dispatch; HY = 0: x alone): dims i and i + D/2 of each head rotate by
// angle position_ids[n] · inv_freq[i], inv_freq[i] = theta^(-2i/D).
// SIGN = -1 rotates by the opposite angle, which is the backward (the rotation's transpose), so
// rope_backward reuses this shader.
//
// Accuracy: a plain f32 angle p·inv_freq loses ~|angle|·2⁻²⁴ (2.4e-4 rad at p = 4096, then cos/sin are
// wrong in the 4th digit). Instead the launcher gives each frequency as a 64-bit fixed-point number of
// turns per position step (freq[i] = (hi, lo): inv_freq / 2π = (hi·2³² + lo) / 2⁶⁴); the exact integer
// product p·freq mod 2⁶⁴ is the angle's fractional turn, range-reduced without error. Its top word,
// read as a signed fraction of a turn in [-1/2, 1/2), becomes an f32 angle in [-π, π) accurate to
// ~2e-7 rad for any position, and sin/cos are evaluated where they are accurate.

override WG: u32 = 256;
override SIGN: f32 = 1.0;

struct Params { N: u32, H: u32, HY: u32, D: u32 }

@group(0) @binding(0) var<storage, read_write> x: array<f32>;       // (N, H, D)
@group(0) @binding(1) var<storage, read_write> y: array<f32>;       // (N, HY, D), or a dummy when HY = 0
@group(0) @binding(2) var<storage, read> position_ids: array<i32>;  // (N)
@group(0) @binding(3) var<storage, read> freq: array<vec2u>;        // (D/2): turns per position, 64-bit fixed point
@group(0) @binding(4) var<uniform> p: Params;

const TWO_PI_OVER_2_32: f32 = 1.4629180792671596e-9; // 2π / 2³²

/** High 32 bits of the 64-bit product a·b (16-bit limbs: WGSL has no 64-bit integers). */
fn mul_hi(a: u32, b: u32) -> u32 {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = ((a0 * b0) >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let half = p.D / 2u;
  let g = gid.x + gid.y * nwg.x * WG;
  let nx = p.N * p.H * half; // x's pairs, then y's
  if (g >= nx + p.N * p.HY * half) { return; }
  let in_x = g < nx;
  let idx = select(g - nx, g, in_x);
  let i = idx % half;
  let row = idx / half; // n·H + h (of y: n·HY + h)
  let n = row / select(p.HY, p.H, in_x);
  let pos = position_ids[n];
  let f = freq[i];
  let ap = u32(abs(pos));
  // Top word of the fractional turn (ap · f) mod 1, carries past 2⁶⁴ dropped: that is the reduction.
  let turn = ap * f.x + mul_hi(ap, f.y);
  let angle = f32(bitcast<i32>(turn)) * TWO_PI_OVER_2_32;
  let c = cos(angle);
  let s = SIGN * sign(f32(pos)) * sin(angle);
  let j = row * p.D + i;
  if (in_x) {
    let x1 = x[j];
    let x2 = x[j + half];
    x[j] = x1 * c - x2 * s;
    x[j + half] = x2 * c + x1 * s;
  } else {
    let y1 = y[j];
    let y2 = y[j + half];
    y[j] = y1 * c - y2 * s;
    y[j + half] = y2 * c + y1 * s;
  }
}
