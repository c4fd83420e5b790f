// Float64 twin of shaders/logprob_gather_{forward,backward}.wgsl: per row of logits, z = logits / temperature,
// the target token's log-prob z[id] − logsumexp(z), the log-sum-exp and the entropy −Σ softmax(z)·log_softmax(z)
// (TRL's selective_log_softmax and entropy_from_logits), and the gradient of a per-row dloss/dlogp back to
// the raw logits. The log-sum-exp is kept split as (max z, log Σ exp(z − max)), as the kernel stores it.

/** Per-row outputs, each (N); lse is (N, 2) = (max z, log Σ exp(z − max)). */
export interface LogprobGather {
  logp: Float64Array; // (N)
  lse: Float64Array; // (N, 2)
  entropy: Float64Array; // (N)
}

/**
 * logits (N, V) row-major. Rows with mask[n] = 0 are skipped (all outputs 0) when `mask` is given; with
 * mask = null every row is scored. -inf logits have probability 0 and add nothing to the entropy.
 */
export function logprob_gather_forward(
  logits: ArrayLike<number>, // (N, V)
  ids: ArrayLike<number>, // (N)
  mask: ArrayLike<number> | null, // (N)
  N: number,
  V: number,
  temperature: number,
): LogprobGather {
  const logp = new Float64Array(N);
  const lse = new Float64Array(2 * N);
  const entropy = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    if (mask && !mask[n]) continue;
    const o = n * V;
    let m = -Infinity;
    for (let v = 0; v < V; v++) m = Math.max(m, logits[o + v] / temperature);
    let s = 0;
    let t = 0; // Σ exp(z − m)·(z − m)
    for (let v = 0; v < V; v++) {
      const x = logits[o + v];
      if (x === -Infinity) continue;
      const d = x / temperature - m;
      const e = Math.exp(d);
      s += e;
      t += e * d;
    }
    const ls = Math.log(s);
    const id = ids[n];
    lse[2 * n] = m;
    lse[2 * n + 1] = ls;
    logp[n] = id >= 0 && id < V ? logits[o + id] / temperature - m - ls : NaN;
    entropy[n] = ls - t / s;
  }
  return { logp, lse, entropy };
}

/**
 * dlogits[n, v] = [dlogp[n]·(onehot(v = id) − p[v]) − dentropy[n]·p[v]·(log p[v] + H[n])] / temperature,
 * p = softmax(z), H the row entropy (the entropy term only when `dentropy` is given); rows with mask 0 are exactly 0.
 */
export function logprob_gather_backward(
  logits: ArrayLike<number>, // (N, V)
  ids: ArrayLike<number>, // (N)
  mask: ArrayLike<number>, // (N)
  lse: ArrayLike<number>, // (N, 2)
  dlogp: ArrayLike<number>, // (N)
  N: number,
  V: number,
  temperature: number,
  dentropy: { dentropy: ArrayLike<number>; entropy: ArrayLike<number> } | null = null, // (N), (N)
): Float64Array {
  const dlogits = new Float64Array(N * V); // (N, V)
  for (let n = 0; n < N; n++) {
    if (!mask[n]) continue;
    const g = dlogp[n] / temperature;
    const ge = dentropy ? dentropy.dentropy[n] / temperature : 0;
    const H = dentropy ? dentropy.entropy[n] : 0;
    for (let v = 0; v < V; v++) {
      const x = logits[n * V + v];
      const onehot = v === ids[n] ? 1 : 0;
      if (x === -Infinity) {
        dlogits[n * V + v] = g * onehot; // p = 0 and p·log p → 0
        continue;
      }
      const lp = x / temperature - lse[2 * n] - lse[2 * n + 1];
      const p = Math.exp(lp);
      dlogits[n * V + v] = g * (onehot - p) - ge * p * (lp + H);
    }
  }
  return dlogits;
}
