// The chunked head backward (src/model/head.ts: CausalLM.backward with a per-token HeadGrad after a
// headless saved forward) against the float64 twin: the twin scores the same rows, takes a random
// per-token dlogp and dentropy back to dlogits (src/oracle/logprob_gather.ts) and through its model
// (src/oracle/model.ts). Every family, tied and untied heads, every row kept or logits_to_keep, chunks of
// 1, 4 and all rows, a temperature ≠ 1, masked rows, under gradient checkpointing and under a LoRA
// adapter (whose head stays frozen), and the bf16 frozen-weight error still names the weight.
import { describe, expect, it } from 'vitest';
import { paramSpecs, parseConfig, type ModelConfig } from '../../src/model/config.ts';
import type { ForwardInputs } from '../../src/model/forward.ts';
import { isTargeted, linearModules, parseLoraConfig, type LoraWeights } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { expectClose } from '../helpers/close.ts';
import { testGpu } from '../helpers/gpu.ts';
import { randomWeights, TINY_CONFIGS } from '../fixtures/models.ts';

/** B rows of T tokens, row b with b left pads (generation position ids). */
function batch(cfg: ModelConfig, B: number, T: number, rng: Rng): ForwardInputs {
  const input_ids = Int32Array.from({ length: B * T }, () => rng.int(1, cfg.vocab_size - 1));
  const attention_mask = Int32Array.from({ length: B * T }, (_, i) => (i % T >= Math.floor(i / T) ? 1 : 0));
  const position_ids = Int32Array.from({ length: B * T }, (_, i) => Math.max(0, (i % T) - Math.floor(i / T)));
  return { B, T, input_ids, attention_mask, position_ids };
}

const CASES = Object.keys(TINY_CONFIGS).flatMap((family) => [
  { family, keep: 0, lora: false, checkpointing: false },
  { family, keep: 4, lora: false, checkpointing: true },
  { family, keep: 4, lora: true, checkpointing: false },
]);

describe.each(CASES)('$family, keep $keep, LoRA $lora, checkpointing $checkpointing', ({ family, keep, lora, checkpointing }) => {
  it('gradients of per-token dlogp / dentropy through the chunked head equal the float64 twin for every chunk size', async () => {
    const gpu = await testGpu();
    const cfg = parseConfig({ ...TINY_CONFIGS[family], num_hidden_layers: 2 });
    const rng = new Rng(31 + family.length);
    const x = batch(cfg, 3, 7, rng);
    const V = cfg.vocab_size;
    const rows = x.B * (keep || x.T);
    const temperature = 0.7;
    const weights = randomWeights(cfg, 9);
    const loraCfg = parseLoraConfig({ peft_type: 'LORA', r: 2, lora_alpha: 4, target_modules: 'all-linear' });
    const adapterWeights: LoraWeights = {
      config: loraCfg,
      modules: linearModules(cfg).filter((m) => isTargeted(loraCfg.target_modules, m.name)).map((m) => ({ ...m, A: rng.f32(2 * m.in, 0.3), B: rng.f32(m.out * 2, 0.1) })),
    };

    // The twin: per-token scores, a random gradient of them, dlogits, every gradient.
    const ref = new RefModel(cfg, new Map(Object.entries(weights).map(([k, v]) => [k, Float64Array.from(v)])), lora ? adapterWeights : undefined);
    const rf = ref.forward(x, keep ? { logits_to_keep: keep } : {});
    const ids = Int32Array.from({ length: rows }, () => rng.int(0, V - 1));
    const mask = Int32Array.from({ length: rows }, (_, i) => (i % 5 === 2 ? 0 : 1));
    const g = logprob_gather_forward(rf.logits, ids, null, rows, V, temperature);
    const dlogp = Float32Array.from({ length: rows }, () => rng.normal());
    const dentropy = Float32Array.from({ length: rows }, () => rng.normal());
    const want = ref.backward(rf, logprob_gather_backward(rf.logits, ids, mask, g.lse, dlogp, rows, V, temperature, { dentropy, entropy: g.entropy }));

    for (const chunk of [1, 4, rows]) {
      const model = CausalLM.fromWeights(gpu, cfg, weights);
      const adapter = lora ? LoraAdapter.fromWeights(gpu, adapterWeights) : null;
      model.adapter = adapter;
      model.checkpointing = checkpointing;
      model.logitsChunkRows = chunk;
      const rec = gpu.recorder('train');
      model.forward(rec, x, { ...(keep ? { logits_to_keep: keep } : {}), save: true, headless: true });
      const up = (label: string, a: ArrayLike<number>, I32 = false) => gpu.upload(label, I32 ? Int32Array.from(a) : Float32Array.from(a));
      const entropy = up('entropy', g.entropy);
      model.backward(rec, {
        dlogp: up('dlogp', dlogp), lse: up('lse', g.lse), ids: up('ids', ids, true), mask: up('mask', mask, true), temperature,
        dentropy: { dentropy: up('dentropy', dentropy), entropy },
      });
      // A headless forward has no logits to take dlogits against.
      expect(() => model.backward(rec, gpu.zeros(16))).toThrow(/headless forward has no logits/);
      await rec.submit();
      const names = lora ? [...adapter!.grads!.keys()] : paramSpecs(cfg).map((p) => p.name);
      for (const name of names) {
        const w = want.get(name)!;
        const got = lora ? await gpu.readF32(adapter!.grads!.get(name)!, w.length) : await model.readGrad(name);
        // The golden README's gradient tolerance (rtol 1e-4, atol 1e-5·gmax): f32 sums over the rows and V.
        // A bias gradient sums the same per-row terms as its weight's (without the normalized input, of
        // order 1), so its rounding is on the weight gradient's scale: k_proj's bias gradient nearly
        // cancels (a shift of every key leaves the softmax unchanged but for RoPE).
        const gmax = [w, name.endsWith('.bias') ? want.get(name.replace(/bias$/, 'weight'))! : w].reduce((m, a) => a.reduce((x, v) => Math.max(x, Math.abs(v)), m), 0);
        expectClose(got, w, { rtol: 1e-4, atol: 1e-5 * gmax, label: `${family} chunk ${chunk} grad ${name}` });
      }
      model.destroy();
      adapter?.destroy();
    }
  });
});
