// A model's forward and backward recorded into streaming recorders (src/gpu/recorder.ts RecorderOptions.stream,
// as the step's stages record them) against the same recorded into one submit: a SmolLM2-shaped Llama narrowed
// to 16 layers (enough dispatches for several pieces, where the golden tiny models fit in one) gives
// bit-identical per-token log-probs, entropies and gradients of every parameter, in more submits.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { statsSince } from '../../src/gpu/context.ts';
import { STREAM_DISPATCHES } from '../../src/gpu/recorder.ts';
import { padBatch } from '../../src/grpo/batch.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { parseConfig } from '../../src/model/config.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { score_completions } from '../../src/model/score.ts';
import { randomWeights } from '../fixtures/models.ts';
import { testGpu } from '../helpers/gpu.ts';

const raw = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures/configs/SmolLM2-135M.json'), 'utf8'));

describe('streamed forward and backward', () => {
  it.sequential('a 16-layer model: streamed pieces give bit-identical log-probs, entropies and gradients', async () => {
    const gpu = await testGpu();
    const cfg = parseConfig({ ...raw, hidden_size: 96, intermediate_size: 160, num_attention_heads: 6, num_key_value_heads: 2, vocab_size: 509, num_hidden_layers: 16, torch_dtype: 'float32' });
    const [B, P, C] = [3, 7, 11];
    const rng = new Rng(5);
    const batch = {
      format: 'grpo-batch/v1', num_generations: 3, pad_token_id: 0, eos_token_ids: [2],
      prompt_ids: Array.from({ length: B }, () => Array.from({ length: P }, () => rng.int(3, cfg.vocab_size - 1))),
      completion_ids: Array.from({ length: B }, (_, b) => Array.from({ length: C - b }, () => rng.int(3, cfg.vocab_size - 1))),
      completion_mask: Array.from({ length: B }, (_, b) => new Array(C - b).fill(1)),
      advantages: [1, -1, 0.5],
    } as unknown as GrpoBatch;
    const p = padBatch(batch);
    const n = p.B * p.C;
    const policy = CausalLM.fromWeights(gpu, cfg, randomWeights(cfg, 3));
    const dlogp = gpu.upload('dlogp', Float32Array.from({ length: n }, (_, i) => ((i % 7) - 3) / 10));
    const run = async (stream: boolean) => {
      const before = { ...gpu.stats };
      const fwd = gpu.recorder('policy_forward', { stream });
      const s = score_completions(fwd, policy, p, { save: true });
      await fwd.finish();
      const forwardSubmits = statsSince(gpu.stats, before).submits;
      const [lp, ent] = (await gpu.readAll([s.per_token_logps, s.per_token_entropy].map((buf) => ({ buf, byteSize: 4 * n })))).map((a) => new Float32Array(a));
      const beforeBackward = gpu.stats.submits;
      const bwd = gpu.recorder('backward', { stream });
      policy.backward(bwd, { dlogp, lse: s.lse, ids: s.completion_ids, mask: s.completion_mask, temperature: 1, dentropy: null });
      await bwd.finish();
      const backwardSubmits = gpu.stats.submits - beforeBackward;
      const grads = new Map<string, Float32Array>();
      for (const [name, g] of policy.grads!) grads.set(name, await gpu.readF32(g));
      s.destroy();
      const work = statsSince(gpu.stats, before);
      return { lp, ent, grads, work, submits: { forward: forwardSubmits, backward: backwardSubmits } };
    };
    const one = await run(false);
    const streamed = await run(true);
    // The forward and the backward each past one piece: more submits each, the same dispatches.
    expect(one.work.dispatches).toBe(streamed.work.dispatches);
    expect(one.work.dispatches).toBeGreaterThan(4 * STREAM_DISPATCHES);
    expect(one.submits).toEqual({ forward: 1, backward: 1 });
    expect(streamed.submits.forward).toBeGreaterThan(2);
    expect(streamed.submits.backward).toBeGreaterThan(2);
    expect(Array.from(streamed.lp)).toEqual(Array.from(one.lp));
    expect(Array.from(streamed.ent)).toEqual(Array.from(one.ent));
    expect([...streamed.grads.keys()]).toEqual([...one.grads.keys()]);
    for (const [name, g] of one.grads) expect(Array.from(streamed.grads.get(name)!), name).toEqual(Array.from(g));
    // Nonzero gradients: the comparison is not of two empty results.
    expect(one.grads.get('model.layers.0.self_attn.q_proj.weight')!.some((x) => x !== 0)).toBe(true);
    dlogp.destroy();
    policy.destroy();
  });
});
