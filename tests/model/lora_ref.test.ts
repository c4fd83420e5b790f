// LoRA off the golden cases: PEFT's target_modules rule and config parsing; the float64 twin's adapter
// gradients against central finite differences of its own forward; and the GPU model with an adapter
// against the twin on the random odd-sized tiny configs of every family (GQA, left padding,
// logits_to_keep): logits and ∂(Σ logits·R)/∂A, ∂/∂B for a random R, with the base weights frozen.
import { describe, expect, it } from 'vitest';
import { parseConfig, type ModelConfig } from '../../src/model/config.ts';
import { isTargeted, linearModules, loraKey, parseLoraConfig, type LoraWeights } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import type { ForwardInputs } from '../../src/model/forward.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { expectClose } from '../helpers/close.ts';
import { centralDiff } from '../helpers/fd.ts';
import { testGpu } from '../helpers/gpu.ts';
import { randomWeights, TINY_CONFIGS } from '../fixtures/models.ts';

const FAMILIES = Object.keys(TINY_CONFIGS);
const PEFT = { peft_type: 'LORA', r: 3, lora_alpha: 5, target_modules: 'all-linear', lora_dropout: 0, bias: 'none', rank_pattern: {}, alpha_pattern: {} };

/** A resumed adapter (B ≠ 0, unlike a fresh PEFT one) on every linear module. */
function randomAdapter(cfg: ModelConfig, rng: Rng, raw: Record<string, unknown> = PEFT): LoraWeights {
  const config = parseLoraConfig(raw);
  const modules = linearModules(cfg)
    .filter((m) => isTargeted(config.target_modules, m.name))
    .map((m) => ({ ...m, A: rng.f32(config.r * m.in, 1 / Math.sqrt(m.in)), B: rng.f32(m.out * config.r, 0.1) }));
  return { config, modules };
}

function batch(cfg: ModelConfig, B: number, T: number, rng: Rng): ForwardInputs {
  const input_ids = new Int32Array(B * T);
  const attention_mask = new Int32Array(B * T);
  const position_ids = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    for (let t = 0, seen = 0; t < T; t++) {
      const real = t >= b ? 1 : 0; // row b has b left pads
      seen += real;
      input_ids[b * T + t] = real ? rng.int(1, cfg.vocab_size - 1) : 0;
      attention_mask[b * T + t] = real;
      position_ids[b * T + t] = real ? seen - 1 : 1;
    }
  }
  return { B, T, input_ids, attention_mask, position_ids };
}

const f64 = (w: Record<string, Float32Array>) => new Map(Object.entries(w).map(([k, v]) => [k, Float64Array.from(v)]));

describe('PEFT adapter config', () => {
  it('target_modules: exact name or dotted suffix for a list, full regex for a string, all-linear', () => {
    expect(isTargeted(['c_proj'], 'transformer.h.0.attn.c_proj')).toBe(true);
    expect(isTargeted(['c_proj'], 'transformer.h.0.mlp.c_proj')).toBe(true);
    expect(isTargeted(['attn.c_proj'], 'transformer.h.0.mlp.c_proj')).toBe(false);
    expect(isTargeted(['proj'], 'model.layers.0.self_attn.q_proj')).toBe(false); // a suffix must start at a dot
    expect(isTargeted('.*\\.(q|v)_proj', 'model.layers.1.self_attn.v_proj')).toBe(true);
    expect(isTargeted('q_proj', 'model.layers.1.self_attn.q_proj')).toBe(false); // fullmatch, not search
    expect(isTargeted('all-linear', 'model.layers.1.mlp.down_proj')).toBe(true);
    expect(isTargeted('ALL-LINEAR', 'model.layers.1.mlp.down_proj')).toBe(true); // PEFT lowers it
    const llama = linearModules(parseConfig(TINY_CONFIGS.llama)).map((m) => m.name);
    expect(llama).not.toContain('lm_head'); // all-linear leaves the output layer out, as PEFT
    expect(llama).toHaveLength(14);
  });

  it('scaling is alpha / r, or alpha / √r with use_rslora; bad fields are named', () => {
    expect(parseLoraConfig({ ...PEFT, r: 4, lora_alpha: 8 }).scaling).toBe(2);
    expect(parseLoraConfig({ ...PEFT, r: 4, lora_alpha: 8, use_rslora: true }).scaling).toBe(4);
    expect(() => parseLoraConfig({ ...PEFT, r: 0 })).toThrow('"r" must be a positive integer, got 0');
    expect(() => parseLoraConfig({ ...PEFT, target_modules: [] })).toThrow('"target_modules" must be');
    expect(() => parseLoraConfig({ ...PEFT, rank_pattern: { q_proj: 8 } })).toThrow('per-module ranks is not supported');
    expect(() => parseLoraConfig({ ...PEFT, layers_to_transform: [0] })).toThrow('"layers_to_transform" = [0]');
  });
});

