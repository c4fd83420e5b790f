// The step pipeline (src/grpo/step.ts) end to end on every golden tiny model (tests/golden/models,
// README there), from the model's batch.json: per-token log-probs, entropy, reference log-probs, KL,
// loss, every parameter's gradient as the pipeline leaves it (the loss's dlogp taken through the head
// chunk by chunk, unlike the model test's dlogits), the grad norm and its per-group split, and the post-step log-probs
// of one clipped AdamW step. The step itself is also checked in the README's two tight stages: AdamW on
// the golden gradients against post_step.param.*, and a forward of post_step.param.* against
// post_step.per_token_logps.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { padBatch } from '../../src/grpo/batch.ts';
import { Optimizer } from '../../src/grpo/optimizer.ts';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { StageData } from '../../src/grpo/step_types.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF32, toF64, type SafeTensors } from '../../src/io/safetensors.ts';
import { paramGroups } from '../../src/model/config.ts';
import { CausalLM } from '../../src/model/model.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { tally } from '../helpers/tally.ts';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';

const check = tally('step_golden');

function golden(m: string): { st: SafeTensors; batch: GrpoBatch } {
  return {
    st: parseSafeTensors(new Uint8Array(readFileSync(join(GOLDEN, m, 'golden.safetensors')))),
    batch: parseBatch(readFileSync(join(GOLDEN, m, 'batch.json'), 'utf8')),
  };
}

const load = async (dir: string) => CausalLM.from_pretrained(new FolderSource(dir), await testGpu());
const widest = (b: GrpoBatch) => Math.max(...b.completion_ids.map((r) => r.length));
const absMax = (a: Float64Array) => a.reduce((s, x) => Math.max(s, Math.abs(x)), 0);

