// Frozen weights kept in their checkpoint dtype (CausalLM.from_pretrained with storage 'checkpoint'):
// the golden tiny-llama-bf16 (tests/golden/models, README there) scores to its golden log-probs with its
// linear, head and embedding weights packed bf16 on the GPU (half the bytes; norms stay f32); a LoRA adapter on that bf16 base matches the float64 twin (logits and adapter gradients of
// Σ logits·R); training a bf16-stored weight is refused.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { padBatch } from '../../src/grpo/batch.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF64 } from '../../src/io/safetensors.ts';
import { numel } from '../../src/model/config.ts';
import { loadCheckpoint } from '../../src/model/loader.ts';
import { loadLoraAdapter } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN, GOLDEN_ROOT } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';

const BF16 = join(GOLDEN, 'tiny-llama-bf16');
// The llama LoRA case's base has tiny-llama's architecture, so its adapter fits the bf16 model.
const ADAPTER = join(GOLDEN_ROOT, 'lora', 'llama-gqa-all-proj-r4', 'adapter');

describe('bf16 weight storage', () => {
  it('tiny-llama-bf16 with storage "checkpoint": packed weights, golden log-probs', async () => {
    const gpu = await testGpu();
    const model = await CausalLM.from_pretrained(new FolderSource(BF16), gpu, { storage: 'checkpoint' });
    for (const p of model.params.values()) {
      const packed = p.shape.length === 2;
      expect(p.dtype, p.name).toBe(packed ? 'bf16' : undefined);
      expect(p.buffer.size, p.name).toBe(Math.max(16, Math.ceil((numel(p.shape) * (packed ? 2 : 4)) / 4) * 4));
    }
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(BF16, 'golden.safetensors'))));
    const padded = padBatch(parseBatch(readFileSync(join(BF16, 'batch.json'), 'utf8')));
    const rec = gpu.recorder('score');
    const s = score_completions(rec, model, padded);
    await rec.submit();
    // README: per_token_logps rtol 1e-4, atol 1e-5 where completion_mask = 1.
    expectClose(await gpu.readF32(s.per_token_logps, padded.B * padded.C), toF64(st, 'per_token_logps'), { rtol: 1e-4, atol: 1e-5, mask: padded.completion_mask, label: 'bf16-stored per_token_logps' });
    // readParam widens a packed weight exactly: the f32 load of the same checkpoint holds the same values.
    const f32 = await CausalLM.from_pretrained(new FolderSource(BF16), gpu);
    const name = 'model.layers.1.self_attn.k_proj.weight';
    expect(await model.readParam(name)).toEqual(await f32.readParam(name));
    // A bf16-stored weight does not train.
    const train = gpu.recorder('train');
    const scored = score_completions(train, model, padded, { save: true });
    const grad = { dlogp: scored.per_token_logps, lse: scored.lse, ids: scored.completion_ids, mask: scored.completion_mask, temperature: 1 };
    expect(() => model.backward(train, grad)).toThrow(/bf16 weight is frozen/);
    scored.destroy();
    s.destroy();
    model.destroy();
    f32.destroy();
  });

  it('LoRA on a bf16-stored base matches the float64 twin: logits and adapter gradients', async () => {
    const gpu = await testGpu();
    const model = await CausalLM.from_pretrained(new FolderSource(BF16), gpu, { storage: 'checkpoint' });
    const weights = await loadLoraAdapter(new FolderSource(ADAPTER), model.config);
    const adapter = LoraAdapter.fromWeights(gpu, weights);
    model.adapter = adapter;
    const base = new Map<string, Float64Array>();
    await loadCheckpoint(new FolderSource(BF16), (spec, data) => void base.set(spec.name, Float64Array.from(data)));
    const ref = new RefModel(model.config, base, weights);
    const p = padBatch(parseBatch(readFileSync(join(BF16, 'batch.json'), 'utf8')));
    const x = { B: p.B, T: p.L, input_ids: p.input_ids, attention_mask: p.attention_mask, position_ids: p.position_ids };
    const V = model.config.vocab_size;
    const rng = new Rng(5);
    const R = Float32Array.from({ length: p.B * p.C * V }, () => rng.normal());
    const rf = ref.forward(x, { logits_to_keep: p.C });
    const want = ref.backward(rf, Float64Array.from(R));
    const rec = gpu.recorder('train');
    const f = model.forward(rec, x, { logits_to_keep: p.C, save: true });
    model.backward(rec, gpu.upload('dlogits', R));
    await rec.submit();
    expectClose(await gpu.readF32(f.logits, f.rows * V), rf.logits, { rtol: 1e-4, atol: 1e-4, label: 'bf16 base + LoRA logits' });
    for (const [k, g] of adapter.grads!) {
      const w = want.get(k)!;
      const gmax = w.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      expectClose(await gpu.readF32(g, w.length), w, { rtol: 1e-4, atol: 1e-5 * gmax, label: `bf16 base ${k}` });
    }
    model.destroy();
    adapter.destroy();
  });
});
