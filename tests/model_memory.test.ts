// The memory plan against sizes worked out here from the architectures' formulas (not from the plan's
// own tables): a SmolLM2-135M-shaped Llama and a Qwen2-0.5B-shaped Qwen2 at batch 8 × 256.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/model/config.ts';
import { formatPlan, planMemory } from '../src/model/memory.ts';

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

describe('memory plan', () => {
  for (const [name, { hf, dims }] of Object.entries(SHAPES)) {
    it(`${name} at 8 × 256`, () => {
      const cfg = parseConfig(hf);
      const B = 8;
      const T = 256;
      const keep = 128; // completion width: the head scores B·128 rows
      const plan = planMemory(cfg, { B, T, logits_to_keep: keep, name });
      const P = paramCount(dims);
      const [V, C, L, Hq, Hkv, D, I] = dims;
      expect(plan.params).toBe(P);
      expect(plan.bytes.weights).toBe(4 * P);
      expect(plan.bytes.grads).toBe(4 * P);
      expect(plan.bytes.adamw).toBe(8 * P);
      expect(plan.rows).toBe(B * keep);
      // One logits chunk: as many rows of V f32 as one default storage binding (128 MiB) holds.
      const R = Math.min(B * keep, Math.floor((128 * 2 ** 20) / (V * 4)));
      expect(plan.chunk_rows).toBe(R);
      expect(plan.bytes.logits).toBe(R * V * 4);
      expect(plan.bytes.logits_full).toBe(B * T * V * 4);
      // Saved activations per layer, to first order: the (N, C)-sized tensors (input, 2 norm outputs,
      // mid residual), q / attention output (N, Hq·D), k / v (N, Hkv·D) and the MLP's gate / up /
      // product (N, I); fused attention keeps no (B, Hq, T, T) probabilities, only a per-row lse. Small
      // per-row statistics are ignored, so the plan must be within a few percent above this.
      const N = B * T;
      const perLayer = N * (4 * C + 2 * Hq * D + 2 * Hkv * D + 3 * I);
      const approx = L * perLayer * 4;
      expect(plan.bytes.activations_saved).toBeGreaterThanOrEqual(approx);
      expect(plan.bytes.activations_saved).toBeLessThan(approx * 1.05 + 4 * N * C * 8);
      // Inference keeps one layer's set plus a few shared (N, C) buffers (stream, scratch, final norm).
      expect(plan.bytes.activations_inference).toBeLessThan(perLayer * 4 * 1.05 + 8 * N * C * 4);
      // Nothing grows like T²: doubling T (and the rows scored) exactly doubles the saved activations.
      expect(planMemory(cfg, { B, T: 2 * T, logits_to_keep: 2 * keep, name }).bytes.activations_saved).toBe(2 * plan.bytes.activations_saved);
      console.log(formatPlan(plan));
      // Scoring (inference) fits 8 GiB for both.
      expect(plan.totals.inference).toBeLessThan(BUDGET);
      // An AdamW step keeps 16 bytes per parameter (weights, grads, two moments) plus the activations.
      expect(plan.totals.train).toBeGreaterThan(16 * P + approx);
      if (name === 'SmolLM2-135M') expect(plan.totals.train).toBeLessThan(BUDGET);
      // Qwen2-0.5B: 16 × 494M = 7.4 GiB of parameter state alone, so a full f32 AdamW step cannot fit 8 GiB.
      else expect(plan.totals.train).toBeGreaterThan(BUDGET);
    });
  }

  it('flags buffers past the adapter limits', () => {
    const cfg = parseConfig(SHAPES['Qwen2-0.5B'].hf);
    const limits = { maxBufferSize: 2 * GiB, maxStorageBufferBindingSize: 128 * 2 ** 20 };
    const plan = planMemory(cfg, { B: 8, T: 256, limits });
    // The embedding (151936 × 896 f32 = 519 MiB) fits maxBufferSize 2 GiB but not one binding; the
    // logits (2048 × 151936 f32 = 1.16 GiB in full) are one chunk of 220 rows, which does.
    const byName = new Map(plan.violations.map((v) => [v.name, v.limit]));
    expect(byName.get('embedding (V, C)')).toBe('maxStorageBufferBindingSize');
    expect(byName.has('logits chunk (R, V)')).toBe(false);
    expect(plan.bytes.logits).toBe(220 * 151936 * 4);
    expect(plan.bytes.logits_full).toBe(2048 * 151936 * 4);
    // A device that binds 1 GiB still gets 128 MiB chunks (a bigger chunk only raises the peak); one that
    // binds 64 MiB gets 110-row chunks (110 × 151936 × 4 ≤ 64 MiB < 111 × 151936 × 4).
    const big = planMemory(cfg, { B: 8, T: 256, limits: { maxBufferSize: 2 * GiB, maxStorageBufferBindingSize: GiB } });
    expect(big.chunk_rows).toBe(220);
    const small = planMemory(cfg, { B: 8, T: 256, limits: { maxBufferSize: GiB, maxStorageBufferBindingSize: 64 * 2 ** 20 } });
    expect(small.chunk_rows).toBe(110);
    expect(small.bytes.logits).toBe(110 * 151936 * 4);
  });
});
