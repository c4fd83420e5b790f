// Gradient checkpointing (CausalLM.checkpointing): the backward recomputes each layer's activations from
// its saved input, so every gradient is bit-identical to the saved-activations backward (same kernels,
// same order), for full fine-tuning and under a LoRA adapter, on every family; and the saved workspace
// holds one layer's activations instead of all of them.
import { describe, expect, it } from 'vitest';
import type { ForwardInputs } from '../../src/model/forward.ts';
import { parseConfig, type ModelConfig } from '../../src/model/config.ts';
import { isTargeted, linearModules, parseLoraConfig } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { testGpu } from '../helpers/gpu.ts';
import { randomWeights, TINY_CONFIGS } from '../fixtures/models.ts';

function batch(cfg: ModelConfig, B: number, T: number, rng: Rng): ForwardInputs {
  const input_ids = Int32Array.from({ length: B * T }, () => rng.int(1, cfg.vocab_size - 1));
  const attention_mask = Int32Array.from({ length: B * T }, (_, i) => (i % T >= Math.floor(i / T) ? 1 : 0)); // row b: b left pads
  const position_ids = Int32Array.from({ length: B * T }, (_, i) => Math.max(0, (i % T) - Math.floor(i / T)));
  return { B, T, input_ids, attention_mask, position_ids };
}

describe.each(Object.keys(TINY_CONFIGS))('%s', (family) => {
  for (const lora of [false, true]) {
    it(`checkpointing gives bit-identical gradients${lora ? ' (LoRA)' : ''} with less activation memory`, async () => {
      const gpu = await testGpu();
      const cfg = parseConfig({ ...TINY_CONFIGS[family], num_hidden_layers: 3 });
      const rng = new Rng(17);
      const x = batch(cfg, 3, 7, rng);
      const keep = 4;
      const R = gpu.upload('dlogits', Float32Array.from({ length: x.B * keep * cfg.vocab_size }, () => rng.normal()));
      const weights = randomWeights(cfg, 4);
      const config = parseLoraConfig({ peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: 'all-linear' });
      const modules = linearModules(cfg).filter((m) => isTargeted(config.target_modules, m.name)).map((m) => ({ ...m, A: rng.f32(2 * m.in, 0.3), B: rng.f32(m.out * 2, 0.1) }));
      const grads: Map<string, Float32Array>[] = [];
      const bytes: number[] = [];
      for (const checkpointing of [false, true]) {
        const model = CausalLM.fromWeights(gpu, cfg, weights);
        const adapter = lora ? LoraAdapter.fromWeights(gpu, { config, modules }) : null;
        model.adapter = adapter;
        model.checkpointing = checkpointing;
        const before = gpu.allocatedBytes;
        const rec = gpu.recorder('train');
        model.forward(rec, x, { logits_to_keep: keep, save: true });
        bytes.push(gpu.allocatedBytes - before);
        model.backward(rec, R);
        await rec.submit();
        const out = new Map<string, Float32Array>();
        for (const [name, g] of model.trainableGrads!) out.set(name, await gpu.readF32(g, g.size / 4));
        grads.push(out);
        model.destroy();
        adapter?.destroy();
      }
      expect([...grads[1].keys()]).toEqual([...grads[0].keys()]);
      for (const [name, g] of grads[0]) expect(grads[1].get(name), name).toEqual(g);
      expect(bytes[1]).toBeLessThan(bytes[0]);
    });
  }
});
