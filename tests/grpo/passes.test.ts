// μ > 1 passes over one batch (issue 24): with TRL's num_iterations = 2 the step stage runs a second
// forward → loss → backward → optimizer step on the same batch, the old log-probs fixed (here the batch's,
// as TRL's generation-time old_per_token_logps). Checked on the golden tiny models against float64
// expectations that do not come from the pipeline: pass 2's policy log-probs are the golden PyTorch
// post-step log-probs (one clipped AdamW step from the golden gradients, tests/golden/models/README), and
// pass 2's ratio, clip bits, KL and loss are the float64 twins (src/oracle/grpo_loss.ts, kl.ts) of those
// log-probs against the batch's old and the golden reference log-probs. Pass 1 is the loss stage (the
// golden loss). verl's ppo_epochs and OpenRLHF's train.max_epochs reach the same StepConfig.passes (stepConfigOf).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StepPipeline } from '../../src/grpo/step.ts';
import { PASSES_SETTING, stepConfigFromBatch, stepConfigOf } from '../../src/grpo/step_config.ts';
import type { StageData } from '../../src/grpo/step_types.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF64 } from '../../src/io/safetensors.ts';
import { CLIP_HIGH, CLIP_LOW } from '../../src/kernels/types.ts';
import { CausalLM } from '../../src/model/model.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { grpo_loss_forward } from '../../src/oracle/grpo_loss.ts';
import { kl_forward } from '../../src/oracle/kl.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { SettingsError } from '../../src/grpo/settings/types.ts';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';
import { tally } from '../helpers/tally.ts';
import { runAtPass } from '../../src/store/derived.ts';
import type { RunResults } from '../../src/store/session.ts';

const check = tally('passes');
const load = async (dir: string) => CausalLM.from_pretrained(new FolderSource(dir), await testGpu());

describe('StepConfig.passes (μ)', () => {
  it('reads TRL num_iterations from a batch config, 1 without it, and refuses a non-integer', () => {
    expect(stepConfigFromBatch({}, 4).passes).toBe(1);
    expect(stepConfigFromBatch({ num_iterations: 3 }, 4).passes).toBe(3);
    expect(() => stepConfigFromBatch({ num_iterations: 0 }, 4)).toThrow(SettingsError);
    expect(() => stepConfigFromBatch({ num_iterations: 1.5 }, 4)).toThrow(/num_iterations/);
  });

  it('reads each trainer’s own row for μ', () => {
    expect(PASSES_SETTING).toEqual({ trl: 'num_iterations', verl: 'ppo_epochs', openrlhf: 'train.max_epochs' });
    const verl = effectiveSettings('verl', [fileLayer({ trainer: 'verl', config: { ppo_epochs: 2 } }, 'v.json')]);
    expect(stepConfigOf(verl, 8, { refuse: false }).passes).toBe(2);
    // OpenRLHF's train.max_epochs (train_ppo_ray.py, default 1): 3 passes, 1 without it, a non-integer refused naming it.
    const openrlhf = (config: Record<string, unknown>) => effectiveSettings('openrlhf', [fileLayer({ trainer: 'openrlhf', config }, 'o.json')]);
    expect(stepConfigOf(openrlhf({ 'train.max_epochs': 3 }), 8, { refuse: false }).passes).toBe(3);
    expect(stepConfigOf(openrlhf({}), 8, { refuse: false }).passes).toBe(1);
    expect(() => stepConfigOf(openrlhf({ 'train.max_epochs': 0 }), 8, { refuse: false })).toThrow(/train\.max_epochs/);
  });
});

