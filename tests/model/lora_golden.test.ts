// PEFT LoRA against the float64 references in tests/golden/lora (README there, "LoRA adapters"): for every
// case, the float64 twin (src/oracle/model.ts with the adapter) reproduces the golden logits with and without
// the adapter and the adapter gradients through TRL's loss; the GPU step pipeline (policy = base + adapter,
// reference = adapter disabled) gives the per-token log-probs, KL, loss, adapter gradients, grad norm and
// end-to-end post-step log-probs, and leaves the base weights untouched; AdamW on the golden gradients gives
// post_step.*, and a forward with post_step.* gives post_step.per_token_logps (the README's two stages).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { padBatch, type PaddedBatch } from '../../src/grpo/batch.ts';
import { Optimizer } from '../../src/grpo/optimizer.ts';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { StageData } from '../../src/grpo/step_types.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF32, toF64, type SafeTensors } from '../../src/io/safetensors.ts';
import { loadCheckpoint } from '../../src/model/loader.ts';
import { loadLoraAdapter, loraKey, type LoraWeights } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import { CausalLM } from '../../src/model/model.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { grpo_loss_backward, grpo_loss_forward } from '../../src/oracle/grpo_loss.ts';
import { kl_forward } from '../../src/oracle/kl.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';
import { loss_weights } from '../../src/oracle/loss_reduce.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';
import { tally } from '../helpers/tally.ts';

const LORA = join(GOLDEN_ROOT, 'lora');
const CASES = ['llama-gqa-all-proj-r4', 'qwen2-qv-r2-rslora', 'qwen3-all-linear-r3', 'gpt2-cattn-cproj-r2'];
const check = tally('lora_golden');
const absMax = (a: ArrayLike<number>) => Array.from(a).reduce((s, x) => Math.max(s, Math.abs(x)), 0);

interface Case {
  st: SafeTensors;
  batch: GrpoBatch;
  padded: PaddedBatch;
  model: CausalLM;
  weights: LoraWeights;
}

async function load(c: string): Promise<Case> {
  const gpu = await testGpu();
  const batch = parseBatch(readFileSync(join(LORA, c, 'batch.json'), 'utf8'));
  const model = await CausalLM.from_pretrained(new FolderSource(join(LORA, c, 'model')), gpu);
  return {
    st: parseSafeTensors(new Uint8Array(readFileSync(join(LORA, c, 'golden.safetensors')))),
    batch,
    padded: padBatch(batch),
    model,
    weights: await loadLoraAdapter(new FolderSource(join(LORA, c, 'adapter')), model.config),
  };
}

const keys = (w: LoraWeights) => w.modules.flatMap((m) => [loraKey(m.name, 'A'), loraKey(m.name, 'B')]);

