// The step's memory plan (src/model/plan.ts) against sizes worked out here from the architectures'
// formulas (not from the plan's own tables): a SmolLM2-135M-shaped Llama and a Qwen2-0.5B-shaped Qwen2 at
// batch 8 × 256, full fine-tuning, as the CLI (nothing held) and as the page (frozen copy + undo copy).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/model/config.ts';
import { DEFAULT_LIMITS } from '../../src/model/memory.ts';
import { formatStepPlan, planStep, type PlanOptions } from '../../src/model/plan.ts';

const GiB = 2 ** 30;
const BUDGET = 8 * GiB;

// [V, C, layers, Hq, Hkv, D, I, qkv bias]
const SHAPES = {
  'SmolLM2-135M': { hf: { architectures: ['LlamaForCausalLM'], vocab_size: 49152, hidden_size: 576, num_attention_heads: 9, num_key_value_heads: 3, num_hidden_layers: 30, intermediate_size: 1536, tie_word_embeddings: true }, dims: [49152, 576, 30, 9, 3, 64, 1536, false] },
  'Qwen2-0.5B': { hf: { architectures: ['Qwen2ForCausalLM'], vocab_size: 151936, hidden_size: 896, num_attention_heads: 14, num_key_value_heads: 2, num_hidden_layers: 24, intermediate_size: 4864, tie_word_embeddings: true }, dims: [151936, 896, 24, 14, 2, 64, 4864, true] },
} as const;

/** Parameters of a tied Llama-family model: embedding + per layer (q, k, v, o, gate, up, down, 2 norms [+ q/k/v bias]) + final norm. */
function paramCount([V, C, L, Hq, Hkv, D, I, bias]: readonly [number, number, number, number, number, number, number, boolean]): number {
  const attn = C * Hq * D + 2 * C * Hkv * D + Hq * D * C + (bias ? Hq * D + 2 * Hkv * D : 0);
  return V * C + L * (attn + 3 * C * I + 2 * C) + C;
}

const at = (B: number, T: number, keep: number, more: Partial<PlanOptions> = {}): PlanOptions => ({ B, T, prompt: T - keep, adapter: null, checkpointing: false, dtype: 'f32', limits: DEFAULT_LIMITS, ...more });

