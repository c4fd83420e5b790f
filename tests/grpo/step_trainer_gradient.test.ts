// The step's gradient follows the trainer preset (StepConfig.trainer, src/grpo/step_objective.ts): on a golden
// tiny model's batch, for a verl preset (vanilla dual-clip PPO, seq-mean-token-sum-norm, low_var_kl KL loss,
// entropy bonus), an OpenRLHF preset (dual clip, k2 KL loss, asymmetric clip) and a non-default TRL preset
// (sapo over two processes and two accumulation steps), the pipeline's loss, every parameter gradient and the
// grad norm equal an independent chain: the step's own logits (a full-logits forward of the same weights,
// read back here) → the float64 twins of the trainer objective (src/oracle/: logprob_gather, ppo_loss / trl_loss)
// → dlogits → the model's backward fed those dlogits (no per-token dlogp, no chunked head). The gradients must
// also differ from the studio loss's (the golden grad.<param>), so a step that ignored the preset fails.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch, studioLossHolds } from '../../src/grpo/step_config.ts';
import { objectiveFor, type TrainerObjective } from '../../src/grpo/step_objective.ts';
import type { StageData } from '../../src/grpo/step_types.ts';
import { openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';
import { verlObjective } from '../../src/grpo/trainers/verl.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF32, toF64, toI32 } from '../../src/io/safetensors.ts';
import { CausalLM } from '../../src/model/model.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { trlTwinChain } from '../helpers/trl_twin.ts';

type F64 = Float64Array;

/** The float64 twin chain of `c`'s trainer objective: its loss and dlogits (B, T, V). */
async function twinChain(c: TrainerLossCase): Promise<{ loss: number; dlogits: F64 }> {
  if (c.trainer === 'verl' || c.trainer === 'openrlhf') {
    const r = await (c.trainer === 'verl' ? verlObjective : openrlhfObjective)(twinBackend(c), c, { backward: true });
    return { loss: r.loss, dlogits: r.dlogits as F64 };
  }
  const { f, dlogits } = trlTwinChain(c);
  return { loss: f.loss, dlogits };
}

// tiny-qwen2's batch: exp(logp − old) spans [0.77, 1.38] on its 22 completion tokens (9 outside the clip ranges
// below) and half the rows have A < 0, so the clips, the dual clip at 1.1 and the KL terms all bind.
const M = 'tiny-qwen2';
const PRESETS: TrainerObjective[] = [
  {
    trainer: 'verl',
    config: {
      loss_mode: 'vanilla', clip_ratio_c: 1.1, loss_agg_mode: 'seq-mean-token-sum-norm', use_kl_loss: true, kl_loss_type: 'low_var_kl', kl_loss_coef: 0.1,
      entropy_coeff: 0.05, ppo_mini_batch_size: 0, ppo_micro_batch_size_per_gpu: 0, rollout_is: null,
    },
    run: {},
  },
  {
    trainer: 'openrlhf',
    config: { 'actor.policy_loss_type': 'ppo', 'actor.eps_clip_low_high': [0.1, 0.15], 'actor.dual_clip': 1.1, 'algo.kl.use_loss': true, 'algo.kl.init_coef': 0.05, 'algo.kl.estimator': 'k2' },
    run: {},
  },
  // steps_per_generation 1: with gradient_accumulation_steps 2 and none given, GRPOConfig would split the batch in two.
  { trainer: 'trl', config: { loss_type: 'sapo', beta: 0.04, epsilon: 0.2, epsilon_high: 0.28, steps_per_generation: 1 }, run: { num_processes: 2, gradient_accumulation_steps: 2 } },
];

describe(`${M}: the step's gradient is the trainer preset's`, () => {
  const st = parseSafeTensors(new Uint8Array(readFileSync(join(GOLDEN, M, 'golden.safetensors'))));
  const batch = parseBatch(readFileSync(join(GOLDEN, M, 'batch.json'), 'utf8'));
  const [B, L] = st.tensors.get('input_ids')!.shape;
  const P = toI32(st, 'prompt_length')[0];
  const C = L - P;

  for (const preset of PRESETS) {
    it(`${preset.trainer} ${JSON.stringify(preset.config).slice(0, 80)}: loss, gradients and grad norm match the float64 twin chain`, async () => {
      const gpu = await testGpu();
      const policy = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, M)), gpu);
      const reference = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, M, 'ref')), gpu);
      // verl's mini / micro batch sizes are the whole batch: one micro-batch, as the step.
      const objective = preset.trainer === 'verl' ? { ...preset, config: { ...preset.config, ppo_mini_batch_size: B, ppo_micro_batch_size_per_gpu: B } } : preset;
      const config = { ...stepConfigFromBatch(batch.config, C), trainer: objective };
      const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch } });
      while (pipe.nextStage !== 'step') await pipe.next();
      const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
      expect(d('loss').objective).toEqual(objective);
      expect(d('loss').objective_error).toBeNull();
      const stepGrads = new Map<string, Float32Array>();
      for (const name of policy.params.keys()) stepGrads.set(name, await policy.readGrad(name));

      // The step's own logits: the same weights, a forward that keeps every completion row's logits.
      const rec = gpu.recorder('chain');
      const f = policy.forward(rec, { B, T: L, input_ids: toI32(st, 'input_ids'), attention_mask: toI32(st, 'attention_mask'), position_ids: toI32(st, 'position_ids') }, { logits_to_keep: C, save: true });
      await rec.submit();
      const V = f.V;
      const logits = await gpu.readF32(f.logits, B * C * V);
      const p = d('assemble').padded;
      const rowAdv = toF32(st, 'advantages');
      const c: TrainerLossCase = {
        ...objective, B, T: C, V, logits,
        completion_ids: p.completion_ids, completion_mask: p.completion_mask, tool_mask: null,
        advantages: preset.trainer === 'trl' ? rowAdv : Float32Array.from({ length: B * C }, (_, i) => rowAdv[Math.floor(i / C)]),
        old_per_token_logps: toF32(st, 'old_per_token_logps'),
        ref_per_token_logps: toF32(st, 'ref_per_token_logps'),
        sampling_per_token_logps: null,
        sequence_lengths: null,
      };
      const chain = await twinChain(c);
      expectClose([d('loss').loss], [chain.loss], { rtol: 1e-4, atol: 1e-6, label: `${preset.trainer} loss` });

      const rec2 = gpu.recorder('chain_backward');
      policy.backward(rec2, gpu.upload('dlogits', Float32Array.from(chain.dlogits)));
      await rec2.submit();
      let sumsq = 0;
      let studioGap = 0;
      for (const [name, got] of stepGrads) {
        const want = await policy.readGrad(name);
        for (const x of want) sumsq += x * x;
        const gmax = want.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        expectClose(got, want, { rtol: 1e-4, atol: 1e-5 * gmax, label: `${preset.trainer} grad.${name}` });
        const studio = toF64(st, `grad.${name}`);
        studioGap = Math.max(studioGap, ...Array.from(got, (x, i) => Math.abs(x - studio[i]) / (gmax + 1e-12)));
      }
      expectClose([d('backward').grad_norm], [Math.sqrt(sumsq)], { rtol: 1e-4, atol: 1e-6, label: `${preset.trainer} grad_norm` });
      // Not the studio loss's gradient: the preset changed the update.
      expect(studioGap).toBeGreaterThan(1e-2);
      policy.destroy();
      reference.destroy();
    }, 300_000);
  }

  it('TRL steps_per_generation > 1: the loss names it (NaN) and the backward refuses, never another split', async () => {
    const gpu = await testGpu();
    const policy = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, M)), gpu);
    // Set, or unset with gradient_accumulation_steps > 1 (GRPOConfig.__post_init__ then sets it to that).
    for (const [run, named] of [
      [{ steps_per_generation: 2, gradient_accumulation_steps: 2 }, 'run.steps_per_generation = 2'],
      [{ gradient_accumulation_steps: 3 }, 'config.steps_per_generation (unset: GRPOConfig takes run.gradient_accumulation_steps = 3)'],
    ] as const) {
      const trainer: TrainerObjective = { trainer: 'trl', config: { loss_type: 'bnpo' }, run: { ...run } };
      const pipe = new StepPipeline(gpu, { policy, reference: null, config: { ...stepConfigFromBatch(batch.config, C), trainer }, source: { kind: 'batch', batch } });
      while (pipe.nextStage !== 'backward') await pipe.next();
      const l = pipe.data('loss')!;
      expect(l.objective_error?.startsWith(`${named}: `), l.objective_error ?? '').toBe(true);
      expect(l.loss).toBeNaN();
      await expect(pipe.next()).rejects.toThrow(named);
      pipe.destroy();
    }
    policy.destroy();
  }, 300_000);
});