describe.each(CASES)('%s', (c) => {
  it('the adapter is read as PEFT does: the modules, scaling and rank of the golden metadata', async () => {
    const { st, weights, model } = await load(c);
    const meta = JSON.parse(st.metadata.lora);
    expect(weights.modules.map((m) => m.name).sort()).toEqual([...meta.modules].sort());
    expect(weights.config.r).toBe(meta.r);
    check([weights.config.scaling], toF64(st, 'scaling'), { rtol: 1e-15, atol: 0, label: `${c} scaling` });
    model.destroy();
  });

  it('float64 twin: logits with and without the adapter, adapter gradients through the TRL loss', async () => {
    const { st, batch, padded: p, model, weights } = await load(c);
    model.destroy();
    const base = new Map<string, Float64Array>();
    const info = await loadCheckpoint(new FolderSource(join(LORA, c, 'model')), (spec, data) => void base.set(spec.name, Float64Array.from(data)));
    const policy = new RefModel(info.config, base, weights);
    const reference = new RefModel(info.config, base);
    const x = { B: p.B, T: p.L, input_ids: p.input_ids, attention_mask: p.attention_mask, position_ids: p.position_ids };
    const V = info.config.vocab_size;
    const real = Int32Array.from({ length: p.B * p.L * V }, (_, i) => p.attention_mask[Math.floor(i / V)]);
    // README: logits rtol 1e-4, atol 1e-4 where attention_mask = 1 (the golden logits are stored as F32).
    check(policy.forward(x).logits, toF32(st, 'logits'), { rtol: 1e-4, atol: 1e-4, mask: real, label: `${c} twin logits`, key: 'twin logits' });
    check(reference.forward(x).logits, toF32(st, 'ref_logits'), { rtol: 1e-4, atol: 1e-4, mask: real, label: `${c} twin ref_logits`, key: 'twin logits' });

    // TRL's loss in float64 on the completion logits, then the adapter's gradients.
    const cfg = stepConfigFromBatch(batch.config, p.C).loss;
    const f = policy.forward(x, { logits_to_keep: p.C });
    const M = p.completion_mask;
    const N = p.B * p.C;
    const g = logprob_gather_forward(f.logits, p.completion_ids, null, N, V, cfg.temperature);
    const ref = logprob_gather_forward(reference.forward(x, { logits_to_keep: p.C }).logits, p.completion_ids, null, N, V, cfg.temperature).logp;
    const tight = { rtol: 1e-8, atol: 1e-10, mask: M };
    check(g.logp, toF64(st, 'per_token_logps'), { ...tight, label: `${c} twin per_token_logps`, key: 'twin per-token' });
    check(ref, toF64(st, 'ref_per_token_logps'), { ...tight, label: `${c} twin ref_per_token_logps`, key: 'twin per-token' });
    const kl = kl_forward(g.logp, ref, cfg.kl_estimator);
    const adv = Float64Array.from(batch.advantages!);
    const fw = grpo_loss_forward(g.logp, p.old_per_token_logps!, kl, adv, M, p.B, p.C, cfg);
    const dlogp = grpo_loss_backward(g.logp, ref, adv, M, fw.ratio, loss_weights(M, p.B, p.C, cfg.loss_type, cfg), p.B, p.C, cfg);
    const grads = policy.backward(f, logprob_gather_backward(f.logits, p.completion_ids, M, g.lse, dlogp, N, V, cfg.temperature));
    // Same float32 inputs in float64 arithmetic: agreement far inside the GPU tolerance (rtol 1e-4, atol 1e-5·gmax).
    for (const k of keys(weights)) {
      const want = toF64(st, `grad.${k}`);
      check(grads.get(k)!, want, { rtol: 1e-7, atol: 1e-9 * absMax(want), label: `${c} twin grad.${k}`, key: 'twin grad' });
    }
  });

  it('GPU step: log-probs, reference (adapter off), KL, loss, adapter gradients, grad norm, post-step log-probs; base frozen', async () => {
    const gpu = await testGpu();
    const { st, batch, model, weights } = await load(c);
    const adapter = LoraAdapter.fromWeights(gpu, weights);
    model.adapter = adapter;
    const reference = model.withAdapter(null);
    const config = stepConfigFromBatch(batch.config, Math.max(...batch.completion_ids.map((r) => r.length)));
    const pipe = new StepPipeline(gpu, { policy: model, reference, config, source: { kind: 'batch', batch } });
    const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
    const someBase = [...model.params.keys()].find((n) => /q_proj\.weight|c_attn\.weight/.test(n))!;
    const baseBefore = await model.readParam(someBase);
    while (pipe.nextStage !== 'step') await pipe.next();

    const mask = d('assemble').padded.completion_mask;
    // README: per-token log-probs and KL rtol 1e-4, atol 1e-5 where completion_mask = 1.
    const tok = { rtol: 1e-4, atol: 1e-5, mask };
    check(d('policy_forward').per_token_logps, toF64(st, 'per_token_logps'), { ...tok, label: `${c} per_token_logps`, key: 'per_token_logps' });
    check(d('policy_forward').per_token_entropy, toF64(st, 'per_token_entropy'), { ...tok, label: `${c} per_token_entropy`, key: 'per_token_entropy' });
    check(d('reference_forward').ref_per_token_logps!, toF64(st, 'ref_per_token_logps'), { ...tok, label: `${c} ref_per_token_logps`, key: 'ref_per_token_logps' });
    check(d('loss').per_token_kl!, toF64(st, 'per_token_kl'), { ...tok, label: `${c} per_token_kl`, key: 'per_token_kl' });
    // README: loss and grad_norm rtol 1e-4, atol 1e-6; the norm is over the adapter gradients only.
    check([d('loss').loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${c} loss`, key: 'loss' });
    check([d('backward').grad_norm], toF64(st, 'grad_norm'), { rtol: 1e-4, atol: 1e-6, label: `${c} grad_norm`, key: 'grad_norm' });
    // README: grad.<PEFT key> rtol 1e-4, atol 1e-5·gmax.
    expect([...adapter.grads!.keys()].sort()).toEqual(keys(weights).sort());
    for (const k of keys(weights)) {
      const want = toF64(st, `grad.${k}`);
      check(await gpu.readF32(adapter.grads!.get(k)!, want.length), want, { rtol: 1e-4, atol: 1e-5 * absMax(want), label: `${c} grad.${k}`, key: 'grad.<PEFT key>' });
    }

    await pipe.next(); // step
    check([d('step').clip_coef], toF64(st, 'grad_clip_coef'), { rtol: 1e-4, atol: 1e-6, label: `${c} clip_coef`, key: 'clip_coef' });
    await pipe.next(); // re_evaluate
    // README: end-to-end post-step log-probs rtol 1e-3, atol 0.002; and the step moved them the golden way.
    const after = toF64(st, 'post_step.per_token_logps');
    const before = toF64(st, 'per_token_logps');
    check(d('re_evaluate').post_per_token_logps, after, { rtol: 1e-3, atol: 0.002, mask, label: `${c} post_step.per_token_logps`, key: 'post_step logps (end to end)' });
    let k = -1;
    for (let i = 0; i < mask.length; i++) if (mask[i] && (k < 0 || Math.abs(after[i] - before[i]) > Math.abs(after[k] - before[k]))) k = i;
    expect(Math.sign(d('re_evaluate').delta_per_token_logps[k])).toBe(Math.sign(after[k] - before[k]));
    // Only the adapter trains: the base weight is bit-identical after the step.
    expect(await model.readParam(someBase)).toEqual(baseBefore);

    pipe.destroy();
    reference.destroy();
    model.destroy();
    adapter.destroy();
  });

  it('AdamW on the golden gradients gives post_step.*, and their forward gives post_step.per_token_logps', async () => {
    const gpu = await testGpu();
    const { st, batch, padded, model, weights } = await load(c);
    const adapter = LoraAdapter.fromWeights(gpu, weights);
    const config = stepConfigFromBatch(batch.config, padded.C);
    const grads = new Map(keys(weights).map((k) => [k, gpu.upload(`grad.${k}`, toF32(st, `grad.${k}`))]));
    const opt = new Optimizer(gpu, adapter.params.values(), config.optimizer);
    const norms = await opt.gradNorms(grads);
    check([norms.grad_norm], toF64(st, 'grad_norm'), { rtol: 1e-4, atol: 1e-6, label: `${c} grad_norm of golden grads`, key: 'grad_norm' });
    await opt.step(grads, config.max_grad_norm); // the clip coefficient on the GPU, from gradNorms' sums
    // README: post_step.<PEFT key> rtol 1e-6, atol 1e-6.
    for (const m of (await adapter.read()).modules) {
      check(m.A, toF64(st, `post_step.${loraKey(m.name, 'A')}`), { rtol: 1e-6, atol: 1e-6, label: `${c} post_step A ${m.name}`, key: 'post_step.<PEFT key>' });
      check(m.B, toF64(st, `post_step.${loraKey(m.name, 'B')}`), { rtol: 1e-6, atol: 1e-6, label: `${c} post_step B ${m.name}`, key: 'post_step.<PEFT key>' });
    }
    // Stage two: the golden post-step adapter on the base. README: rtol 1e-4, atol 1e-5.
    const stepped = LoraAdapter.fromWeights(gpu, {
      config: weights.config,
      modules: weights.modules.map((m) => ({ ...m, A: toF32(st, `post_step.${loraKey(m.name, 'A')}`), B: toF32(st, `post_step.${loraKey(m.name, 'B')}`) })),
    });
    model.adapter = stepped;
    const rec = gpu.recorder('post-step forward');
    const s = score_completions(rec, model, padded);
    await rec.submit();
    check(await gpu.readF32(s.per_token_logps, padded.B * padded.C), toF64(st, 'post_step.per_token_logps'), {
      rtol: 1e-4, atol: 1e-5, mask: padded.completion_mask, label: `${c} forward(post_step.*)`, key: 'post_step logps (golden adapter)',
    });
    s.destroy();
    opt.destroy();
    for (const g of grads.values()) g.destroy();
    model.destroy();
    adapter.destroy();
    stepped.destroy();
  });
});
