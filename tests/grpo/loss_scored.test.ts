// The loss given the policy forward's gather (GrpoLossInputs.scored, what the step pipeline does): the
// same kernel on the same logits already produced per_token_logps / lse / entropy, so the loss must give
// bitwise the same outputs and dlogits as when it gathers them itself, without reading the (B·T, V)
// logits again (one dispatch fewer per logits window, and nothing of the logits size read). Without the
// logits at all (the step pipeline: the policy is scored in row chunks, src/model/head.ts) the same
// outputs and dlogp come out and there are no dlogits; with neither logits nor a gather the loss names
// the missing field. The field read-back (readGrpoLossFields) returns only what is asked, in one round trip of exactly those bytes.
import { describe, expect, it } from 'vitest';
import { statsSince } from '../../src/gpu/context.ts';
import { grpo_loss, readGrpoLoss, readGrpoLossFields, DEFAULT_GRPO_LOSS_CONFIG, type GrpoLossConfig } from '../../src/grpo/loss.ts';
import { logprob_gather_forward } from '../../src/kernels/logprob_gather.ts';
import { testGpu } from '../helpers/gpu.ts';

/** A small deterministic generator (mulberry32), so the case is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('loss from the forward\'s gather', () => {
  it('bitwise the same outputs and dlogits, one gather fewer; the same dlogp without logits', async () => {
    const gpu = await testGpu();
    const [B, T, V] = [3, 7, 261];
    const N = B * T;
    const r = rng(7);
    const logits = Float32Array.from({ length: N * V }, () => (r() - 0.5) * 8);
    const ids = Int32Array.from({ length: N }, () => Math.floor(r() * V));
    const mask = Int32Array.from({ length: N }, (_, i) => (i % T < 2 + (Math.floor(i / T) % 3) * 2 ? 1 : 0));
    const adv = Float32Array.from([0.9, -0.4, -0.5]);
    const old = Float32Array.from({ length: N }, () => -3 - r());
    const ref = Float32Array.from({ length: N }, () => -3 - r());
    const cfg: GrpoLossConfig = { ...DEFAULT_GRPO_LOSS_CONFIG, loss_type: 'grpo', beta: 0.04, temperature: 0.7, max_completion_length: T };
    const up = {
      completion_ids: gpu.upload('ids', ids),
      completion_mask: gpu.upload('mask', mask),
      advantages: gpu.upload('adv', adv),
      old_per_token_logps: gpu.upload('old', old),
      ref_per_token_logps: gpu.upload('ref', ref),
    };

    const run = async (reuse: boolean, withLogits = true) => {
      const l = gpu.upload('logits', logits);
      const scored = { per_token_logps: gpu.createBuffer('lp', N * 4), lse: gpu.createBuffer('lse', N * 8), per_token_entropy: gpu.createBuffer('ent', N * 4) };
      if (reuse) {
        // As score_completions does: every row scored, the loss's temperature.
        const rec = gpu.recorder('forward gather');
        logprob_gather_forward(rec, { logits: l, ids: up.completion_ids, mask: up.completion_mask, logp: scored.per_token_logps, lse: scored.lse, entropy: scored.per_token_entropy, N, V, temperature: cfg.temperature, skipMasked: false });
        await rec.submit();
      }
      const s0 = { ...gpu.stats };
      const res = await grpo_loss(gpu, { B, T, V, logits: withLogits ? l : null, ...up, scored: reuse ? scored : null }, cfg, { dlogits: withLogits ? 'in-place' : 'buffer', scoreMaskedRows: true });
      const work = statsSince(gpu.stats, s0);
      const out = await readGrpoLoss(gpu, res, { dlogits: true });
      res.destroy();
      l.destroy();
      Object.values(scored).forEach((b) => b.destroy());
      return { out, work };
    };
    const own = await run(false);
    const reused = await run(true);
    for (const k of ['per_token_logps', 'lse', 'per_token_entropy', 'per_token_kl', 'importance_ratio', 'per_token_loss', 'clip', 'dlogp', 'dlogits'] as const) {
      expect(Array.from(reused.out[k]!), k).toEqual(Array.from(own.out[k]!));
    }
    expect(reused.out.losses).toEqual(own.out.losses);
    expect(Math.abs(own.out.loss)).toBeGreaterThan(0);
    expect(reused.work.dispatches).toBeLessThan(own.work.dispatches);
    const noLogits = await run(true, false);
    for (const k of ['per_token_logps', 'lse', 'per_token_entropy', 'per_token_kl', 'importance_ratio', 'per_token_loss', 'clip', 'dlogp', 'token_weight'] as const) {
      expect(Array.from(noLogits.out[k]!), k).toEqual(Array.from(own.out[k]!));
    }
    expect(noLogits.out.losses).toEqual(own.out.losses);
    expect(noLogits.out.dlogits).toBeNull();
    await expect(grpo_loss(gpu, { B, T, V, ...up }, cfg)).rejects.toThrow(/logits: needed unless the per-token log-probs are given/);
    Object.values(up).forEach((b) => b.destroy());
  });

  it('reads back only the fields asked for, in one round trip', async () => {
    const gpu = await testGpu();
    const [B, T, V] = [2, 5, 33];
    const N = B * T;
    const r = rng(3);
    const res = await grpo_loss(
      gpu,
      {
        B, T, V,
        logits: gpu.upload('logits', Float32Array.from({ length: N * V }, () => r() * 4)),
        completion_ids: gpu.upload('ids', Int32Array.from({ length: N }, (_, i) => (i * 7) % V)),
        completion_mask: gpu.upload('mask', new Int32Array(N).fill(1)),
        advantages: gpu.upload('adv', Float32Array.from([1, -1])),
      },
      { ...DEFAULT_GRPO_LOSS_CONFIG, max_completion_length: T },
      { backward: false },
    );
    const all = await readGrpoLoss(gpu, res);
    await readGrpoLossFields(gpu, res, ['per_token_loss', 'per_token_kl']); // its staging size class now exists
    const created = gpu.staging.created;
    const read0 = gpu.stats.bytesRead;
    const some = await readGrpoLossFields(gpu, res, ['per_token_loss', 'per_token_kl']);
    expect(gpu.stats.bytesRead - read0).toBe(16 * 4 + N * 4); // stats + per_token_loss (no KL without a reference)
    expect(gpu.staging.created).toBe(created); // a pooled staging buffer, not a new one
    expect(some.per_token_kl).toBeNull();
    expect(Array.from(some.per_token_loss)).toEqual(Array.from(all.per_token_loss));
    expect(some.losses).toEqual(all.losses);
    expect('importance_ratio' in some).toBe(false);
    res.destroy();
  });
});
