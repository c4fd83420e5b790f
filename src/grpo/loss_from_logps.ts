// The GRPO loss from per-token log-probs already computed (no logits, no forward): what a what-if on the
// same batch needs, since every loss-side setting (loss type, β, ε, δ, KL estimator, IS level, advantages)
// acts after the log-prob gather. The terms are recorded by the same code as grpo_loss (recordLossTerms in
// loss.ts), so a what-if and the step cannot compute them differently.
import type { Gpu } from '../gpu/context.ts';
import { grpo_loss_backward_warm } from '../kernels/grpo_loss.ts';
import { STATS } from '../kernels/loss_reduce.ts';
import { AGGREGATIONS, type ClipCounts, type LossType } from '../kernels/types.ts';
import { GrpoLossError, recordLossTerms, type GrpoLossConfig, type LossTermBuffers } from './loss.ts';

/** Compiles the loss backward for every aggregation at this KL estimator and IS level (a what-if switches between them). */
export function warmLossPipelines(gpu: Gpu, config: GrpoLossConfig): void {
  grpo_loss_backward_warm(gpu, config);
}

/** Per-token inputs of the loss once log-probs exist, on the CPU; per-token arrays (B, T) row-major. */
export interface LogpLossInputs {
  B: number;
  T: number;
  per_token_logps: Float32Array;
  completion_mask: Int32Array;
  advantages: Float32Array; // (B)
  old_per_token_logps: Float32Array | null; // null: the policy's own (ratio 1)
  ref_per_token_logps: Float32Array | null;
}

/** The loss's per-token terms and aggregations from log-probs, with dloss/dlogp of the chosen aggregation. */
export interface LogpLossResult {
  per_token_kl: Float32Array | null;
  importance_ratio: Float32Array;
  per_token_loss: Float32Array;
  clip: Uint32Array;
  dlogp: Float32Array; // ∂loss/∂per_token_logps under config.loss_type
  token_weight: Float32Array; // ∂loss/∂per_token_loss under config.loss_type
  loss: number;
  losses: Record<LossType, number>;
  clip_counts: ClipCounts;
}

/**
 * The GRPO loss from per-token log-probs already computed (no logits, no forward): what a what-if on the
 * same batch needs, since every loss-side setting (loss type, β, ε, δ, KL estimator, IS level,
 * advantages) acts after the log-prob gather. Same kernels as grpo_loss.
 */
export async function grpo_loss_from_logps(gpu: Gpu, x: LogpLossInputs, config: GrpoLossConfig, scratch?: LossScratch): Promise<LogpLossResult> {
  const { B, T } = x;
  const N = B * T;
  if (config.beta !== 0 && !x.ref_per_token_logps) throw new GrpoLossError(`beta = ${config.beta} needs ref_per_token_logps`);
  // Buffers by label: kept in `scratch` across calls (same buffers, so cached bind groups hit), else freed here.
  const own = scratch ?? new LossScratch(gpu);
  const buf = (label: string, bytes: number) => own.buffer(label, bytes);
  const up = (label: string, data: Float32Array | Int32Array) => {
    const b = own.buffer(label, data.byteLength);
    gpu.write(b, data);
    return b;
  };
  try {
    const logp = up('per_token_logps', x.per_token_logps);
    const mask = up('completion_mask', x.completion_mask);
    const advantages = up('advantages', x.advantages);
    const old = x.old_per_token_logps ? up('old_per_token_logps', x.old_per_token_logps) : null;
    const ref = x.ref_per_token_logps ? up('ref_per_token_logps', x.ref_per_token_logps) : null;
    const out: LossTermBuffers = {
      per_token_kl: ref ? buf('per_token_kl', N * 4) : null,
      importance_ratio: buf('importance_ratio', N * 4),
      per_token_loss: buf('per_token_loss', N * 4),
      clip: buf('clip', N * 4),
      stats: buf('loss_stats', STATS.size * 4),
      dlogp: buf('dlogp', N * 4),
      token_weight: buf('token_weight', N * 4),
    };
    const rec = gpu.recorder('grpo_loss_from_logps');
    recordLossTerms(rec, { B, T, logp, mask, advantages, old, ref }, out, config);
    await rec.submit();
    // One round trip for everything (a what-if's latency is mostly readback waits).
    const parts = [out.importance_ratio, out.per_token_loss, out.clip, out.dlogp!, out.token_weight!, ...(out.per_token_kl ? [out.per_token_kl] : [])].map((buf) => ({ buf, byteSize: N * 4 }));
    const got = await gpu.readAll([{ buf: out.stats, byteSize: STATS.size * 4 }, ...parts]);
    const stats = new Float32Array(got[0]);
    const [ratio, loss, dlogp, token_weight] = [got[1], got[2], got[4], got[5]].map((x) => new Float32Array(x));
    const clip = new Uint32Array(got[3]);
    const kl = out.per_token_kl ? new Float32Array(got[6]) : null;
    const losses = Object.fromEntries(AGGREGATIONS.map((a, i) => [a, stats[i]])) as Record<LossType, number>;
    return {
      per_token_kl: kl, importance_ratio: ratio, per_token_loss: loss, clip, dlogp, token_weight, loss: losses[config.loss_type], losses,
      clip_counts: { low: stats[STATS.low], high: stats[STATS.high], region: stats[STATS.region], delta_binding: stats[STATS.delta_binding], tokens: stats[STATS.tokens] },
    };
  } finally {
    if (!scratch) own.destroy();
  }
}

/** GPU buffers of grpo_loss_from_logps kept between calls (a what-if session); destroy() frees them. */
export class LossScratch {
  private readonly buffers = new Map<string, GPUBuffer>();
  constructor(private readonly gpu: Gpu) {}

  buffer(label: string, bytes: number): GPUBuffer {
    let b = this.buffers.get(label);
    if (!b || b.size < bytes) {
      b?.destroy();
      b = this.gpu.createBuffer(label, bytes);
      this.buffers.set(label, b);
    }
    return b;
  }

  destroy(): void {
    for (const b of this.buffers.values()) b.destroy();
    this.buffers.clear();
  }
}
