// The frozen-copy reference for real (issue 15): a GPU snapshot of the weights as loaded
// (CausalLM.snapshot), reused by two successive updates of the same policy with β > 0, as the studio
// runs them when it continues from the stepped weights (TRL: the policy keeps training, ref_model stays
// the initial model). The first update equals today's (reference null: the policy's own pre-step
// log-probs, KL 0) and the golden log-probs; the second update's KL before its step is non-zero and
// equals the KL between the stepped weights and a separately loaded copy of the checkpoint, computed by
// the float64 KL twin. Also: the reference stage names its reference, 'loaded' restores the weights, and
// an optimizer carried across updates steps as torch's next AdamW step (the float64 twin over both).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { StageData, StepPipelineOptions } from '../../src/grpo/step_types.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF64 } from '../../src/io/safetensors.ts';
import { CausalLM } from '../../src/model/model.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { kl_forward } from '../../src/oracle/kl.ts';
import { adamw_step } from '../../src/oracle/optimizer.ts';
import { Optimizer } from '../../src/grpo/optimizer.ts';
import { numel } from '../../src/model/config.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';

const M = 'tiny-llama';
const dir = join(GOLDEN, M);
const batch = parseBatch(readFileSync(join(dir, 'batch.json'), 'utf8'));
const golden = parseSafeTensors(new Uint8Array(readFileSync(join(dir, 'golden.safetensors'))));
const C = Math.max(...batch.completion_ids.map((r) => r.length));
const config = stepConfigFromBatch(batch.config, C);
const load = async () => CausalLM.from_pretrained(new FolderSource(dir), await testGpu());
// README (tests/golden/models): per-token log-probs and KL rtol 1e-4, atol 1e-5 where completion_mask = 1.
const TOK = { rtol: 1e-4, atol: 1e-5 };

async function update(opts: Omit<StepPipelineOptions, 'config' | 'source'>) {
  const pipe = new StepPipeline(await testGpu(), { ...opts, config, source: { kind: 'batch', batch } });
  await pipe.runToEnd();
  const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
  return { pipe, d };
}