describe.each(FAMILIES)('%s with a LoRA adapter', (family) => {
  it('float64 twin: adapter gradients match central finite differences', () => {
    const cfg = parseConfig(TINY_CONFIGS[family]);
    const rng = new Rng(71 + family.length);
    const model = new RefModel(cfg, f64(randomWeights(cfg, 5)), randomAdapter(cfg, rng));
    const x = batch(cfg, 2, 5, rng);
    const keep = 3;
    const R = Float64Array.from({ length: x.B * keep * cfg.vocab_size }, () => rng.normal());
    const objective = () => model.forward(x, { logits_to_keep: keep }).logits.reduce((s, z, i) => s + z * R[i], 0);
    const grads = model.backward(model.forward(x, { logits_to_keep: keep }), R);
    let checked = 0;
    for (const [name, m] of model.lora) {
      for (const [which, t] of [['A', m.A], ['B', m.B]] as const) {
        const i = rng.int(0, t.length - 1);
        const fd = centralDiff(objective, t, i, 1e-5);
        const got = grads.get(loraKey(name, which))![i];
        expect(Math.abs(got - fd), `${loraKey(name, which)}[${i}]: analytic ${got} vs fd ${fd}`).toBeLessThanOrEqual(1e-7 + 1e-6 * Math.abs(fd));
        checked++;
      }
    }
    expect(checked).toBe(2 * linearModules(cfg).length);
  });

  it('GPU model + adapter vs the twin: logits and adapter gradients; the base gets none', async () => {
    const gpu = await testGpu();
    const cfg = parseConfig(TINY_CONFIGS[family]);
    const rng = new Rng(91 + family.length);
    const weights = randomWeights(cfg, 9);
    const lora = randomAdapter(cfg, rng, { ...PEFT, r: 2, use_rslora: true });
    const ref = new RefModel(cfg, f64(weights), lora);
    const model = CausalLM.fromWeights(gpu, cfg, weights);
    const adapter = LoraAdapter.fromWeights(gpu, lora);
    model.adapter = adapter;
    const x = batch(cfg, 3, 7, rng);
    const keep = 4;
    const V = cfg.vocab_size;
    const R = Float32Array.from({ length: x.B * keep * V }, () => rng.normal());
    const rk = ref.forward(x, { logits_to_keep: keep });
    const want = ref.backward(rk, Float64Array.from(R));
    const rec = gpu.recorder('train');
    const f = model.forward(rec, x, { logits_to_keep: keep, save: true });
    model.backward(rec, gpu.upload('dlogits', R));
    await rec.submit();
    expectClose(await gpu.readF32(f.logits, f.rows * V), rk.logits, { rtol: 1e-4, atol: 1e-4, label: `${family} logits` });
    expect([...adapter.grads!.keys()].sort()).toEqual([...adapter.params.keys()].sort());
    for (const [k, g] of adapter.grads!) {
      const w = want.get(k)!;
      const gmax = w.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      expectClose(await gpu.readF32(g, w.length), w, { rtol: 1e-4, atol: 1e-5 * gmax, label: `${family} ${k}` });
    }
    // Frozen base: no gradient buffer for any linear weight, the embedding or the head.
    expect([...model.grads!.keys()].every((n) => /norm|ln_/.test(n))).toBe(true);
    // The adapter-off view shares the base weights and scores without the adapter.
    const off = model.withAdapter(null);
    const rec2 = gpu.recorder('off');
    const fo = off.forward(rec2, x, { logits_to_keep: keep });
    await rec2.submit();
    expectClose(await gpu.readF32(fo.logits, fo.rows * V), new RefModel(cfg, f64(weights)).forward(x, { logits_to_keep: keep }).logits, { rtol: 1e-4, atol: 1e-4, label: `${family} adapter off` });
    off.destroy();
    expect(await model.readParam([...model.params.keys()][0])).toEqual(weights[[...model.params.keys()][0]]); // the view did not free shared weights
    model.destroy();
    adapter.destroy();
  });
});