describe.each(GOLDEN_MODELS)('%s, num_iterations = 2', (m) => {
  it('pass 2: log-probs after one step, ratio ≠ 1 against the fixed old, clip bits, KL and loss as float64', async () => {
    const gpu = await testGpu();
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(GOLDEN, m, 'golden.safetensors'))));
    const batch: GrpoBatch = parseBatch(readFileSync(join(GOLDEN, m, 'batch.json'), 'utf8'));
    const policy = await load(join(GOLDEN, m));
    const reference = await load(join(GOLDEN, m, 'ref'));
    const config = stepConfigFromBatch({ ...batch.config, num_iterations: 2 }, Math.max(...batch.completion_ids.map((r) => r.length)));
    const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch } });
    const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
    while (pipe.nextStage !== 're_evaluate') await pipe.next();
    const { B, C, completion_mask: mask } = d('assemble').padded;
    // Pass 1 is the loss stage: the golden loss.
    check([d('loss').loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${m} pass 1 loss`, key: 'pass 1 loss' });
    const passes = d('step').passes;
    expect(passes.map((p) => p.pass)).toEqual([2]);
    const p2 = passes[0];

    // float64 expectations from the golden post-step log-probs, the batch's old and the golden reference.
    const logp = toF64(st, 'post_step.per_token_logps');
    const old = Float64Array.from(d('assemble').padded.old_per_token_logps!);
    const ref = toF64(st, 'ref_per_token_logps');
    const l = config.loss;
    const kl = kl_forward(logp, ref, l.kl_estimator);
    const f = grpo_loss_forward(logp, old, kl, d('advantages').advantages, mask, B, C, { ...l, importance_sampling_level: l.importance_sampling_level });
    // README: end-to-end post-step log-probs rtol 1e-3, atol 0.002; the ratio exp(logp − old) inherits that error.
    check(p2.per_token_logps, logp, { rtol: 1e-3, atol: 0.002, mask, label: `${m} pass 2 logps`, key: 'pass 2 logps' });
    check(p2.importance_ratio, f.ratio, { rtol: 3e-3, atol: 3e-3, mask, label: `${m} pass 2 ratio`, key: 'pass 2 ratio' });
    check(p2.per_token_kl!, kl, { rtol: 1e-2, atol: 3e-3, mask, label: `${m} pass 2 KL`, key: 'pass 2 KL' });
    check(p2.per_token_loss, f.loss, { rtol: 1e-2, atol: 3e-3, mask, label: `${m} pass 2 per_token_loss`, key: 'pass 2 per_token_loss' });
    // loss_type grpo (the batch's): the mean over rows of each row's masked mean.
    let want = 0;
    for (let b = 0; b < B; b++) {
      let [s, n] = [0, 0];
      for (let t = 0; t < C; t++) if (mask[b * C + t]) [s, n] = [s + f.loss[b * C + t], n + 1];
      want += s / Math.max(1, n) / B;
    }
    expect(l.loss_type).toBe('grpo');
    check([p2.loss], [want], { rtol: 1e-2, atol: 1e-3, label: `${m} pass 2 loss`, key: 'pass 2 loss' });
    // The second pass moved the ratio off the first pass's: some masked token's ratio differs by more than the tolerance.
    let moved = 0;
    for (let i = 0; i < B * C; i++) if (mask[i]) moved = Math.max(moved, Math.abs(f.ratio[i] - d('loss').importance_ratio[i]));
    expect(moved).toBeGreaterThan(1e-2);
    // Clip bits as float64 says, on every token not within the ratio's tolerance of a bound.
    const near = (r: number) => Math.abs(r - (1 - l.epsilon_low)) < 5e-3 || Math.abs(r - (1 + l.epsilon_high)) < 5e-3;
    let compared = 0;
    for (let i = 0; i < B * C; i++) {
      if (!mask[i] || near(f.ratio[i])) continue;
      compared++;
      expect(p2.clip[i] & (CLIP_LOW | CLIP_HIGH), `${m} clip bits at ${i} (ratio ${f.ratio[i]})`).toBe(f.clip[i] & (CLIP_LOW | CLIP_HIGH));
    }
    expect(compared).toBeGreaterThan(0);
    // ε binds on the second pass (it cannot on the first, where the ratio is 1): float64 and the pipeline agree on some clipped token.
    let clipped = 0;
    for (let i = 0; i < B * C; i++) if (mask[i] && !near(f.ratio[i]) && f.clip[i] & (CLIP_LOW | CLIP_HIGH)) clipped++;
    expect(clipped, `${m} tokens clipped on pass 2`).toBeGreaterThan(0);
    expect(p2.clip_counts.low + p2.clip_counts.high).toBeGreaterThanOrEqual(clipped);
    expect(p2.grad_norm).toBeGreaterThan(0);
    await pipe.next(); // re_evaluate: after both passes
    expect(pipe.done).toBe(true);
    pipe.destroy();
    policy.destroy();
    reference.destroy();
  });
});

describe('runAtPass (what the heat and inspector show for a chosen pass)', () => {
  const f = (x: number) => Float32Array.of(x, x);
  const run = {
    loss: { importance_ratio: f(1), per_token_kl: f(0), per_token_loss: f(-1), clip: Uint32Array.of(0, 0), loss: -1, mean_kl: 0, token_weight: f(0.5), clip_counts: { low: 0, high: 0, delta_binding: 0, tokens: 2 } },
    step: { passes: [{ pass: 2, importance_ratio: f(1.3), per_token_kl: f(0.02), per_token_loss: f(-1.2), token_weight: f(0.25), clip: Uint32Array.of(2, 2), loss: -1.2, mean_kl: 0.02, clip_counts: { low: 0, high: 2, delta_binding: 0, tokens: 2 } }] },
  } as unknown as RunResults;

  it("puts pass 2's ratio, KL, loss, token weights and clip bits where the loss stage's were", () => {
    const r = runAtPass(run, 2).loss!;
    expect([r.importance_ratio[0], r.per_token_kl![0], r.per_token_loss[0], r.clip[0], r.loss, r.mean_kl, r.clip_counts.high]).toEqual([Math.fround(1.3), Math.fround(0.02), Math.fround(-1.2), 2, -1.2, 0.02, 2]);
    // A trainer's masks can drop other tokens on pass 2 (off-policy, rejection): its own weights, not pass 1's.
    expect(r.token_weight[0]).toBe(0.25);
    expect(run.loss!.importance_ratio[0]).toBe(1); // the run itself is left alone
  });

  it('is the run itself for pass 1 or a pass the update did not run', () => {
    expect(runAtPass(run, 1)).toBe(run);
    expect(runAtPass(run, 3)).toBe(run);
  });
});