describe(`frozen-copy reference over successive updates (${M})`, () => {
  it('the second update sees KL > 0 before its step, equal to KL(stepped ‖ loaded) scored independently', async () => {
    expect(config.loss.beta).toBeGreaterThan(0);
    const gpu = await testGpu();
    const policy = await load();
    const frozen = await policy.snapshot();
    const today = await load(); // today's frozen copy: reference null, the policy's own pre-step log-probs
    const copy = await load(); // the loaded checkpoint, scored on its own
    try {
      const first = await update({ policy, reference: frozen, reference_source: { kind: 'frozen-copy' } });
      const base = await update({ policy: today, reference: null });
      const mask = first.d('assemble').padded.completion_mask;
      expect(first.d('reference_forward').reference_label).toBe('frozen-copy of the loaded weights');
      expect(base.d('reference_forward').reference_label).toBe('frozen-copy of the loaded weights');
      // First update: the golden log-probs, KL 0 before the step, and today's numbers.
      expectClose(first.d('policy_forward').per_token_logps, toF64(golden, 'per_token_logps'), { ...TOK, mask, label: 'first update per_token_logps vs golden' });
      expectClose(first.d('loss').per_token_kl!, new Float64Array(mask.length), { rtol: 0, atol: 1e-6, mask, label: 'first update KL before the step' });
      expectClose([first.d('loss').loss, first.d('backward').grad_norm], [base.d('loss').loss, base.d('backward').grad_norm], { rtol: 1e-5, atol: 1e-7, label: 'first update loss, grad_norm vs today' });
      expectClose(first.d('re_evaluate').post_per_token_logps, base.d('re_evaluate').post_per_token_logps, { ...TOK, mask, label: 'first update post-step log-probs vs today' });
      const afterFirst = first.d('re_evaluate').post_per_token_kl!;
      const firstLp = first.d('policy_forward').per_token_logps;
      first.pipe.destroy();
      base.pipe.destroy();

      // Second update from the stepped weights, same batch, same snapshot as reference.
      const second = await update({ policy, reference: frozen, reference_source: { kind: 'frozen-copy' } });
      const { padded } = second.d('assemble');
      const rec = gpu.recorder('independent reference');
      const s = score_completions(rec, copy, padded, { temperature: config.loss.temperature });
      await rec.finish();
      const refLp = await gpu.readF32(s.per_token_logps, padded.B * padded.C);
      s.destroy();
      const lp = second.d('policy_forward').per_token_logps;
      const kl = kl_forward(lp, refLp, config.loss.kl_estimator);
      expectClose(second.d('reference_forward').ref_per_token_logps!, refLp, { ...TOK, mask, label: 'second update ref log-probs vs the loaded checkpoint' });
      expectClose(second.d('loss').per_token_kl!, kl, { ...TOK, mask, label: 'second update KL before the step vs KL(stepped ‖ loaded)' });
      // The same weights as the first update's re-evaluation: the KL it showed after the step is this one.
      expectClose(second.d('loss').per_token_kl!, afterFirst, { ...TOK, mask, label: 'second update KL vs first update post-step KL' });
      let maxKl = 0;
      mask.forEach((m, i) => m && (maxKl = Math.max(maxKl, kl[i])));
      expect(maxKl).toBeGreaterThan(1e-3);
      // β is visible: the β·KL term of the loss is non-zero.
      expect(Math.abs(second.d('loss').kl_term)).toBeGreaterThan(1e-6);
      second.pipe.destroy();

      // Back to the weights as loaded: the policy scores the batch exactly as the separate copy does.
      await policy.loadWeightsFrom(frozen);
      const again = await update({ policy, reference: frozen, reference_source: { kind: 'frozen-copy' } });
      expect(again.d('policy_forward').per_token_logps).toEqual(firstLp);
      again.pipe.destroy();
    } finally {
      for (const m of [policy, frozen, today, copy]) m.destroy();
    }
  });

  it("a carried optimizer: the second update is AdamW step 2 from the first's moments (float64 twin over both steps)", async () => {
    const gpu = await testGpu();
    const policy = await load();
    const frozen = await policy.snapshot();
    const params = [...policy.trainableParams.values()];
    const read = async () => Promise.all(params.map(async (p) => Float64Array.from(await gpu.readF32(p.buffer, numel(p.shape)))));
    const optimizer = new Optimizer(gpu, params, config.optimizer);
    try {
      const theta = await read();
      const m = theta.map((t) => new Float64Array(t.length));
      const v = theta.map((t) => new Float64Array(t.length));
      const o = config.optimizer;
      for (const step of [1, 2]) {
        const u = await update({ policy, reference: frozen, optimizer });
        expect(u.d('step').step).toBe(step);
        // The gradients this update computed (still in policy.grads after its step), replayed by the twin.
        const grads = await Promise.all(params.map((p) => gpu.readF32(policy.grads!.get(p.name)!, numel(p.shape))));
        const gradScale = u.d('step').clip_coef;
        theta.forEach((t, i) => adamw_step(t, grads[i], m[i], v[i], { lr: o.lr, beta1: o.betas[0], beta2: o.betas[1], eps: o.eps, weightDecay: o.weight_decay, step, gradScale }));
        u.pipe.destroy();
      }
      const got = await read();
      // tests/golden README: AdamW weights rtol 1e-6, atol 1e-6.
      params.forEach((p, i) => expectClose(got[i], theta[i], { rtol: 1e-6, atol: 1e-6, label: `${p.name} after two carried steps` }));
    } finally {
      optimizer.destroy();
      policy.destroy();
      frozen.destroy();
    }
  });

  it('names a second checkpoint as reference and scores with it', async () => {
    const policy = await load();
    const ref = await CausalLM.from_pretrained(new FolderSource(join(dir, 'ref')), await testGpu());
    try {
      const named = await update({ policy, reference: ref, reference_source: { kind: 'model', name: 'ref' } });
      expect(named.d('reference_forward').reference).toBe('model');
      expect(named.d('reference_forward').reference_label).toBe('model ref');
      // The golden reference checkpoint's log-probs (README tolerances).
      expectClose(named.d('reference_forward').ref_per_token_logps!, toF64(golden, 'ref_per_token_logps'), { ...TOK, mask: named.d('assemble').padded.completion_mask, label: 'second checkpoint ref log-probs' });
      named.pipe.destroy();
    } finally {
      policy.destroy();
      ref.destroy();
    }
  });
});
