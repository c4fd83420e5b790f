// The GPU passes verl's and OpenRLHF's objectives share: log-probs and entropy of the case's logits
// (logprob_gather_forward), then — once the trainer module has turned the read-back log-probs into its
// decisions (masks, importance weights, covariance selections, aggregation weights) — the fused per-token
// objective (ppo_loss_forward) and the gradient to the logits (logprob_gather_backward with ∂loss/∂entropy).
// The decisions are read-back float32 log-probs compared with thresholds (every golden case keeps them
// ≥ 1e-3 away), so taking them on the CPU changes no number; each is a per-token input of the kernel.
import type { Gpu } from '../../gpu/context.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../kernels/logprob_gather.ts';
import { ppo_loss_forward } from '../../kernels/ppo_loss.ts';
import { PPO_INPUTS, type PpoLossParams } from '../../kernels/types.ts';
import type { TrainerLossCase } from './types.ts';

/** What the trainer module decides from the current log-probs and entropies (float32, (B, T)). */
export interface PpoPlan {
  params: PpoLossParams;
  inputs: Float32Array; // (B, T, 8) in PPO_INPUTS order
}

export interface PpoRun {
  logp: Float32Array; // (B, T), 0 where completion_mask = 0
  entropy: Float32Array; // (B, T)
  loss: Float32Array; // (B, T) policy term
  kl: Float32Array; // (B, T)
  ratio: Float32Array; // (B, T)
  value: number; // the loss: Σ of the per-token shares, summed in float64
  dlogits: Float32Array | null; // (B, T, V)
}

export async function runPpo(
  gpu: Gpu,
  c: TrainerLossCase,
  o: { temperature: number; entropyTemperature: number; backward: boolean; plan: (logp: Float32Array, entropy: Float32Array) => PpoPlan },
): Promise<PpoRun> {
  const { B, T, V } = c;
  const N = B * T;
  const bufs: GPUBuffer[] = [];
  const buf = (label: string, bytes: number): GPUBuffer => {
    const b = gpu.createBuffer(label, Math.max(16, bytes));
    bufs.push(b);
    return b;
  };
  const up = (label: string, data: ArrayBufferView): GPUBuffer => {
    const b = gpu.upload(label, data);
    bufs.push(b);
    return b;
  };
  try {
    const rows = { logits: up('logits', c.logits), ids: up('completion_ids', c.completion_ids), mask: up('completion_mask', c.completion_mask), N, V };
    const logp = buf('logp', 4 * N);
    const lse = buf('lse', 8 * N);
    const entropy = buf('entropy', 4 * N);
    const rec = gpu.recorder('trainer logprobs');
    logprob_gather_forward(rec, { ...rows, temperature: o.temperature, logp, lse, entropy });
    // OpenRLHF takes the entropy of the untempered logits: a second pass for its entropy only.
    const shownEntropy = o.entropyTemperature === o.temperature ? entropy : buf('entropy_raw', 4 * N);
    if (shownEntropy !== entropy) logprob_gather_forward(rec, { ...rows, temperature: o.entropyTemperature, logp: buf('logp_raw', 4 * N), lse: buf('lse_raw', 8 * N), entropy: shownEntropy });
    await rec.finish();
    const logpHost = await gpu.readF32(logp, N);
    const entropyHost = await gpu.readF32(shownEntropy, N);

    const plan = o.plan(logpHost, entropyHost);
    if (plan.inputs.length !== PPO_INPUTS.length * N) throw new Error(`ppo inputs: expected ${PPO_INPUTS.length * N} floats, got ${plan.inputs.length}`);
    const out = buf('ppo_out', 16 * N);
    const dlogp = buf('dlogp', 4 * N);
    const dentropy = buf('dentropy', 4 * N);
    const dlogits = o.backward ? buf('dlogits', 4 * N * V) : null;
    const rec2 = gpu.recorder('trainer objective');
    ppo_loss_forward(rec2, { logp, entropy: shownEntropy, inputs: up('ppo_inputs', plan.inputs), out, dlogp, dentropy, B, T, params: plan.params });
    if (dlogits) {
      const withEntropy = plan.params.ent_coef !== 0 ? { dentropy, entropy } : null;
      logprob_gather_backward(rec2, { ...rows, temperature: o.temperature, lse, dlogp, dlogits, dentropy: withEntropy });
    }
    await rec2.finish();
    const res = await gpu.readF32(out, 4 * N);
    const pick = (k: number): Float32Array => Float32Array.from({ length: N }, (_, i) => res[4 * i + k]);
    let value = 0;
    for (let i = 0; i < N; i++) value += res[4 * i + 2];
    return {
      logp: logpHost,
      entropy: entropyHost,
      loss: pick(0),
      kl: pick(1),
      ratio: pick(3),
      value,
      dlogits: dlogits ? await gpu.readF32(dlogits, N * V) : null,
    };
  } finally {
    for (const b of bufs) b.destroy();
  }
}

/** Sequences' token counts n_b under a (B, T) mask. */
export function rowCounts(mask: ArrayLike<number>, B: number, T: number): Float64Array {
  const n = new Float64Array(B);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) n[b] += mask[b * T + t];
  return n;
}

/** An aggregation of a (B, T) loss matrix under a mask, as verl's agg_loss and OpenRLHF's aggregate_loss form it. */
export interface Aggregation {
  mode: 'token-mean' | 'seq-mean-token-sum' | 'seq-mean-token-mean' | 'seq-mean-token-sum-norm';
  dp: number; // × dp_size (not in seq-mean-token-sum-norm)
  tokens: number | null; // token-mean divisor; null = Σ M
  seqs: number | null; // seq-mean-* divisor; null = #(n_b > 0)
  norm: number; // seq-mean-token-sum-norm divisor
  scale: number; // × the loop's loss scale
}

/** Per-token weights w with loss = Σ w ⊙ L (verl core_algos.py agg_loss; OpenRLHF loss.py aggregate_loss). */
export function aggregationWeights(mask: ArrayLike<number>, B: number, T: number, a: Aggregation): Float64Array {
  const n = rowCounts(mask, B, T);
  const total = n.reduce((x, y) => x + y, 0);
  const seqs = a.seqs ?? n.filter((x) => x > 0).length;
  const w = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let row: number;
    if (a.mode === 'token-mean') row = a.dp / (a.tokens ?? total);
    else if (a.mode === 'seq-mean-token-sum') row = n[b] > 0 ? a.dp / seqs : 0;
    else if (a.mode === 'seq-mean-token-mean') row = n[b] > 0 ? a.dp / ((n[b] + 1e-8) * seqs) : 0;
    else row = 1 / a.norm;
    for (let t = 0; t < T; t++) w[b * T + t] = mask[b * T + t] * row * a.scale;
  }
  return w;
}

/** Packs the per-token inputs of ppo_loss_forward; null arrays are filled with `fill`. */
export function packInputs(N: number, cols: Record<(typeof PPO_INPUTS)[number], ArrayLike<number> | null>, fill: Partial<Record<(typeof PPO_INPUTS)[number], number>> = {}): Float32Array {
  const K = PPO_INPUTS.length;
  const out = new Float32Array(K * N);
  PPO_INPUTS.forEach((name, k) => {
    const col = cols[name];
    const f = fill[name] ?? 0;
    for (let i = 0; i < N; i++) out[K * i + k] = col ? col[i] : f;
  });
  return out;
}
