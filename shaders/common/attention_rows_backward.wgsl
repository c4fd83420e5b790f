// What the 'rows' set's two backward passes share (attention_backward_dq.wgsl, attention_backward_dkdv.wgsl), beside
// common/attention_rows.wgsl: the pair of dot products each recomputes per (query i, key j). Each pass declares
// `dout4` itself (its binding differs).

//#include "common/attention_rows.wgsl"

/**
 * The backward's pair (q_i · k_j, dout_i · v_j) for the query row at vec4 offset qo and the key / value row at ko,
 * D4 vec4s each; `dout4` is the including pass's (its binding differs).
 */
fn score_and_dp(qo: u32, ko: u32, D4: u32) -> vec2f {
  var sc = 0.0;
  var dp = 0.0;
  for (var d = 0u; d < D4; d++) {
    sc = fma4(q4[qo + d], k4[ko + d], sc);
    dp = fma4(dout4[qo + d], v4[ko + d], dp);
  }
  return vec2f(sc, dp);
}