describe('which objective a step follows (objectiveFor)', () => {
  const studio = studioLossHolds;
  it.each([
    ['TRL, only fields the studio loss carries', 'trl', { loss_type: 'grpo', beta: 0.04, epsilon: 0.2 }, {}, false],
    ['TRL, run context at its defaults', 'trl', {}, { num_processes: 1, gradient_accumulation_steps: 1, num_items_in_batch: null }, false],
    ['TRL, a sampling setting (no effect on the loss)', 'trl', { num_generations: 8 }, {}, false],
    ['TRL, a loss setting the studio loss does not apply', 'trl', { mask_truncated_completions: true }, {}, true],
    ['TRL, two processes', 'trl', {}, { num_processes: 2 }, true],
    ['TRL, steps_per_generation in config', 'trl', { steps_per_generation: 4 }, {}, true],
    ['TRL, steps_per_generation unset with gradient_accumulation_steps 4 (GRPOConfig sets it to 4)', 'trl', {}, { gradient_accumulation_steps: 4 }, true],
    ['TRL, gradient_accumulation_steps 4 with steps_per_generation 1', 'trl', { steps_per_generation: 1 }, { gradient_accumulation_steps: 4 }, true],
    ['TRL, a key its tables do not know', 'trl', { not_a_trl_field: 1 }, {}, true],
    ['verl at its defaults', 'verl', {}, {}, true],
    ['OpenRLHF at its defaults', 'openrlhf', {}, {}, true],
  ] as const)('%s', (_what, trainer, config, run, isTrainer) => {
    const o = objectiveFor(trainer, { ...config }, { ...run }, studio);
    expect(o).toEqual(isTrainer ? { trainer, config, run } : null);
  });
});