describe.each(GOLDEN_MODELS)('%s', (m) => {
  it('pipeline from batch.json: forward, reference, loss, gradients, norms and post-step log-probs match', async () => {
    const gpu = await testGpu();
    const { st, batch } = golden(m);
    const policy = await load(join(GOLDEN, m));
    const reference = await load(join(GOLDEN, m, 'ref'));
    const config = stepConfigFromBatch(batch.config, widest(batch));
    const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch } });
    const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];

    // render / sample / reward do not apply to an imported batch, and say so.
    for (let i = 0; i < 3; i++) expect((await pipe.next()).skipped).toMatch(/imported batch/);
    while (pipe.nextStage !== 'step') await pipe.next();
    const mask = d('assemble').padded.completion_mask;
    // README: per-token log-probs and KL rtol 1e-4, atol 1e-5 where completion_mask = 1 (entropy: the same).
    const tok = { rtol: 1e-4, atol: 1e-5, mask };
    check(d('policy_forward').per_token_logps, toF64(st, 'per_token_logps'), { ...tok, label: `${m} per_token_logps`, key: 'per_token_logps' });
    check(d('policy_forward').per_token_entropy, toF64(st, 'per_token_entropy'), { ...tok, label: `${m} per_token_entropy`, key: 'per_token_entropy' });
    check(d('reference_forward').ref_per_token_logps!, toF64(st, 'ref_per_token_logps'), { ...tok, label: `${m} ref_per_token_logps`, key: 'ref_per_token_logps' });
    check(d('loss').per_token_kl!, toF64(st, 'per_token_kl'), { ...tok, label: `${m} per_token_kl`, key: 'per_token_kl' });
    check(d('loss').per_token_loss, toF64(st, 'per_token_loss'), { ...tok, label: `${m} per_token_loss`, key: 'per_token_loss' });
    // README: loss and grad_norm rtol 1e-4, atol 1e-6.
    check([d('loss').loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${m} loss`, key: 'loss' });
    check([d('loss').losses.grpo], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${m} losses.grpo`, key: 'loss' });
    check([d('backward').grad_norm], toF64(st, 'grad_norm'), { rtol: 1e-4, atol: 1e-6, label: `${m} grad_norm`, key: 'grad_norm' });

    // The gradients the optimizer is about to use. README: grad.<param> rtol 1e-4, atol 1e-5·gmax.
    const groupSq = new Map<string, number>();
    for (const [name, p] of policy.params) {
      const want = toF64(st, `grad.${name}`);
      check(await policy.readGrad(name), want, { rtol: 1e-4, atol: 1e-5 * absMax(want), label: `${m} grad.${name}`, key: 'grad.<param>' });
      groupSq.set(p.group, (groupSq.get(p.group) ?? 0) + want.reduce((s, x) => s + x * x, 0));
    }
    // Per-group norms from the golden float64 gradients; a group norm is a partial grad_norm, so the same tolerance.
    const groups = d('backward').group_grad_norms;
    expect(Object.keys(groups).sort()).toEqual([...paramGroups(policy.config).keys()].sort());
    for (const [g, sq] of groupSq) check([groups[g]], [Math.sqrt(sq)], { rtol: 1e-4, atol: 1e-6, label: `${m} group ${g}`, key: 'group_grad_norms' });

    await pipe.next(); // step
    check([d('step').clip_coef], toF64(st, 'grad_clip_coef'), { rtol: 1e-4, atol: 1e-6, label: `${m} clip_coef`, key: 'clip_coef' });
    await pipe.next(); // re_evaluate
    expect(pipe.done).toBe(true);
    // README: end-to-end post-step log-probs (own gradients, own step) rtol 1e-3, atol 0.002.
    check(d('re_evaluate').post_per_token_logps, toF64(st, 'post_step.per_token_logps'), { rtol: 1e-3, atol: 0.002, mask, label: `${m} post_step.per_token_logps`, key: 'post_step logps (end to end)' });
    // The update moved the log-probs: a step that did nothing would pass the loose tolerance only by luck, so
    // also require the change to follow the golden change (before → after) in direction on the biggest mover.
    const before = toF64(st, 'per_token_logps');
    const after = toF64(st, 'post_step.per_token_logps');
    let k = -1;
    for (let i = 0; i < mask.length; i++) if (mask[i] && (k < 0 || Math.abs(after[i] - before[i]) > Math.abs(after[k] - before[k]))) k = i;
    expect(Math.sign(d('re_evaluate').delta_per_token_logps[k])).toBe(Math.sign(after[k] - before[k]));

    for (const r of pipe.results) expect(r.gpuBytes, `${r.id} gpuBytes`).toBeGreaterThan(0);
    pipe.destroy();
    policy.destroy();
    reference.destroy();
  });

  it('AdamW on the golden gradients gives post_step.param.*, and their forward gives post_step.per_token_logps', async () => {
    const gpu = await testGpu();
    const { st, batch } = golden(m);
    const policy = await load(join(GOLDEN, m));
    const config = stepConfigFromBatch(batch.config, widest(batch));
    const grads = new Map([...policy.params.keys()].map((name) => [name, gpu.upload(`grad.${name}`, toF32(st, `grad.${name}`))]));
    const opt = new Optimizer(gpu, policy.params.values(), config.optimizer);
    const norms = await opt.gradNorms(grads);
    check([norms.grad_norm], toF64(st, 'grad_norm'), { rtol: 1e-4, atol: 1e-6, label: `${m} grad_norm of golden grads`, key: 'grad_norm' });
    await opt.step(grads, config.max_grad_norm); // the clip coefficient on the GPU, from gradNorms' sums
    const weights: Record<string, Float32Array> = {};
    for (const name of policy.params.keys()) {
      weights[name] = await policy.readParam(name);
      // README: post_step.param.<param> (AdamW applied to the golden grad.*) rtol 1e-6, atol 1e-6.
      check(weights[name], toF64(st, `post_step.param.${name}`), { rtol: 1e-6, atol: 1e-6, label: `${m} post_step.param.${name}`, key: 'post_step.param.<param>' });
    }
    // Stage two: the forward of the golden post-step weights. README: rtol 1e-4, atol 1e-5.
    const stepped = CausalLM.fromWeights(gpu, policy.config, Object.fromEntries([...policy.params.keys()].map((n) => [n, toF32(st, `post_step.param.${n}`)])));
    const padded = padBatch(batch);
    const rec = gpu.recorder('post-step forward');
    const s = score_completions(rec, stepped, padded);
    await rec.submit();
    check(await gpu.readF32(s.per_token_logps, padded.B * padded.C), toF64(st, 'post_step.per_token_logps'), {
      rtol: 1e-4, atol: 1e-5, mask: padded.completion_mask, label: `${m} forward(post_step.param)`, key: 'post_step logps (golden weights)',
    });
    s.destroy();
    stepped.destroy();
    opt.destroy();
    for (const g of grads.values()) g.destroy();
    policy.destroy();
  });
});
