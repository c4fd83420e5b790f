// The page's memory plan offers a LoRA alternative to a full fine-tune (issue 24): a Qwen2.5-0.5B-shaped
// bf16 policy trained in full plans past the 8 GiB most laptop GPUs hold; the same update under the
// create form's default adapter (r 8, all linear layers), base frozen in bf16 and no frozen f32 copy,
// fits. Trainable parameters are checked by hand from the config's shapes.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/model/config.ts';
import { DEFAULT_LIMITS } from '../../src/model/memory.ts';
import type { CausalLM } from '../../src/model/model.ts';
import { pagePlan, type HeldModels } from '../../src/worker/model_info.ts';

const cfg = parseConfig(JSON.parse(readFileSync(path.resolve(import.meta.dirname, '../fixtures/configs/Qwen2.5-0.5B.json'), 'utf8')));
const GiB = 2 ** 30;

const held = (adapter: boolean): HeldModels => {
  const policy = { config: cfg, info: { dtypes: ['BF16'] }, checkpointing: false, adapter: adapter ? { config: { r: 16 } } : null } as unknown as CausalLM;
  // The page's frozen copy of a full fine-tune's weights, f32 (494,032,768 params × 4 bytes).
  const frozen = adapter ? null : ({ weightBytes: 494_032_768 * 4 } as unknown as CausalLM);
  return { limits: DEFAULT_LIMITS, policy, name: 'planted', tokenizer: null, frozen, refModel: null, adapter: null };
};

describe('pagePlan', () => {
  it('proposes the default LoRA adapter, base frozen in bf16, when the policy trains in full', () => {
    const p = pagePlan(held(false), 32, 22, 8); // 32 × 30, the default task's shape in the issue
    expect(p.options.adapter).toBeNull();
    expect(p.plan.total_bytes).toBeGreaterThan(8 * GiB);
    expect(p.lora).toBeDefined();
    const lora = p.lora!;
    expect([lora.options.adapter, lora.options.dtype, lora.options.held_reference_bytes]).toEqual([8, 'bf16', 0]);
    // r × Σ (in + out) over q, k, v, o (896→896, 896→128, 896→128, 896→896) and gate, up, down (896↔4864), 24 layers.
    const perLayer = 1792 + 1024 + 1024 + 1792 + 3 * (896 + 4864);
    expect(lora.plan.trainable_params).toBe(8 * 24 * perLayer);
    expect(lora.plan.total_bytes).toBeLessThan(8 * GiB);
    expect(lora.options.B * lora.options.T).toBe(32 * 30);
  });

  it('proposes nothing when an adapter already trains', () => {
    expect(pagePlan(held(true), 32, 22, 8).lora).toBeUndefined();
  });
});
