// The trainer's own outcome (issue 20 item 7): settings the trainer refuses are refused with its reason,
// naming the fields (trainerRefusal, and through the objectives: `grpo-studio loss`, the page's scored
// objective); use_liger_kernel follows TRL's Liger normalisation (expected losses and gradients derived by
// hand from compute_liger_loss and Liger's _compute_dapo_normalizer); OpenRLHF's float32 IS-weight overflow
// gives OpenRLHF's NaN (or ±inf), and the Doctor names the tokens.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { trainerRefusal } from '../../src/grpo/settings/rules.ts';
import { TrainerRefusal } from '../../src/grpo/settings/trainer_rules.ts';
import { SettingsError } from '../../src/grpo/settings/types.ts';
import { parseTrlConfig, parseTrlRun } from '../../src/grpo/settings/trl.ts';
import { trlLoss } from '../../src/grpo/trainers/trl.ts';
import { trainerLossFromLogps } from '../../src/grpo/trainers/from_logps.ts';
import { openrlhfLoss, openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import { verlObjective } from '../../src/grpo/trainers/verl.ts';
import type { TrainerLossCase, TrainerLossOutputs } from '../../src/grpo/trainers/types.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { effectiveSettings } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { assertOneMicroBatch } from '../../src/grpo/step_objective.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { toF64 } from '../../src/io/safetensors.ts';
import { testGpu } from '../helpers/gpu.ts';
import { readTrainerCase, TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { caseWith } from '../helpers/edit_case.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { expectClose } from '../helpers/close.ts';

const golden = (trainer: string, n: string) => readTrainerCase(path.join(TRAINER_GOLDEN, trainer, `case_${n}.safetensors`));
const withConfig = (c: TrainerLossCase, patch: Record<string, unknown>): TrainerLossCase => ({ ...c, config: { ...c.config, ...patch } });
const trl = (config: Record<string, unknown>, run: Record<string, unknown> = {}) => trainerRefusal('trl', { ...parseTrlConfig(config).values }, { ...parseTrlRun(run).values });

describe('TRL: what GRPOConfig / GRPOTrainer / Liger refuse, and what one rank cannot reproduce', () => {
  // [what, config, run, the field the refusal is filed under, its text, who refuses]
  const refused: Array<[string, Record<string, unknown>, Record<string, unknown>, string, RegExp, 'trainer' | 'studio']> = [
    ['vespo with the vLLM correction in sequence_mask (the default mode)', { loss_type: 'vespo', use_vllm: true }, {}, 'config.vllm_importance_sampling_mode', /VESPO loss requires `vllm_importance_sampling_mode` to be either 'token_truncate' or 'token_mask'\. Got: sequence_mask\./, 'trainer'],
    ['vespo with the vLLM correction in sequence_truncate', { loss_type: 'vespo', use_vllm: true, vllm_importance_sampling_mode: 'sequence_truncate' }, {}, 'config.vllm_importance_sampling_mode', /Got: sequence_truncate\./, 'trainer'],
    ['clip_min ≥ clip_max, checked without use_vllm too', { vllm_importance_sampling_clip_min: 2, vllm_importance_sampling_clip_max: 1.5 }, {}, 'config.vllm_importance_sampling_clip_min', /"vllm_importance_sampling_clip_min \(2\) must be less than vllm_importance_sampling_clip_max \(1\.5\)\."/, 'trainer'],
    ['the deprecated cap replaces clip_max before the check', { vllm_importance_sampling_clip_min: 2, vllm_importance_sampling_cap: 1 }, {}, 'config.vllm_importance_sampling_clip_min', /clip_min \(2\) must be less than vllm_importance_sampling_clip_max \(1\)/, 'trainer'],
    ['a *_truncate mode without bounds', { vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: null }, {}, 'config.vllm_importance_sampling_clip_max', /a \*_truncate mode needs .*"At least one of `vllm_importance_sampling_clip_min` or `vllm_importance_sampling_clip_max` must be set/, 'trainer'],
    ['Liger with off-policy masking', { use_liger_kernel: true, off_policy_mask_threshold: 0.1 }, {}, 'config.use_liger_kernel', /off_policy_mask_threshold = 0\.1: "Liger kernel does not support off-policy sequence masking yet\."/, 'trainer'],
    ['Liger with an entropy mask', { use_liger_kernel: true, top_entropy_quantile: 0.5 }, {}, 'config.use_liger_kernel', /top_entropy_quantile = 0\.5 .*"Liger Kernels don't currently support masking token positions based on entropy\."/, 'trainer'],
    ['Liger with an entropy bonus', { use_liger_kernel: true, entropy_coef: 0.01 }, {}, 'config.use_liger_kernel', /entropy_coef = 0\.01.*"Entropy bonus is not supported with Liger kernel\."/, 'trainer'],
    ['Liger with adaptive entropy at coefficient 0', { use_liger_kernel: true, use_adaptive_entropy: true }, {}, 'config.use_liger_kernel', /use_adaptive_entropy = true.*"Entropy bonus is not supported/, 'trainer'],
    ['Liger with sequence-level IS for sapo', { use_liger_kernel: true, loss_type: 'sapo', importance_sampling_level: 'sequence' }, {}, 'config.use_liger_kernel', /"Sequence-level importance sampling is not supported for loss_type='sapo'\./, 'trainer'],
    ['an entropy quantile over several processes', { top_entropy_quantile: 0.4 }, { num_processes: 2 }, 'config.top_entropy_quantile', /^0\.4 with num_processes = 2: TRL takes the entropy threshold .* gathered from every process/, 'studio'],
    ['dr_grpo with max_completion_length None (its divisor: a TypeError in _compute_loss)', { loss_type: 'dr_grpo', max_completion_length: null }, {}, 'config.max_completion_length', /^null with loss_type dr_grpo: TRL divides by per_token_loss\.size\(0\) \* max_completion_length/, 'trainer'],
    ['Liger dapo over several processes', { use_liger_kernel: true }, { num_processes: 2, num_items_in_batch: 100 }, 'run.num_processes', /^2 with use_liger_kernel and loss_type dapo: Liger divides by this micro-batch's loss-mask tokens summed over every process/, 'studio'],
    ['dapo over several processes without num_items_in_batch', {}, { num_processes: 2 }, 'run.num_items_in_batch', /^needed by loss_type dapo with num_processes = 2/, 'studio'],
    ['Liger, an entropy mask and two processes: TRL’s own refusal first', { use_liger_kernel: true, top_entropy_quantile: 0.5 }, { num_processes: 2, num_items_in_batch: 100 }, 'config.use_liger_kernel', /Liger Kernels don't currently support/, 'trainer'],
  ];
  it.each(refused)('refuses %s', (_what, config, run, field, text, by) => {
    const e = trl(config, run);
    expect(e).toBeInstanceOf(TrainerRefusal);
    expect(e).toBeInstanceOf(SettingsError); // CLI exit 2, the page's settings error
    expect(e!.name).toBe('SettingsError');
    expect(e!.message.startsWith(`${field}: `)).toBe(true);
    expect(e!.message.slice(field.length + 2)).toMatch(text);
    expect(e!.fields[0]).toBe(field);
    expect(e!.by).toBe(by);
    expect(e!.message).toContain(e!.source);
  });

  const accepted: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    ['the defaults', {}, {}],
    ['vespo with sequence-level IS (TRL only warns)', { loss_type: 'vespo', importance_sampling_level: 'sequence' }, {}],
    ['vespo with the vLLM correction in token_mask', { loss_type: 'vespo', use_vllm: true, vllm_importance_sampling_mode: 'token_mask' }, {}],
    ['vespo with use_vllm and the correction off', { loss_type: 'vespo', use_vllm: true, vllm_importance_sampling_correction: false }, {}],
    ['luspo with token-level IS (TRL only warns)', { loss_type: 'luspo' }, {}],
    ['max_completion_length None under another loss type (no cap on sampling; only dr_grpo reads it)', { loss_type: 'dapo', max_completion_length: null }, {}],
    ['a *_truncate mode without bounds while the correction is off', { vllm_importance_sampling_correction: false, vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: null }, {}],
    ['Liger with grpo and sequence-level IS', { use_liger_kernel: true, loss_type: 'grpo', importance_sampling_level: 'sequence' }, {}],
    ['Liger grpo over several processes (local normalisers)', { use_liger_kernel: true, loss_type: 'grpo' }, { num_processes: 2 }],
    ['Liger dapo on one process, without num_items_in_batch', { use_liger_kernel: true }, { gradient_accumulation_steps: 4 }],
    ['an entropy quantile on one process', { top_entropy_quantile: 0.4 }, {}],
  ];
  it.each(accepted)('accepts %s', (_what, config, run) => expect(trl(config, run)).toBeNull());

  it('vespo with sequence-level IS runs (TRL only warns) and is vespo at token level: φ reads the token log-ratio', async () => {
    // get_gamma_weights takes log_ratio, not log_importance_weights; with β = 0 nothing else reads the level.
    const gpu = await testGpu();
    const { c } = golden('trl', '10');
    expect([c.config.loss_type, c.config.beta]).toEqual(['vespo', 0]);
    const token = await trlLoss(gpu, c, { backward: false });
    const sequence = await trlLoss(gpu, withConfig(c, { importance_sampling_level: 'sequence' }), { backward: false });
    expect(sequence.loss).toBe(token.loss);
  }, 60_000);

  it('fills what the caller leaves out with the table defaults (a partial config is the trainer at its defaults)', () => {
    expect(trainerRefusal('trl', { loss_type: 'vespo', use_vllm: true }, {})?.fields[0]).toBe('config.vllm_importance_sampling_mode');
    expect(trainerRefusal('trl', { loss_type: 'vespo', use_vllm: true, vllm_importance_sampling_mode: 'token_truncate' }, {})).toBeNull();
  });
});

describe('the objectives refuse through the same rules', () => {
  it('grpo-studio loss: vespo with a sequence_* vLLM mode exits 2 with TRL’s reason (it used to return a number)', async () => {
    const f = caseWith(path.join(TRAINER_GOLDEN, 'trl', 'case_10.safetensors'), (_, m) => (m.config = JSON.stringify({ ...JSON.parse(m.config), vllm_importance_sampling_mode: 'sequence_mask' })));
    await expectRefusal(['loss', f], /: config\.vllm_importance_sampling_mode: TRL refuses loss_type vespo .*VESPO loss requires/);
  }, 60_000);

  it('the page’s objective (scored log-probs): an entropy quantile over two processes', async () => {
    const gpu = await testGpu();
    const { c } = golden('trl', '13');
    const { logits: _l, V: _v, ...inputs } = c;
    const N = c.B * c.T;
    const scored = { per_token_logps: new Float32Array(N), per_token_entropy: new Float32Array(N), temperature: Number(c.config.temperature ?? 1) };
    await expect(trainerLossFromLogps(gpu, { ...inputs, run: { ...c.run, num_processes: 2, num_items_in_batch: 96 } }, scored)).rejects.toThrow(/^config\.top_entropy_quantile: 0\.4 with num_processes = 2/);
  }, 60_000);

  it('verl: the micro-batch size verl requires, with verl’s own message, in either worker', async () => {
    const { c } = golden('verl', '00');
    for (const worker of ['auto', 'disable']) {
      const x = withConfig(c, { ppo_micro_batch_size_per_gpu: null, use_legacy_worker_impl: worker });
      await expect(verlObjective(twinBackend(x), x, { backward: false })).rejects.toThrow(/^config\.ppo_micro_batch_size_per_gpu: null with use_dynamic_bsz false: verl refuses .*"\[actor\] Please set at least one of/);
    }
    const odd = withConfig(c, { ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 3 });
    await expect(verlObjective(twinBackend(odd), odd, { backward: false })).rejects.toThrow(/^config\.ppo_micro_batch_size_per_gpu: 3: verl refuses .*"normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 3"/);
    // With dynamic batch sizes verl needs no micro-batch size.
    const dyn = withConfig(c, { ppo_micro_batch_size_per_gpu: null, use_dynamic_bsz: true });
    expect(Number.isFinite((await verlObjective(twinBackend(dyn), dyn, { backward: false })).loss)).toBe(true);
  });
});

describe("TRL: sync_ref_model (TRL's reference is mixed with the policy every ref_model_sync_steps steps)", () => {
  const sync = { sync_ref_model: true, beta: 0.04, ref_model_sync_steps: 10, ref_model_mixup_alpha: 0.5 };
  it("refuses it with beta 0 in TRL's words; otherwise the objective (a loss case carries its reference log-probs) runs at any step", () => {
    expect(trl({ sync_ref_model: true }, {})?.message).toMatch(/^config\.sync_ref_model: TRL refuses sync_ref_model with beta 0: "You passed `sync_ref_model=True` while `beta=0\.0`/);
    expect(trl(sync, { global_step: 25 })).toBeNull();
  });

  it('the reference the step would use: the model as loaded is TRL\'s before the first sync, the batch\'s own log-probs until the next one', () => {
    const at = (g: number, steps_done = 0, config: Record<string, unknown> = sync) => stepConfigOf(effectiveSettings('trl', [{ origin: 'file', config, run: { global_step: g, max_steps: 100 } }]), 4, { steps_done }).reference_sync;
    expect(at(9)).toEqual({ studio: null, batch: null }); // the reference is still the initial one: exact
    expect(at(10)!.studio).toMatch(/^config\.sync_ref_model: with global_step 10 ≥ ref_model_sync_steps 10: TRL's reference has been mixed with the policy 1 time\(s\) \(ref ← \(1 − 0\.5\)·ref \+ 0\.5·policy\)/);
    expect(at(10)!.batch).toBeNull(); // the batch's log-probs were taken from TRL's reference at this step
    expect(at(25)!.studio).toMatch(/mixed with the policy 2 time\(s\)/);
    // The page's continued updates are later steps: the batch's log-probs go stale at the next sync.
    expect(at(28, 1)!.batch).toBeNull();
    expect(at(28, 2)!.batch).toMatch(/^config\.sync_ref_model: the batch's ref_per_token_logps were taken at global_step 28, and TRL mixes its reference with the policy 1 more time\(s\) by global_step 30/);
    expect(at(5000, 0, { ...sync, sync_ref_model: false })).toBeNull();
    // A what-if's studio aggregation as loss_type (no TRL loss type) reads the sync rows alone.
    expect(stepConfigOf(effectiveSettings('trl', [{ origin: 'file', config: { ...sync, loss_type: 'seq-mean-token-mean' }, run: { global_step: 10, max_steps: 100 } }]), 4, { refuse: false }).reference_sync!.studio).toMatch(/^config\.sync_ref_model: with global_step 10/);
  });

  it("the page's continued updates are later steps for the adaptive entropy state too", () => {
    const at = (config: Record<string, unknown>, run: Record<string, unknown>, steps_done: number) => () => stepConfigOf(effectiveSettings('trl', [{ origin: 'file', config, run: { max_steps: 100, ...run } }]), 4, { steps_done });
    expect(at({ use_adaptive_entropy: true, entropy_coef: 0.1 }, {}, 0)).not.toThrow();
    expect(at({ use_adaptive_entropy: true, entropy_coef: 0.1 }, {}, 1)).toThrow(/^config\.use_adaptive_entropy: with global_step 1: TRL's coefficient/);
  });
});

describe('TRL: the adaptive entropy coefficient past the first step', () => {
  it('use_adaptive_entropy with global_step > 0 needs the run\'s coefficient and last world entropy', () => {
    expect(trl({ use_adaptive_entropy: true, entropy_coef: 0.1 }, { global_step: 5 })?.message).toMatch(/^config\.use_adaptive_entropy: with global_step 5: TRL's coefficient \(self\.entropy_coef\)/);
    expect(trl({ use_adaptive_entropy: true, entropy_coef: 0.1 }, { global_step: 5, adaptive_entropy_coef: 0.115, last_world_entropy: 0.3 })).toBeNull();
    expect(trl({ use_adaptive_entropy: true, entropy_coef: 0.1 }, {})).toBeNull(); // the first step: TRL's start values
  });
});

describe('OpenRLHF: the adaptive KL controller', () => {
  it('algo.kl.target with the KL loss is refused (the coefficient depends on the run); without the KL loss, or unset, it runs', async () => {
    const { c } = golden('openrlhf', '01'); // has reference log-probs
    const at = (config: Record<string, unknown>) => openrlhfObjective(twinBackend(c), { ...c, config: { ...c.config, ...config } }, { backward: false });
    await expect(at({ 'algo.kl.use_loss': true, 'algo.kl.target': 0.1 })).rejects.toThrow(/^config\.algo\.kl\.target: 0\.1 with algo\.kl\.use_loss: the adaptive KL controller/);
    expect(trainerRefusal('openrlhf', { 'algo.kl.target': 0.1, 'algo.kl.use_loss': false, 'algo.kl.init_coef': 0.01 }, {})).toBeNull();
    expect(trainerRefusal('openrlhf', { 'algo.kl.target': 0, 'algo.kl.use_loss': true, 'algo.kl.init_coef': 0.01 }, {})).toBeNull(); // 0 is falsy: the fixed controller
    expect(Number.isFinite((await at({ 'algo.kl.use_loss': true, 'algo.kl.target': null })).loss)).toBe(true);
  });
});

describe('OpenRLHF: one optimizer step is train.batch_size samples over the ranks', () => {
  it("a batch with more rows than a rank's window (train.batch_size ÷ dp) is refused naming train.batch_size; up to it, it runs", async () => {
    const { c } = golden('openrlhf', '01');
    const at = (n: number, dp = 1) => openrlhfObjective(twinBackend(c), { ...c, config: { ...c.config, 'train.batch_size': n }, run: { ...c.run, num_processes: dp, loss_batch_info: null } }, { backward: false });
    await expect(at(c.B - 1)).rejects.toThrow(new RegExp(`^config\\.train\\.batch_size: ${c.B - 1} samples per optimizer step over 1 rank\\(s\\), ${c.B - 1} on each, but the batch holds ${c.B}: `));
    await expect(at(c.B - 1)).rejects.toBeInstanceOf(SettingsError);
    expect(Number.isFinite((await at(c.B)).loss)).toBe(true);
    // Over 2 ranks each steps every train.batch_size ÷ 2 of its samples.
    await expect(at(2 * c.B - 2, 2)).rejects.toThrow(/over 2 rank\(s\)/);
    expect(Number.isFinite((await at(2 * c.B, 2)).loss)).toBe(true);
  });
});

describe('verl kl_cov / clip_cov: selections float32 cannot settle are refused, never taken one way', () => {
  it('kl_cov: all-equal advantages tie every covariance at the top-k boundary (torch.topk picks among them)', async () => {
    const { c } = golden('verl', '09');
    expect(Number.isFinite((await verlObjective(twinBackend(c), c, { backward: false })).loss)).toBe(true);
    for (const a of [0, 0.7]) {
      const flat = { ...c, advantages: Float32Array.from(c.advantages, (_, i) => (c.completion_mask[i] ? a : 0)) };
      await expect(verlObjective(twinBackend(flat), flat, { backward: false })).rejects.toThrow(/^config\.kl_cov_ratio: 0\.1 selects the top \d+ of \d+ tokens by covariance, and the covariances at places \d+ and \d+ are equal within float32 rounding/);
    }
  });
  it('kl_cov: a k-th place a few float32 ulps from the next is refused; one far beyond float32 rounding is stepped', async () => {
    // One row of 4 tokens, V = 2, token 0 sampled: logits [x, 0] give logp = −log(1 + e^−x). Advantages [1, 1, 0, 0]
    // and logps [−0.2, −0.2 − δ, −2, −2] give covariances (A − Ā)(logp − l̄) = 0.45 + δ/8, 0.45 − 3δ/8, 0.45 − δ/8,
    // 0.45 − δ/8: with kl_cov_ratio 0.25 (k = 1) the first place leads the next by δ/4. The float32 covariances
    // verl forms carry ~1e-7 of error here (0.45 is 2^-25 apart from its float32 neighbours).
    const { c } = golden('verl', '09');
    const at = (delta: number): TrainerLossCase => {
      const logps = [-0.2, -0.2 - delta, -2, -2];
      return {
        ...c, B: 1, T: 4, V: 2,
        logits: Float32Array.from(logps.flatMap((l) => [-Math.log(Math.exp(-l) - 1), 0])),
        completion_ids: new Int32Array(4), completion_mask: new Int32Array(4).fill(1),
        advantages: Float32Array.from([1, 1, 0, 0]), old_per_token_logps: Float32Array.from(logps), ref_per_token_logps: null, sampling_per_token_logps: null, sequence_lengths: null,
        config: { ...c.config, kl_cov_ratio: 0.25 },
      };
    };
    await expect(verlObjective(twinBackend(at(1e-6)), at(1e-6), { backward: false })).rejects.toThrow(/^config\.kl_cov_ratio: 0\.25 selects the top 1 of 4 tokens by covariance, and the covariances at places 1 and 2 are equal within float32 rounding/);
    expect(Number.isFinite((await verlObjective(twinBackend(at(1e-3)), at(1e-3), { backward: false })).loss)).toBe(true);
  });
  it('clip_cov: a covariance on clip_cov_lb or clip_cov_ub (within float32 rounding) is refused naming the bound', async () => {
    const { c, st } = golden('verl', '08');
    // core_algos.py compute_policy_loss_clip_cov: cov = (A − mean A)(logp − mean logp) over the response mask.
    const logp = toF64(st, 'per_token_logps');
    const on = [...c.completion_mask.keys()].filter((i) => c.completion_mask[i]);
    const mean = (f: (i: number) => number) => on.reduce((x, i) => x + f(i), 0) / on.length;
    const [mA, mL] = [mean((i) => c.advantages[i]), mean((i) => logp[i])];
    const cov = on.map((i) => (c.advantages[i] - mA) * (logp[i] - mL));
    const at = Math.max(...cov);
    for (const bound of ['clip_cov_lb', 'clip_cov_ub']) {
      const x = withConfig(c, { [bound]: at, ...(bound === 'clip_cov_ub' ? { clip_cov_lb: -1e9 } : { clip_cov_ub: 1e9 }) });
      await expect(verlObjective(twinBackend(x), x, { backward: false })).rejects.toThrow(new RegExp(`^config\\.${bound}: .* is [-\\d.e]+ \\(within float32 rounding`));
    }
  });
});

describe('OpenRLHF train.dynamic_batch_enable: the packing normalises each micro-batch', () => {
  it('without run.loss_batch_info it is refused naming both; with it, the loss is what those normalisers give', async () => {
    const { c } = golden('openrlhf', '01');
    const info = { dp_size: 1, batch_num_tokens: 7, global_batch_size: 3 };
    const at = (dynamic: boolean, loss_batch_info: Record<string, number> | null) =>
      openrlhfObjective(twinBackend(c), { ...c, config: { ...c.config, 'train.dynamic_batch_enable': dynamic }, run: { ...c.run, loss_batch_info } }, { backward: false });
    await expect(at(true, null)).rejects.toThrow(/^config\.train\.dynamic_batch_enable: true without run\.loss_batch_info: dynamic batching normalises each micro-batch by its packing's token counts/);
    // Given the packing's normalisers the flag changes nothing else: the same loss as the fixed window with them.
    expect((await at(true, info)).loss).toBe((await at(false, info)).loss);
    expect((await at(true, info)).loss).not.toBe((await at(false, null)).loss);
  });
});

describe('use_liger_kernel: TRL’s Liger normalisation (compute_liger_loss)', () => {
  // Two rows, on-policy (no old log-probs: ratio 1, so L = −A on every token), β = 0:
  // Σ L·M = −(1·2) − (−0.5·3) = −0.5 over 5 loss tokens; gradient_accumulation_steps 2; num_items_in_batch 50.
  const B = 2;
  const T = 3;
  const V = 4;
  const logits = Float32Array.from([0.3, -1.2, 2.0, 0.5, 1.1, 0.0, -0.7, 0.4, -2.0, 1.5, 0.2, 0.9, 0.6, 0.6, -0.3, 1.8, -1.1, 0.7, 0.0, 2.2, 0.5, -0.4, 1.3, -0.9]);
  const base: TrainerLossCase = {
    trainer: 'trl', config: {}, run: { gradient_accumulation_steps: 2, num_items_in_batch: 50 }, B, T, V, logits,
    completion_ids: Int32Array.from([2, 0, 3, 1, 3, 0]),
    completion_mask: Int32Array.from([1, 1, 0, 1, 1, 1]),
    tool_mask: null, advantages: Float32Array.from([1, -0.5]),
    old_per_token_logps: null, ref_per_token_logps: null, sampling_per_token_logps: null, sequence_lengths: null,
  };
  const run = (config: Record<string, unknown>) => testGpu().then((gpu) => trlLoss(gpu, { ...base, config: { beta: 0, max_completion_length: 4, ...config } }, { backward: true }));
  /** ∂loss/∂logits from ∂loss/∂logp: g · (onehot − softmax(logits)) at temperature 1. */
  const dlogitsOf = (dlogp: (b: number, t: number) => number) => {
    const out = new Float64Array(B * T * V);
    for (let n = 0; n < B * T; n++) {
      const row = Array.from(logits.subarray(n * V, (n + 1) * V));
      const z = Math.max(...row);
      const e = row.map((x) => Math.exp(x - z));
      const s = e.reduce((a, x) => a + x, 0);
      const g = dlogp(Math.floor(n / T), n % T);
      for (let v = 0; v < V; v++) out[n * V + v] = g * ((v === base.completion_ids[n] ? 1 : 0) - e[v] / s);
    }
    return out;
  };
  const A = (b: number) => base.advantages[b];
  const M = (b: number, t: number) => base.completion_mask[b * T + t];

  it("both ranks' rows merged: each rank divides by max(all-reduced Σ M / world size, 1) · gas, and the ranks are averaged (the clamp at 1 shows it)", async () => {
    // One loss token in the whole batch (row 0, L = −A = −1): each rank's divisor is max(1 / 2, 1) · 2 = 2, rank 0's loss
    // −1 / 2, rank 1's 0, DDP's mean −0.25; the rows pooled as one process would give −1 / (max(1, 1) · 2) = −0.5.
    const one = { ...base, completion_mask: Int32Array.from([1, 0, 0, 0, 0, 0]) };
    const at = (run: Record<string, unknown>) => testGpu().then((gpu) => trlLoss(gpu, { ...one, run: { ...one.run, ...run }, config: { beta: 0, loss_type: 'dapo', use_liger_kernel: true } }, { backward: false }));
    expect((await at({ num_processes: 2, rank: [0, 1] })).loss).toBeCloseTo(-0.25, 6);
    expect((await at({})).loss).toBeCloseTo(-0.5, 6);
  });

  it('dapo divides by this micro-batch’s tokens and by gradient_accumulation_steps, not by num_items_in_batch', async () => {
    const plain = await run({ loss_type: 'dapo' });
    const liger = await run({ loss_type: 'dapo', use_liger_kernel: true });
    expect(plain.loss).toBeCloseTo(-0.5 / 50, 6); // Σ L·M / (num_items_in_batch / num_processes)
    expect(liger.loss).toBeCloseTo(-0.5 / 5 / 2, 6); // Σ L·M / max(Σ M, 1) / gas
    expectClose(liger.dlogits!, dlogitsOf((b, t) => (-A(b) * M(b, t)) / (5 * 2)), { rtol: 1e-4, atol: 1e-7, label: 'liger dapo dlogits' });
  }, 60_000);

  it('grpo, bnpo and dr_grpo normalise alike in both paths', async () => {
    const expected: Record<string, number> = {
      grpo: (-2 / 2 + 1.5 / 3) / 2 / 2, // mean over rows of Σ_t L·M / n_b, ÷ gas
      bnpo: -0.5 / 5 / 2, // Σ L·M / Σ M, ÷ gas
      dr_grpo: -0.5 / (B * 4) / 2, // Σ L·M / (B · max_completion_length), ÷ gas
    };
    for (const [loss_type, value] of Object.entries(expected)) {
      expect((await run({ loss_type })).loss, loss_type).toBeCloseTo(value, 6);
      expect((await run({ loss_type, use_liger_kernel: true })).loss, `${loss_type} liger`).toBeCloseTo(value, 6);
    }
  }, 60_000);
});

describe('OpenRLHF: a float32 IS-weight overflow gives OpenRLHF’s NaN, not a finite loss', () => {
  const FLT_MAX = 3.4028234663852886e38;
  const LN_MAX = Math.log(FLT_MAX); // ≈ 88.7228: exp above it is +inf in float32
  /** A copy of `c` whose rollout log-prob at flat index i makes old − rollout = d. */
  const withLogRatio = (c: TrainerLossCase, i: number, d: number): TrainerLossCase => {
    const rollout = Float32Array.from(c.sampling_per_token_logps!);
    rollout[i] = c.old_per_token_logps![i] - d;
    return { ...c, sampling_per_token_logps: rollout };
  };
  const twin = (c: TrainerLossCase): Promise<TrainerLossOutputs> => openrlhfObjective(twinBackend(c), c, { backward: true });

  it('icepop without overflow stays finite and is the golden loss', async () => {
    const { st, c } = golden('openrlhf', '04');
    expect(c.config['algo.advantage.is_correction_type']).toBe('icepop');
    const r = await twin(c);
    expect(Number.isFinite(r.loss)).toBe(true);
    expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: 'icepop loss' });
  });

  it('icepop: log-ratio past ln(FLT_MAX) at a loss token makes the loss, that token’s loss, weight and gradient NaN; nothing else moves', async () => {
    const { c } = golden('openrlhf', '04');
    const i = c.completion_mask.indexOf(1);
    expect(LN_MAX).toBeGreaterThan(88.7);
    expect(LN_MAX).toBeLessThan(88.8);
    // 88.7: exp is 3.2e38, finite in float32: above the threshold 2, so masked (weight 0); the loss stays finite.
    const masked = await twin(withLogRatio(c, i, 88.7));
    expect(Number.isFinite(masked.loss)).toBe(true);
    expect(masked.importance_sampling_ratio![i]).toBe(0);
    const nan = await twin(withLogRatio(c, i, 88.8));
    expect(nan.loss).toBeNaN();
    expect(nan.per_token_loss![i]).toBeNaN();
    expect(nan.importance_sampling_ratio![i]).toBeNaN();
    const V = c.V;
    for (let k = 0; k < c.B * c.T; k++) {
      if (k === i) {
        expect(Array.from(nan.dlogits!.subarray(k * V, (k + 1) * V)).every(Number.isNaN)).toBe(true);
        continue;
      }
      // The weight of every other token is the same in both runs: per-token terms and gradients agree.
      expect(nan.per_token_loss![k]).toBe(masked.per_token_loss![k]);
      for (let v = 0; v < V; v++) expect(nan.dlogits![k * V + v]).toBe(masked.dlogits![k * V + v]);
    }
  });

  it('icepop: an overflow on a padded position poisons the loss too (NaN · 0 = NaN in aggregate_loss)', async () => {
    const { c } = golden('openrlhf', '04');
    const j = c.completion_mask.indexOf(0);
    expect(j).toBeGreaterThanOrEqual(0);
    const r = await twin(withLogRatio(c, j, 95));
    expect(r.loss).toBeNaN();
    expect(r.per_token_loss![j]).toBeNaN();
  });

  it('seq-mask-tis: NaN when the sequence is out of range; ±inf by the sign of −A when it is kept', async () => {
    const { c } = golden('openrlhf', '05');
    expect(c.config['algo.advantage.is_correction_type']).toBe('seq-mask-tis');
    const [lo, hi] = c.config['algo.advantage.is_correction_threshold'] as number[];
    const { B, T } = c;
    const old = c.old_per_token_logps!;
    const roll = c.sampling_per_token_logps!;
    // A row in range with two loss tokens of non-zero advantage: +99.5 at one and −99.5 at the other keep its mean log-ratio.
    let pick: { t1: number; t2: number } | null = null;
    for (let b = 0; b < B && !pick; b++) {
      const idx = Array.from({ length: T }, (_, t) => b * T + t).filter((k) => c.completion_mask[k] === 1);
      const mean = idx.reduce((a, k) => a + (old[k] - roll[k]), 0) / idx.length;
      if (idx.length >= 2 && Math.exp(mean) >= lo && Math.exp(mean) <= hi && c.advantages[idx[0]] !== 0) pick = { t1: idx[0], t2: idx[1] };
    }
    expect(pick).not.toBeNull();
    const { t1, t2 } = pick!;
    const dropped = await twin(withLogRatio(c, t1, 99.5)); // the row's mean log-ratio is then > ln(1.6): seq_mask 0, 0 · inf
    expect(dropped.loss).toBeNaN();
    expect(dropped.per_token_loss![t1]).toBeNaN();
    const shift = (old[t1] - roll[t1]) + (old[t2] - roll[t2]);
    const kept = await twin(withLogRatio(withLogRatio(c, t1, 99.5), t2, shift - 99.5));
    const sign = -Math.sign(c.advantages[t1]); // L = −min(r·A, clip(r)·A) has the sign of −A (r > 0)
    expect(kept.importance_sampling_ratio![t1]).toBe(Infinity);
    expect(kept.per_token_loss![t1]).toBe(sign * Infinity);
    expect(kept.loss).toBe(sign * Infinity);
  });

  it('the GPU objective gives the same NaN (its kernels saw finite inputs)', async () => {
    const gpu = await testGpu();
    const { c } = golden('openrlhf', '04');
    const i = c.completion_mask.indexOf(1);
    const r = await openrlhfLoss(gpu, withLogRatio(c, i, 99.5), { backward: true });
    expect(r.loss).toBeNaN();
    for (let k = 0; k < c.B * c.T; k++) if (k !== i) expect(Number.isFinite(r.per_token_loss![k]), `per_token_loss[${k}]`).toBe(true);
  }, 60_000);

  it('the Doctor names the tokens: sample, position and log-ratio, only past float32’s limit', () => {
    const fixture = readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures/batches/trainer-nonfinite.json'), 'utf8');
    const at = (d: number) => {
      const b = parseBatch(fixture, 'trainer-nonfinite');
      b.sampling_per_token_logps![1][1] = b.old_per_token_logps![1][1] - d;
      return diagnose(b).findings.filter((f) => f.rule === 'trainer-nonfinite');
    };
    expect(at(88.7)).toEqual([]);
    const fs = at(88.8);
    expect(fs.map((f) => [f.severity, f.sample, f.span])).toEqual([['error', 1, [1, 2]]]);
    expect(fs[0].message).toMatch(/^sample 1: exp\(old − rollout\) overflows float32 at 1 token\(s\) \(position 1: log-ratio 88\.8; .*icepop.*NaN/);
    // tis clamps inf to its upper threshold: finite, no finding.
    const tis = parseBatch(fixture, 'trainer-nonfinite');
    tis.config = { ...tis.config, 'algo.advantage.is_correction_type': 'tis' };
    expect(diagnose(tis).findings.filter((f) => f.rule === 'trainer-nonfinite')).toEqual([]);
  });
});

describe('TRL generation_batch_size: GRPOConfig.__post_init__ derives steps_per_generation from it', () => {
  const refusal = (config: Record<string, unknown>, run: Record<string, unknown> = {}) => {
    try {
      assertOneMicroBatch({ trainer: 'trl', config, run });
      return null;
    } catch (e) {
      return (e as Error).message;
    }
  };
  it('past one micro-batch it is a split the step refuses, naming the derivation and the fix (it was read as no split before)', () => {
    expect(refusal({ generation_batch_size: 32, per_device_train_batch_size: 8 })).toMatch(/^config\.generation_batch_size = 32 \(GRPOConfig: steps_per_generation = 32 \/ \(per_device_train_batch_size 8 · num_processes 1 \(the default: the batch does not say\)\) = 4\): the step takes .*; set generation_batch_size to per_device_train_batch_size · num_processes \(8\), or leave it out with steps_per_generation 1 to take the step$/);
    expect(refusal({ generation_batch_size: 16 })).toMatch(/per_device_train_batch_size 8 · num_processes 1 \(the default: the batch does not say\)\) = 2\)/); // TRL's default 8 per device
    expect(refusal({ generation_batch_size: 16 }, { num_processes: 2 })).toBeNull(); // 16 / (8 · 2) = 1
    expect(refusal({ generation_batch_size: 8 }, { gradient_accumulation_steps: 4 })).toBeNull(); // given, it decides, not gas
    expect(refusal({ generation_batch_size: 32, steps_per_generation: 1, per_device_train_batch_size: 32 })).toBeNull(); // to_dict() writes both
  });
  it("what GRPOConfig refuses, and two values no one GRPOConfig wrote, are refused whichever objective applies, naming the field", () => {
    const at = (config: Record<string, unknown>, run: Record<string, unknown> = {}) => () => stepConfigOf(effectiveSettings('trl', [{ origin: 'file', trainer: 'trl', config, run }]), 8);
    expect(at({ generation_batch_size: 12, per_device_train_batch_size: 8 })).toThrow(/^config\.generation_batch_size: TRL refuses: "generation_batch_size \(12\) must be divisible by the global batch size \(8\)\."/);
    expect(at({ generation_batch_size: 1 })).toThrow(/must be divisible by the global batch size \(8\)/); // what "set it to 1" would have given
    expect(at({ generation_batch_size: 12, per_device_train_batch_size: 4, num_generations: 8 })).toThrow(/"generation_batch_size \(12\) must be divisible by num_generations \(8\)\."/);
    // The studio loss would be the objective here (steps_per_generation 1): the check runs all the same.
    expect(at({ generation_batch_size: 16, steps_per_generation: 1, per_device_train_batch_size: 8 })).toThrow(/^config\.generation_batch_size: 16 with steps_per_generation 1: GRPOConfig sets generation_batch_size = per_device_train_batch_size 8 · num_processes 1 \(the default: the batch does not say\) · steps_per_generation = 8; the two do not come from one config$/);
    expect(at({ generation_batch_size: 16, steps_per_generation: 1, per_device_train_batch_size: 8 }, { num_processes: 2, num_items_in_batch: 10 })).not.toThrow();
    expect(refusal({ generation_batch_size: 4, steps_per_generation: 1 })).toMatch(/the two do not come from one config/); // the page's trainer view alike
  });
});

describe('TRL max_completion_length None (GRPOConfig: int | None)', () => {
  const at = (config: Record<string, unknown>) => stepConfigOf(effectiveSettings('trl', [{ origin: 'file', trainer: 'trl', config, run: {} }]), 7);
  it("the studio loss's dr_grpo refuses it as TRL's does; under another loss type its L_max is the batch's width, never GRPOConfig's 512", () => {
    expect(() => at({ loss_type: 'dr_grpo', max_completion_length: null })).toThrow(/^config\.max_completion_length: null with loss_type dr_grpo: TRL divides by/);
    expect(at({ loss_type: 'dapo', max_completion_length: null }).loss.max_completion_length).toBe(7);
    expect(at({ loss_type: 'dapo' }).loss.max_completion_length).toBe(512);
  });
});
