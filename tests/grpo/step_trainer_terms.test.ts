// Under a trainer preset every number the loss stage shows is the trainer's, not the studio loss's: on a golden
// tiny model's batch, for TRL (vLLM IS token_truncate over two processes and two accumulation steps), verl (rollout_rs
// token rejection, low_var_kl KL loss with the reference 15 nats away: its ±10 clamp binds) and OpenRLHF (k3 KL loss,
// the same far reference: compute_approx_kl's ±10 clamp), the step's per_token_loss and per_token_kl equal the
// trainer objective's own on the same batch, computed independently: the step's own logits (a full-logits forward
// of the same weights) → the float64 twins of the trainer objective (src/oracle/). Σ per_token_loss · token_weight
// (+ the KL term where the trainer aggregates it apart) is the loss, mean_kl is the trainer's KL's mean, and the
// losses table's entry for the trainer's aggregation is the loss itself; under TRL every loss type in it is TRL's
// own loss for that type (its run scalings in), checked against the twin chain.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { TrainerObjective } from '../../src/grpo/step_objective.ts';
import type { StageData } from '../../src/grpo/step_types.ts';
import { openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';
import { verlObjective, verlStepRun } from '../../src/grpo/trainers/verl.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toI32 } from '../../src/io/safetensors.ts';
import { CausalLM } from '../../src/model/model.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { trlTwinChain } from '../helpers/trl_twin.ts';

const M = 'tiny-qwen2';
const B_ROWS = 6;

/** The twin chain's per-token loss and KL (null: none) and loss for case `c`. */
async function twin(c: TrainerLossCase): Promise<{ loss: number; per_token_loss: ArrayLike<number>; per_token_kl: ArrayLike<number> | null }> {
  if (c.trainer === 'trl') {
    const { f } = trlTwinChain(c);
    return { loss: f.loss, per_token_loss: f.per_token_loss, per_token_kl: f.per_token_kl ?? null };
  }
  const r = await (c.trainer === 'verl' ? verlObjective : openrlhfObjective)(twinBackend(c), c, { backward: false });
  return { loss: r.loss, per_token_loss: r.per_token_loss!, per_token_kl: r.per_token_kl };
}

// ref: how far (nats, alternating sign) the batch's reference log-probs lie from its old ones.
const PRESETS: Array<{ name: string; o: TrainerObjective; ref: number }> = [
  {
    name: 'TRL vLLM IS token_truncate, 2 processes × 2 accumulation steps, dapo',
    o: { trainer: 'trl', config: { loss_type: 'dapo', beta: 0.04, use_vllm: true, vllm_importance_sampling_correction: true, vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: 1.2, steps_per_generation: 1 }, run: { num_processes: 2, gradient_accumulation_steps: 2, num_items_in_batch: 40 } },
    ref: 0.5,
  },
  {
    name: 'TRL the same, grpo',
    o: { trainer: 'trl', config: { loss_type: 'grpo', beta: 0.04, use_vllm: true, vllm_importance_sampling_correction: true, vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: 1.2, steps_per_generation: 1 }, run: { num_processes: 2, gradient_accumulation_steps: 2, num_items_in_batch: 40 } },
    ref: 0.5,
  },
  {
    name: 'verl rollout_rs token_k1 rejection, low_var_kl clamped',
    o: { trainer: 'verl', config: { loss_mode: 'vanilla', use_kl_loss: true, kl_loss_type: 'low_var_kl', kl_loss_coef: 0.1, rollout_is: null, rollout_rs: 'token_k1', rollout_rs_threshold: '0.8_1.25', ppo_mini_batch_size: B_ROWS, ppo_micro_batch_size_per_gpu: B_ROWS }, run: {} },
    ref: 15,
  },
  {
    name: 'OpenRLHF k3 KL loss clamped',
    o: { trainer: 'openrlhf', config: { 'algo.kl.use_loss': true, 'algo.kl.estimator': 'k3', 'algo.kl.init_coef': 0.05 }, run: {} },
    ref: 15,
  },
];

describe(`${M}: the loss stage's per-token terms are the trainer objective's`, () => {
  const st = parseSafeTensors(new Uint8Array(readFileSync(join(GOLDEN, M, 'golden.safetensors'))));
  const [B, L] = st.tensors.get('input_ids')!.shape;
  const P = toI32(st, 'prompt_length')[0];
  const C = L - P;
  expect(B).toBe(B_ROWS);

  for (const { name, o, ref } of PRESETS) {
    it(name, async () => {
      const batch = parseBatch(readFileSync(join(GOLDEN, M, 'batch.json'), 'utf8'));
      const old = batch.old_per_token_logps!;
      // Rollout log-probs exp(old − sampling) ∈ {e^−0.3, 1, e^0.3}: TRL's truncation at 1.2 and verl's rejection outside [0.8, 1.25] bind.
      batch.sampling_per_token_logps = old.map((row, b) => row.map((x, t) => x - 0.3 * (((b + t) % 3) - 1)));
      // verl / OpenRLHF: a reference 15 nats away, so the k3 estimators' ±10 clamps bind (unclamped k3 would be ~3e6).
      batch.ref_per_token_logps = old.map((row, b) => row.map((x, t) => x + ((b + t) % 2 ? ref : -ref)));
      const gpu = await testGpu();
      const policy = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, M)), gpu);
      const config = { ...stepConfigFromBatch(batch.config, C), trainer: o };
      const pipe = new StepPipeline(gpu, { policy, reference: null, config, source: { kind: 'batch', batch } });
      while (pipe.nextStage !== 'backward') await pipe.next();
      const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
      const l = d('loss');
      expect(l.objective_error).toBeNull();
      const p = d('assemble').padded;

      // The independent chain: the same weights' full logits → the trainer objective's float64 twins.
      const rec = gpu.recorder('chain');
      const f = policy.forward(rec, { B, T: L, input_ids: toI32(st, 'input_ids'), attention_mask: toI32(st, 'attention_mask'), position_ids: toI32(st, 'position_ids') }, { logits_to_keep: C, save: false });
      await rec.submit();
      const V = f.V;
      const logits = await gpu.readF32(f.logits, B * C * V);
      const rowAdv = Float32Array.from(d('advantages').advantages);
      const c: TrainerLossCase = {
        ...o, run: o.trainer === 'verl' ? verlStepRun(o.config, o.run, B) : o.run, B, T: C, V, logits,
        completion_ids: p.completion_ids, completion_mask: p.completion_mask, tool_mask: null,
        advantages: o.trainer === 'trl' ? rowAdv : Float32Array.from({ length: B * C }, (_, i) => rowAdv[Math.floor(i / C)]),
        old_per_token_logps: p.old_per_token_logps!,
        ref_per_token_logps: p.ref_per_token_logps ?? null,
        sampling_per_token_logps: p.sampling_per_token_logps!,
        sequence_lengths: null,
      };
      const want = await twin(c);
      const label = `${o.trainer}`;
      expectClose([l.loss], [want.loss], { rtol: 1e-4, atol: 1e-6, label: `${label} loss` });

      // per_token_loss: the trainer's tensor on every completion token, those its aggregation drops included
      // (token_weight 0 there, which some of these batches have: rejected or masked by the correction).
      const w = l.token_weight;
      expect(w.some((x, i) => x !== 0 && p.completion_mask[i] === 1)).toBe(true);
      expectClose(l.per_token_loss, want.per_token_loss, { rtol: 1e-4, atol: 1e-5, mask: p.completion_mask, label: `${label} per_token_loss` });

      // per_token_kl: the trainer's estimator (clamps in); mean_kl its mean over the loss tokens.
      expect(l.per_token_kl).not.toBeNull();
      expectClose(l.per_token_kl!, want.per_token_kl!, { rtol: 1e-4, atol: 1e-5, mask: p.completion_mask, label: `${label} per_token_kl` });
      if (ref > 10) {
        for (let i = 0; i < p.completion_mask.length; i++) if (p.completion_mask[i]) expect(Math.abs(l.per_token_kl![i])).toBeLessThanOrEqual(10);
      }
      let [s, n] = [0, 0];
      for (let i = 0; i < p.completion_mask.length; i++) if (p.completion_mask[i]) [s, n] = [s + want.per_token_kl![i], n + 1];
      expectClose([l.mean_kl], [s / n], { rtol: 1e-4, atol: 1e-6, label: `${label} mean_kl` });

      // Σ per_token_loss · token_weight is the loss (TRL: β·KL is in its per_token_loss; verl / OpenRLHF aggregate the KL apart).
      let sum = 0;
      for (let i = 0; i < w.length; i++) if (w[i] !== 0) sum += l.per_token_loss[i] * w[i];
      const klApart = o.trainer === 'trl' ? 0 : l.kl_term;
      expectClose([sum + klApart], [want.loss], { rtol: 1e-4, atol: 1e-6, label: `${label} Σ per_token_loss · token_weight` });
      if (o.trainer !== 'trl') expect(Math.abs(l.kl_term)).toBeGreaterThan(1e-3);
      expectClose([l.policy_term + l.kl_term], [l.loss], { rtol: 1e-5, atol: 1e-7, label: `${label} policy + KL term` });

      // The losses table: the trainer's aggregation is the loss itself; under TRL each loss type is TRL's own.
      expect(l.losses[l.aggregation]).toBe(l.loss);
      if (o.trainer === 'trl') {
        expect(l.aggregation).toBe(o.config.loss_type);
        for (const t of ['grpo', 'bnpo', 'dr_grpo', 'dapo']) {
          const other = await twin({ ...c, config: { ...c.config, loss_type: t } });
          expectClose([l.losses[t]], [other.loss], { rtol: 1e-4, atol: 1e-6, label: `${label} losses.${t}` });
        }
        // No TRL loss type: not shown as a TRL number.
        expect(l.losses['token-mean']).toBeNaN();
      } else {
        expect(l.losses.grpo).toBeNaN();
      }
      pipe.destroy();
      policy.destroy();
    }, 300_000);
  }
});

