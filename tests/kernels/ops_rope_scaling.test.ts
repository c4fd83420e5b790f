// rope_scaling (config.json) types llama3 and linear: the GPU kernel against the float64 twin
// (src/oracle/rope.ts, written from HF modeling_rope_utils.py on its own) on odd shapes and positions past
// the original context (up to 131072, Llama-3.2's max_position_embeddings), with Llama-3.2-1B's real
// scaling; the launcher's inverse frequencies against the twin's; the three llama3 bands (kept, blended,
// divided) on hand-checked values; the tiny GPU model with rope_scaling against the twin model; and
// config parsing: Llama-3.2's rope_scaling accepted, other types refused by name.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rope_backward, rope_forward, ropeInvFreq } from '../../src/kernels/rope.ts';
import type { RopeScaling } from '../../src/kernels/types.ts';
import { parseConfig, paramSpecs } from '../../src/model/config.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { rope_backward as ropeBackRef, rope_forward as ropeRef, rope_inv_freq } from '../../src/oracle/rope.ts';
import { expectClose } from '../helpers/close.ts';
import { testGpu } from '../helpers/gpu.ts';
import { randomWeights, TINY_CONFIGS } from '../fixtures/models.ts';

const LLAMA32: RopeScaling = { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
const LINEAR: RopeScaling = { rope_type: 'linear', factor: 4 };

// As tests/kernels/ops_rope.test.ts: the shader's angle is within ~2e-7 rad; 2e-6·(|x1| + |x2|) per element.
function tolerance(x: Float32Array, D: number) {
  return (j: number) => {
    const i = j % D;
    const pair = i < D / 2 ? j + D / 2 : j - D / 2;
    return 2e-6 * (Math.abs(x[j]) + Math.abs(x[pair])) + 1e-30;
  };
}

describe('rope_scaling', () => {
  it('llama3 bands on Llama-3.2-1B values: short waves kept, long waves / factor, the band between blended', () => {
    const inv = rope_inv_freq(64, 500000, LLAMA32);
    const plain = rope_inv_freq(64, 500000);
    // wavelen 2π/inv_freq: i = 0 is 6.28 tokens (< 8192/4: kept); i = 31 is ~2.2e6 tokens (> 8192: / 32).
    expect(inv[0]).toBe(plain[0]);
    expect(inv[31]).toBeCloseTo(plain[31] / 32, 18);
    let blended = 0;
    for (let i = 0; i < 32; i++) {
      const w = (2 * Math.PI) / plain[i];
      if (w >= 2048 && w <= 8192) {
        const s = (8192 / w - 1) / 3;
        expect(inv[i]).toBeCloseTo((1 - s) * (plain[i] / 32) + s * plain[i], 15);
        expect(inv[i]).toBeLessThan(plain[i]);
        expect(inv[i]).toBeGreaterThan(plain[i] / 32);
        blended++;
      }
    }
    expect(blended).toBeGreaterThan(0);
    expect(rope_inv_freq(8, 1e4, LINEAR)).toEqual(rope_inv_freq(8, 1e4).map((f) => f / 4));
  });

  it('the launcher computes the same inverse frequencies as the twin', () => {
    for (const [D, theta, s] of [[64, 500000, LLAMA32], [128, 500000, LLAMA32], [16, 1e4, LINEAR], [10, 1e6, null]] as const) {
      expectClose(ropeInvFreq(D, theta, s), rope_inv_freq(D, theta, s), { rtol: 1e-14, atol: 0, label: `inv_freq D=${D} ${s?.rope_type ?? 'default'}` });
    }
  });

  for (const scaling of [LLAMA32, LINEAR]) {
    it(`${scaling.rope_type}: GPU forward and backward match the twin, positions up to 131072`, async () => {
      const gpu = await testGpu();
      const rng = new Rng(scaling.rope_type.length);
      for (const [N, H, D] of [[37, 3, 64], [9, 2, 128], [13, 1, 10]]) {
        const pos = Int32Array.from({ length: N }, () => rng.int(0, 131072));
        [pos[0], pos[1], pos[2], pos[3]] = [0, 1, 131071, 8193];
        const x = rng.f32(N * H * D);
        const posBuf = gpu.upload('pos', pos);
        for (const dir of ['forward', 'backward'] as const) {
          const buf = gpu.upload('x', x);
          const rec = gpu.recorder('rope scaling');
          const shape = { positionIds: posBuf, N, H, D, theta: 500000, scaling };
          if (dir === 'forward') rope_forward(rec, { x: buf, ...shape });
          else rope_backward(rec, { dx: buf, ...shape });
          await rec.submit();
          const want = (dir === 'forward' ? ropeRef : ropeBackRef)(x, pos, N, H, D, 500000, scaling);
          expectClose(await gpu.readF32(buf, N * H * D), want, { atol: 0, rtol: 0, atolAt: tolerance(x, D), label: `${scaling.rope_type} ${dir} N=${N} H=${H} D=${D}` });
          // Scaling matters at these positions: the unscaled rotation is far off.
          if (dir === 'forward') expect(Math.max(...want.map((v, i) => Math.abs(v - ropeRef(x, pos, N, H, D, 500000)[i])))).toBeGreaterThan(0.1);
        }
      }
    });
  }

  it('a tiny Llama with rope_scaling llama3: GPU logits and gradients match the twin model', async () => {
    const gpu = await testGpu();
    // D = 4: wavelens 6.3 and 628 tokens against original_max_position_embeddings 64 (bands at 16 and 64): one kept, one divided.
    const raw = { ...TINY_CONFIGS.llama, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 }, max_position_embeddings: 512 };
    const cfg = parseConfig(raw);
    expect(cfg.rope_scaling).toEqual({ rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 });
    const weights = randomWeights(cfg, 3);
    const ref = new RefModel(cfg, new Map(Object.entries(weights).map(([k, v]) => [k, Float64Array.from(v)])));
    const model = CausalLM.fromWeights(gpu, cfg, weights);
    const rng = new Rng(8);
    const [B, T] = [2, 6];
    const x = {
      B, T,
      input_ids: Int32Array.from({ length: B * T }, () => rng.int(1, cfg.vocab_size - 1)),
      attention_mask: new Int32Array(B * T).fill(1),
      position_ids: Int32Array.from({ length: B * T }, (_, i) => 300 + (i % T) * 37), // far past the original context
    };
    const R = Float32Array.from({ length: B * T * cfg.vocab_size }, () => rng.normal());
    const rf = ref.forward(x);
    const want = ref.backward(rf, Float64Array.from(R));
    const rec = gpu.recorder('train');
    const f = model.forward(rec, x, { save: true });
    model.backward(rec, gpu.upload('dlogits', R));
    await rec.submit();
    expectClose(await gpu.readF32(f.logits, f.rows * cfg.vocab_size), rf.logits, { rtol: 1e-4, atol: 1e-4, label: 'llama3-scaled logits' });
    for (const p of paramSpecs(cfg).filter((s) => /q_proj|k_proj/.test(s.name))) {
      const w = want.get(p.name)!;
      const gmax = w.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      expectClose(await model.readGrad(p.name), w, { rtol: 1e-4, atol: 1e-5 * gmax, label: `llama3-scaled grad ${p.name}` });
    }
    model.destroy();
  });

  it('config.json: Llama-3.2-1B and linear parse; yarn, dynamic and malformed fields are refused by name', () => {
    const llama32 = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures/configs/Llama-3.2-1B.json'), 'utf8'));
    expect(parseConfig(llama32).rope_scaling).toEqual(LLAMA32);
    const base = TINY_CONFIGS.llama;
    expect(parseConfig({ ...base, rope_scaling: { type: 'linear', factor: 4 } }).rope_scaling).toEqual(LINEAR);
    expect(parseConfig({ ...base, rope_scaling: { rope_type: 'default' } }).rope_scaling).toBeNull();
    expect(parseConfig({ ...base, rope_scaling: null }).rope_scaling).toBeNull();
    expect(() => parseConfig({ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow('rope_scaling type "yarn" is not supported (supported: default, linear, llama3)');
    expect(() => parseConfig({ ...base, rope_scaling: { type: 'dynamic', factor: 2 } })).toThrow('rope_scaling type "dynamic" is not supported');
    expect(() => parseConfig({ ...base, rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4 } })).toThrow('rope_scaling.original_max_position_embeddings must be a positive number for type "llama3", got undefined');
    expect(() => parseConfig({ ...base, rope_scaling: { rope_type: 'linear', factor: 0 } })).toThrow('rope_scaling.factor must be a positive number');
  });
});
