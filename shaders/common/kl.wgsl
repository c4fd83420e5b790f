// Schulman's k3 estimator shared by kl_forward, ppo_loss_forward and trl_loss_forward: exp(k) − k − 1 for a
// log-ratio k. In f32 the formula cancels catastrophically for small k (the value is O(k²)), so below
// |k| = 0.1 the Taylor series is summed instead (truncation error k⁷/5040, under 1e-8 of the value).

/** exp(k) − k − 1 without f32 cancellation near 0. */
fn k3_value(k: f32) -> f32 {
  if (abs(k) < 0.1) {
    return k * k * (0.5 + k * (1.0 / 6.0 + k * (1.0 / 24.0 + k * (1.0 / 120.0 + k * (1.0 / 720.0)))));
  }
  return exp(k) - k - 1.0;
}