describe(`${M}: TRL's clip flags are the ones its metrics count for the loss type (grpo_trainer.py _compute_loss)`, () => {
  const run = async (config: Record<string, unknown>) => {
    const batch = parseBatch(readFileSync(join(GOLDEN, M, 'batch.json'), 'utf8'));
    // Old log-probs ±0.2 nats off the policy's: ratios e^±0.2 either side of every ε below.
    batch.old_per_token_logps = batch.old_per_token_logps!.map((row, b) => row.map((x, t) => x + 0.2 * (((b + t) % 3) - 1)));
    const C = Math.max(...batch.completion_ids.map((r) => r.length));
    const gpu = await testGpu();
    const policy = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, M)), gpu);
    const o: TrainerObjective = { trainer: 'trl', config: { beta: 0, steps_per_generation: 1, ...config }, run: {} };
    const pipe = new StepPipeline(gpu, { policy, reference: null, config: { ...stepConfigFromBatch(batch.config, C), trainer: o }, source: { kind: 'batch', batch } });
    while (pipe.nextStage !== 'backward') await pipe.next();
    const l = pipe.data('loss') as StageData['loss'];
    expect(l.objective_error).toBeNull();
    const p = (pipe.data('assemble') as StageData['assemble']).padded;
    const adv = (pipe.data('advantages') as StageData['advantages']).advantages;
    return { l, p, adv };
  };

  it('sapo and vespo clip nothing: no flag, no count', async () => {
    for (const loss_type of ['sapo', 'vespo']) {
      const { l } = await run({ loss_type });
      expect(l.clip.every((x) => x === 0), loss_type).toBe(true);
      expect([l.clip_counts.low, l.clip_counts.high, l.clip_counts.region], loss_type).toEqual([0, 0, 0]);
    }
  }, 120_000);

  it('cispo flags coef_1 > epsilon_high with A > 0, and only those', async () => {
    const { l, p, adv } = await run({ loss_type: 'cispo', epsilon_high: 1.1 });
    let flagged = 0;
    for (let i = 0; i < p.B * p.C; i++) {
      if (!p.completion_mask[i]) continue;
      const want = l.importance_ratio[i] > 1.1 && adv[Math.floor(i / p.C)] > 0;
      expect(l.clip[i] === 2, `token ${i}: ratio ${l.importance_ratio[i]}, A ${adv[Math.floor(i / p.C)]}`).toBe(want);
      flagged += want ? 1 : 0;
    }
    expect(flagged).toBeGreaterThan(0);
    expect(l.clip_counts.high).toBe(flagged);
    expect(l.clip_counts.low).toBe(0);
  }, 120_000);
});
