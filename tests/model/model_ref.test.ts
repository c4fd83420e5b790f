// Model-level gradient checks. (1) The float64 reference model's analytic gradients against central
// finite differences of its own forward, on every family. (2) The GPU model against the reference model
// on random tiny configs of every family (odd sizes, GQA, left padding, logits_to_keep): logits and every
// parameter's gradient of Σ logits·R for a random R.
import { describe, expect, it } from 'vitest';
import { numel, paramSpecs, parseConfig, type ModelConfig } from '../../src/model/config.ts';
import type { ForwardInputs } from '../../src/model/forward.ts';
import { CausalLM } from '../../src/model/model.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { expectClose } from '../helpers/close.ts';
import { centralDiff } from '../helpers/fd.ts';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';
import { randomWeights, TINY_CONFIGS } from '../fixtures/models.ts';

const FAMILIES = Object.keys(TINY_CONFIGS);

/** B rows of T tokens: row b has b left pads (HF generate position ids: cumsum(mask) − 1, pads at 1). */
function batch(cfg: ModelConfig, B: number, T: number, rng: Rng): ForwardInputs {
  const input_ids = new Int32Array(B * T);
  const attention_mask = new Int32Array(B * T);
  const position_ids = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    let seen = 0;
    for (let t = 0; t < T; t++) {
      const real = t >= b ? 1 : 0;
      input_ids[b * T + t] = real ? rng.int(1, cfg.vocab_size - 1) : 0;
      attention_mask[b * T + t] = real;
      seen += real;
      position_ids[b * T + t] = real ? seen - 1 : 1;
    }
  }
  return { B, T, input_ids, attention_mask, position_ids };
}

function f64Weights(w: Record<string, Float32Array>): Map<string, Float64Array> {
  return new Map(Object.entries(w).map(([k, v]) => [k, Float64Array.from(v)]));
}

describe.each(FAMILIES)('%s reference model', (family) => {
  it('analytic gradients match central finite differences', () => {
    const cfg = parseConfig(TINY_CONFIGS[family]);
    const rng = new Rng(11 + family.length);
    const model = new RefModel(cfg, f64Weights(randomWeights(cfg, 21)));
    const x = batch(cfg, 2, 5, rng);
    const keep = 3;
    const rows = x.B * keep;
    const R = Float64Array.from({ length: rows * cfg.vocab_size }, () => rng.normal());
    const objective = () => model.forward(x, { logits_to_keep: keep }).logits.reduce((s, z, i) => s + z * R[i], 0);
    const grads = model.backward(model.forward(x, { logits_to_keep: keep }), R);
    // A few elements of every kind of tensor: embeddings, projections, norms, biases, the head.
    const specs = paramSpecs(cfg).filter((p, i) => i % 3 === 0 || /embed|wte|wpe|lm_head|norm|bias/.test(p.name));
    const h = 1e-5;
    let checked = 0;
    for (const p of specs) {
      const w = model.weights.get(p.name)!;
      for (let j = 0; j < 2; j++) {
        const i = rng.int(0, numel(p.shape) - 1);
        const fd = centralDiff(objective, w, i, h);
        // Central differences in float64: truncation O(h²) ≈ 1e-10 relative, rounding ≈ 1e-16·|f|/h ≈ 1e-10.
        expect(Math.abs(grads.get(p.name)![i] - fd), `${p.name}[${i}]: analytic ${grads.get(p.name)![i]} vs fd ${fd}`).toBeLessThanOrEqual(1e-7 + 1e-6 * Math.abs(fd));
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(10);
  });
});

describe.each(FAMILIES)('%s GPU model vs the float64 reference', (family) => {
  it('logits and every gradient match (left padding, logits_to_keep)', async () => {
    const gpu = await testGpu();
    const cfg = parseConfig(TINY_CONFIGS[family]);
    const rng = new Rng(101 + family.length);
    const weights = randomWeights(cfg, 31);
    const ref = new RefModel(cfg, f64Weights(weights));
    const model = CausalLM.fromWeights(gpu, cfg, weights);
    const x = batch(cfg, 3, 7, rng);
    const keep = 4;
    const rows = x.B * keep;
    const V = cfg.vocab_size;

    // Inference path (one shared activation set) over every row.
    const rf = ref.forward(x);
    let rec = gpu.recorder('forward');
    const full = model.forward(rec, x);
    await rec.submit();
    // f32 kernels over a few hundred terms: relative error ~1e-6 of logits of size ~1-10; same tolerance as the golden logits.
    const fullMask = new Uint8Array(x.B * x.T * V).map((_, i) => x.attention_mask[Math.floor(i / V)]);
    expectClose(await gpu.readF32(full.logits, full.rows * V), rf.logits, { rtol: 1e-4, atol: 1e-4, mask: fullMask, label: `${family} logits` });

    // Training path: saved activations, logits_to_keep, backward of Σ logits·R.
    const R = Float32Array.from({ length: rows * V }, () => rng.normal());
    const rk = ref.forward(x, { logits_to_keep: keep });
    const grads = ref.backward(rk, Float64Array.from(R));
    rec = gpu.recorder('train');
    const f = model.forward(rec, x, { logits_to_keep: keep, save: true });
    model.backward(rec, gpu.upload('dlogits', R));
    await rec.submit();
    expectClose(await gpu.readF32(f.logits, rows * V), rk.logits, { rtol: 1e-4, atol: 1e-4, label: `${family} kept logits` });
    for (const p of paramSpecs(cfg)) {
      const want = grads.get(p.name)!;
      const gmax = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      // The golden README's gradient tolerance (rtol 1e-4, atol 1e-5·gmax): f32 sums over B·T rows.
      expectClose(await model.readGrad(p.name), want, { rtol: 1e-4, atol: 1e-5 * gmax, label: `${family} grad ${p.name}` });
    }

    // accumulate: a second backward adds the same gradients again.
    const first = await model.readGrad(paramSpecs(cfg)[0].name);
    rec = gpu.recorder('again');
    model.backward(rec, gpu.upload('dlogits', R), { accumulate: true });
    await rec.submit();
    expectClose(await model.readGrad(paramSpecs(cfg)[0].name), Float64Array.from(first, (v) => 2 * v), { rtol: 1e-6, atol: 1e-7, label: 'accumulated' });
    model.destroy();
  });
});

describe('CausalLM', () => {
  it('refuses backward after a forward without save, and names bad token ids', async () => {
    const gpu = await testGpu();
    const cfg = parseConfig(TINY_CONFIGS.llama);
    const model = CausalLM.fromWeights(gpu, cfg, randomWeights(cfg, 1));
    const x = batch(cfg, 2, 4, new Rng(3));
    const rec = gpu.recorder('f');
    model.forward(rec, x);
    expect(() => model.backward(rec, gpu.zeros(16))).toThrow(/save: true/);
    const bad = { ...x, input_ids: x.input_ids.map((v, i) => (i === 6 ? cfg.vocab_size : v)) };
    expect(() => model.forward(rec, bad)).toThrow(/sample 1, position 2: token 41 is outside the vocabulary/);
    await rec.submit();
    model.destroy();
  });
});
