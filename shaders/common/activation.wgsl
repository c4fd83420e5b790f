// Overflow-free sigmoid and the tanh-GELU pieces shared by gelu_* and silu_gate_*. Every form is written
// in e = exp(-|x|) ∈ (0, 1], which never overflows, and 1 − sigmoid(x) is taken as sigmoid(−x) from the
// same e, so it never cancels (the naive 1 / (1 + exp(−x)) overflows exp for x << 0, and 1 − s loses all
// relative precision once s rounds to 1).

// sigmoid(x) given e = exp(-|x|).
fn sigmoid_from(x: f32, e: f32) -> f32 {
  return select(e, 1.0, x >= 0.0) / (1.0 + e);
}

// 1 − sigmoid(x) = sigmoid(−x) given e = exp(-|x|).
fn sigmoid_neg_from(x: f32, e: f32) -> f32 {
  return select(1.0, e, x >= 0.0) / (1.0 + e);
}

const GELU_K: f32 = 0.7978845608028654; // sqrt(2 / pi)
const GELU_A: f32 = 0.044715;

// GPT-2's gelu_new argument u = sqrt(2/pi) (x + 0.044715 x^3), so gelu(x) = x sigmoid(2u). Callers clamp
// x to ±20 first: past that sigmoid(2u) is exactly 0 or 1 in f32, and x^3 stays finite.
fn gelu_u(xc: f32) -> f32 {
  return GELU_K * (xc + GELU_A * xc * xc * xc);
}

// du/dx.
fn gelu_du(xc: f32) -> f32 {
  return GELU_K * (1.0 + 3.0 * GELU_A * xc * xc);
}