describe('memory plan', () => {
  for (const [name, { hf, dims }] of Object.entries(SHAPES)) {
    it(`${name} at 8 × 256`, () => {
      const cfg = parseConfig(hf);
      const B = 8;
      const T = 256;
      const keep = 128; // completion width: the head scores B·128 rows
      const o = at(B, T, keep);
      const plan = planStep(cfg, o);
      const P = paramCount(dims);
      const [V, C, L, Hq, Hkv, D, I] = dims;
      expect(plan.params).toBe(P);
      expect(plan.trainable_params).toBe(P);
      expect(plan.bytes.weights).toBe(4 * P);
      expect(plan.bytes.grads).toBe(4 * P);
      expect(plan.bytes.optimizer).toBe(8 * P);
      expect(plan.rows).toBe(B * keep);
      // One backward chunk: as many rows of V f32 as one default storage binding (128 MiB) holds, with
      // their hidden rows, dhidden and a few per-row values; never (rows, V).
      const R = Math.min(B * keep, Math.floor((128 * 2 ** 20) / (V * 4)));
      expect(plan.bytes.logits_chunk).toBeGreaterThanOrEqual(R * (V + 2 * C) * 4);
      expect(plan.bytes.logits_chunk).toBeLessThan(R * (V + 2 * C + 8) * 4);
      // Saved activations per layer, to first order: the (N, C)-sized tensors (input, 2 norm outputs,
      // mid residual), q / attention output (N, Hq·D), k / v (N, Hkv·D) and the MLP's gate / up /
      // product (N, I); fused attention keeps no (B, Hq, T, T) probabilities, only a per-row lse. Small
      // per-row statistics and the few shared (N, C) buffers are ignored, so the plan is a little above.
      const N = B * T;
      const perLayer = N * (4 * C + 2 * Hq * D + 2 * Hkv * D + 3 * I);
      const approx = L * perLayer * 4;
      expect(plan.bytes.activations).toBeGreaterThanOrEqual(approx);
      expect(plan.bytes.activations).toBeLessThan(approx * 1.05 + 8 * N * C * 4);
      // Nothing grows like T²: doubling T (and the rows scored) exactly doubles the activations.
      expect(planStep(cfg, at(B, 2 * T, 2 * keep)).bytes.activations).toBe(2 * plan.bytes.activations);
      console.log(formatStepPlan(name, o, plan));
      // Scoring fits 8 GiB for both: weights, one layer's set and a chunk.
      const scoring = planStep(cfg, at(B, T, keep, { scoreOnly: true }));
      expect(scoring.total_bytes).toBeLessThan(BUDGET);
      expect(scoring.total_bytes).toBeLessThan(4 * P + perLayer * 4 * 1.05 + 12 * N * C * 4 + 2 * R * (V + C + 8) * 4);
      // An AdamW step keeps 16 bytes per parameter (weights, grads, two moments) plus the activations.
      expect(plan.total_bytes).toBeGreaterThan(16 * P + approx);
      if (name === 'SmolLM2-135M') expect(plan.total_bytes).toBeLessThan(BUDGET);
      // Qwen2-0.5B: 16 × 494M = 7.4 GiB of parameter state alone, so a full f32 AdamW step cannot fit 8 GiB.
      else expect(plan.total_bytes).toBeGreaterThan(BUDGET);
      // The page holds the frozen copy (4P) for the whole session and, at the step, the undo copies of the weights
      // and of AdamW's two moments (12P), and a reference workspace during the reference forward: at least 16P more
      // at its peak than the CLI.
      const page = planStep(cfg, at(B, T, keep, { held_reference_bytes: 4 * P, undo: true }));
      expect(page.bytes.reference_weights).toBe(4 * P);
      expect(page.bytes.undo).toBe(12 * P);
      expect(page.bytes.reference).toBeGreaterThan(perLayer * 4);
      expect(page.total_bytes - plan.total_bytes).toBeGreaterThanOrEqual(16 * P);
    });
  }

  it('flags buffers past the adapter limits', () => {
    const cfg = parseConfig(SHAPES['Qwen2-0.5B'].hf);
    const V = 151936;
    const C = 896;
    const plan = planStep(cfg, at(8, 256, 128, { limits: { maxBufferSize: 2 * GiB, maxStorageBufferBindingSize: 128 * 2 ** 20 } }));
    // The embedding (151936 × 896 f32 = 519 MiB) fits maxBufferSize 2 GiB but not one binding; the
    // logits (1024 × 151936 f32 = 594 MiB in full) are chunks of 220 rows, which one binding holds.
    expect(plan.buffers).toEqual([{ name: 'embedding (V, C)', bytes: V * C * 4, status: 'windowed' }]);
    const rowsOf = (p: typeof plan) => Math.round(p.bytes.logits_chunk / 4 / (V + 2 * C + 5));
    expect(rowsOf(plan)).toBe(220);
    // A device that binds 1 GiB still gets 128 MiB chunks (a bigger chunk only raises the peak); one that
    // binds 64 MiB gets 110-row chunks (110 × 151936 × 4 ≤ 64 MiB < 111 × 151936 × 4).
    expect(rowsOf(planStep(cfg, at(8, 256, 128, { limits: { maxBufferSize: 2 * GiB, maxStorageBufferBindingSize: GiB } })))).toBe(220);
    expect(rowsOf(planStep(cfg, at(8, 256, 128, { limits: { maxBufferSize: GiB, maxStorageBufferBindingSize: 64 * 2 ** 20 } })))).toBe(110);
    // WebGPU's default maxBufferSize (256 MiB) cannot hold the f32 embedding at all: said, not hidden.
    expect(planStep(cfg, at(8, 256, 128)).buffers).toContainEqual({ name: 'embedding (V, C)', bytes: V * C * 4, status: 'does not fit' });
  });
});
