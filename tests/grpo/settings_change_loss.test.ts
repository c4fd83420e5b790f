// Issue 20, "every loss-affecting row changes the loss it should (or the file is refused naming the field)".
// settings_one_answer.test.ts checks that each loss-side row REACHES the objective's config; this walk checks
// that it MOVES the number. For every row of scope `loss` / `batch` of the TRL, verl and OpenRLHF tables, every
// run-context row (the normalisers' inputs) and the rows of other scopes the loss reads (EXTRA), the step's loss
// on one fixed synthetic batch is computed twice — at the row's default and at another valid value — through the
// step's own path: effectiveSettings → stepConfigOf → (trainer objective: trainerInputs → trainerObjective →
// trainerLossFromLogps | no objective: the studio loss on the same log-probs), and must change (or the
// resolution must refuse, naming the row). A row only matters in a context (sapo temperatures under sapo, …):
// CONTEXT gives it as test data. A row without a context entry whose change does not move the loss fails, so a
// new table row must be covered here or exempted in EXEMPT with its reason. KNOWN_BUGS lists rows that should move
// the loss and do not (the walk asserts they still fail, so a fix flags the stale entry). A second walk checks that a
// row left out of the file computes what its table default computes (DEFAULT_MISMATCH: the known exceptions).
// No expected number is copied from the implementation: only "it changed", beyond float32 noise.
import { describe, expect, it } from 'vitest';
import { testGpu } from '../helpers/gpu.ts';
import type { PaddedBatch } from '../../src/grpo/batch.ts';
import { grpo_loss_from_logps } from '../../src/grpo/loss_from_logps.ts';
import { effectiveSettings } from '../../src/grpo/settings/effective.ts';
import { TRAINER_TABLES } from '../../src/grpo/settings/trainers.ts';
import type { SettingSpec, TrainerId } from '../../src/grpo/settings/types.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { trainerInputs, trainerObjective } from '../../src/grpo/step_objective.ts';
import { otherValue } from '../helpers/setting_values.ts';

// ---------------------------------------------------------------------------------------------------------------
// The batch: B = 6 completions in two groups of 3, T = 5, a vocabulary of 6 (EOS = 2, pad = 0). Row 2 has no EOS
// (truncated); the others end at varied lengths. Advantages of both signs. Log-probs and entropies come from
// fixed logits at the step's temperature (the forward); old / ref / sampling log-probs are the τ = 1 log-probs
// shifted per token so that ratios are off 1 (some clip low / high, one A < 0 token beyond any dual clip),
// IS ratios exp(old − sampling) fall outside [0.5, 3] and [0.5, 5] for some tokens and sequences.

const B = 6;
const T = 5;
const V = 6;
const N = B * T;
const EOS = 2;
const IDS = [
  [3, 4, 5, 2, 0],
  [4, 3, 2, 0, 0],
  [5, 5, 4, 3, 1], // no EOS: truncated
  [3, 2, 0, 0, 0],
  [4, 5, 3, 5, 2],
  [1, 3, 4, 2, 0],
];
const LENGTHS = [4, 3, 5, 2, 5, 4];
const ADVANTAGES = [1.2, -0.8, -0.4, 0.9, -1.1, 0.2];
/** old − current (τ = 1): ratio r = exp(−d). */
const D = [
  [-0.3, 0.1, -0.05, 0.4, 0],
  [0.5, -0.1, -0.4, 0, 0],
  [0.15, -0.25, 0.3, -0.6, 0.05],
  [-0.45, 0.2, 0, 0, 0],
  [-1.6, 0.2, -0.3, 0.35, -0.15],
  [0.05, -0.35, 0.25, -0.1, 0],
];
/** ref − current (τ = 1). */
const E = [
  [0.3, -0.2, 0.1, 0.5, 0],
  [-0.4, 0.25, 0.6, 0, 0],
  [0.05, -0.3, 0.2, -0.15, 0.45],
  [0.35, -0.5, 0, 0, 0],
  [-0.25, 0.4, 0.1, -0.35, 0.2],
  [0.15, 0.3, -0.45, 0.05, 0],
];
/** old − sampling: the vLLM / rollout IS log-ratio. */
const S = [
  [0.2, -0.1, 0.05, 0.1, 0],
  [1.3, 0.4, 0.2, 0, 0],
  [-0.9, -0.3, 0.1, -0.2, 0.05],
  [0.6, 0.45, 0, 0, 0],
  [1.8, -0.2, 0.3, 0.1, -0.4],
  [-0.1, 0.05, -0.75, 0.15, 0],
];

const LOGITS = Float64Array.from({ length: N * V }, (_, k) => {
  const [i, v] = [Math.floor(k / V), k % V];
  const [b, t] = [Math.floor(i / T), i % T];
  return 1.5 * Math.sin(0.9 * b + 1.7 * t + 0.22 * v * (v + 1) + 0.3) + 0.4 * Math.cos(2.1 * v - t);
});

/** The forward at temperature τ: log-prob of each completion id and the entropy, every position scored. */
function forward(tau: number): { logp: Float32Array; entropy: Float32Array } {
  const logp = new Float32Array(N);
  const entropy = new Float32Array(N);
  for (let i = 0; i < N; i++) {
    const z = Array.from(LOGITS.subarray(i * V, (i + 1) * V), (x) => x / tau);
    const m = Math.max(...z);
    const lse = m + Math.log(z.reduce((s, x) => s + Math.exp(x - m), 0));
    logp[i] = z[IDS[Math.floor(i / T)][i % T]] - lse;
    entropy[i] = -z.reduce((s, x) => s + Math.exp(x - lse) * (x - lse), 0);
  }
  return { logp, entropy };
}

const flat = (rows: number[][]) => rows.flat();
const mask = Int32Array.from(flat(IDS.map((row, b) => row.map((_, t) => (t < LENGTHS[b] && (row.indexOf(EOS) < 0 || t <= row.indexOf(EOS)) ? 1 : 0)))));
const CUR = forward(1).logp;
const OLD = Float32Array.from(flat(D), (d, i) => (mask[i] ? CUR[i] + d : 0));
const REF = Float32Array.from(flat(E), (e, i) => CUR[i] + e);
const SAMPLING = Float32Array.from(flat(S), (s, i) => (mask[i] ? OLD[i] - s : 0));

const padded: PaddedBatch = {
  B, G: 3, P: 1, C: T, L: T + 1, pad_token_id: 0, eos_token_ids: [EOS], position_ids_mode: 'from_attention_mask',
  input_ids: Int32Array.from(IDS.flatMap((row) => [1, ...row])),
  attention_mask: Int32Array.from(IDS.flatMap((_, b) => [1, ...Array.from(mask.subarray(b * T, (b + 1) * T))])),
  position_ids: Int32Array.from({ length: B * (T + 1) }, (_, k) => k % (T + 1)),
  prompt_mask: new Int32Array(B).fill(1),
  completion_ids: Int32Array.from(flat(IDS)),
  completion_mask: mask,
  prompt_lengths: new Int32Array(B).fill(1),
  completion_lengths: Int32Array.from(LENGTHS),
  advantages: Float32Array.from(ADVANTAGES),
  old_per_token_logps: OLD,
  ref_per_token_logps: REF,
  sampling_per_token_logps: SAMPLING,
};

// ---------------------------------------------------------------------------------------------------------------
// The step's loss for one file layer.

interface Computed {
  loss: number;
  path: 'trainer' | 'studio';
  per_token_loss: ArrayLike<number> | null;
  dlogp: ArrayLike<number> | null;
  dentropy: ArrayLike<number> | null;
}
type Outcome = Computed | { error: string };

/** Errors that are a refusal of the settings (each names its field), not a failure of the test. */
const REFUSALS = new Set(['SettingsError', 'GrpoLossError', 'BatchFormatError', 'OptimizerConfigError']);

async function stepLoss(trainer: TrainerId, config: Record<string, unknown>, run: Record<string, unknown>): Promise<Outcome> {
  const gpu = await testGpu();
  try {
    const cfg = stepConfigOf(effectiveSettings(trainer, [{ origin: 'file', trainer, config, run }]), T);
    const tau = cfg.loss.temperature;
    const f = forward(tau);
    if (cfg.trainer) {
      const p = trainerInputs(
        { padded, per_token_logps: f.logp, per_token_entropy: f.entropy, advantages: ADVANTAGES, ref_per_token_logps: REF, old_per_token_logps: f.logp, temperature: tau },
        cfg.trainer,
      );
      const { out, grad } = await trainerObjective(gpu, p);
      grad.dlogp.destroy();
      grad.dentropy?.destroy();
      return { loss: out.loss, path: 'trainer', per_token_loss: out.per_token_loss, dlogp: out.dlogp ?? null, dentropy: out.dentropy ?? null };
    }
    // No trainer objective: the step's loss is the studio loss (src/grpo/loss.ts) on the same log-probs.
    const r = await grpo_loss_from_logps(gpu, { B, T, per_token_logps: f.logp, completion_mask: mask, advantages: Float32Array.from(ADVANTAGES), old_per_token_logps: OLD, ref_per_token_logps: REF }, cfg.loss);
    return { loss: r.loss, path: 'studio', per_token_loss: r.per_token_loss, dlogp: r.dlogp, dentropy: null };
  } catch (e) {
    if (e instanceof Error && REFUSALS.has(e.name)) return { error: e.message };
    throw e;
  }
}

/** Beyond float32 noise: |Δ| > 1e-6 · (1 + |x|). */
const differs = (a: number, b: number) => !(Math.abs(a - b) <= 1e-6 * (1 + Math.max(Math.abs(a), Math.abs(b))));
/** Over the completion tokens; a term a path does not form (null) is 0 there. */
const arrayDiffers = (a: ArrayLike<number> | null, b: ArrayLike<number> | null) => {
  for (let i = 0; i < N; i++) if (mask[i] && differs(a?.[i] ?? 0, b?.[i] ?? 0)) return true;
  return false;
};

/** What moved between two outcomes: 'loss', else the part of the gradient that did, else null. */
function moved(a: Computed, b: Computed): 'loss' | 'per_token_loss' | 'dlogp' | 'dentropy' | null {
  if (!Number.isFinite(a.loss) || !Number.isFinite(b.loss)) return Object.is(a.loss, b.loss) ? null : 'loss';
  if (differs(a.loss, b.loss)) return 'loss';
  if (arrayDiffers(a.per_token_loss, b.per_token_loss)) return 'per_token_loss';
  if (arrayDiffers(a.dlogp, b.dlogp)) return 'dlogp';
  if (arrayDiffers(a.dentropy, b.dentropy)) return 'dentropy';
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// The rows, their contexts and the exemptions (test data).

/** A row's key: its name for a config row, `run.NAME` for a run-context row. */
type Key = string;

interface Context {
  /** Other values of the layer that make the row matter (config / run, trainer's own names). */
  config?: Record<string, unknown>;
  run?: Record<string, unknown>;
  /** The values compared, the default first; absent: the default and one derived from the row's own bounds. */
  values?: unknown[];
  /** Why the context / values (one line). */
  why: string;
  /**
   * The row shapes the gradient only (the loss value may stay): a change of per_token_loss / dlogp / dentropy
   * passes. Absent: the loss itself must change.
   */
  gradientOnly?: boolean;
}

/** Every trainer's base layer: what its shipped defaults need to run one update of this batch off-policy. */
const BASE: Record<TrainerId, { config: Record<string, unknown>; run: Record<string, unknown> }> = {
  trl: { config: {}, run: {} },
  // verl refuses ppo_micro_batch_size_per_gpu null without use_dynamic_bsz (verl_rules.ts); = ppo_mini_batch_size
  // is one micro-batch per mini-batch (loss scale 1). on_policy false: the stored old log-probs are used (ratio ≠ 1).
  verl: { config: { ppo_micro_batch_size_per_gpu: 256 }, run: { on_policy: false } },
  openrlhf: { config: {}, run: {} },
};

/** Rows of another scope the loss reads (the walk takes scope loss / batch and run-context rows). */
const EXTRA: Record<TrainerId, readonly Key[]> = {
  trl: ['temperature', 'use_vllm'],
  verl: ['ppo_epochs', 'ppo_mini_batch_size', 'ppo_micro_batch_size_per_gpu', 'use_dynamic_bsz'],
  openrlhf: [],
};

const VLLM = { use_vllm: true };
/**
 * num_items_in_batch as TRL's dumps carry it, = this micro-batch's tokens (the value TRL's default takes here): it
 * keeps the step on TRL's objective at both values of a vllm_* row, so only the row's own effect is measured.
 */
const TRL_OBJECTIVE = { num_items_in_batch: mask.reduce((a, m) => a + m, 0) };
const ENGINE = { use_legacy_worker_impl: 'disable' };

const CONTEXT: Record<TrainerId, Record<Key, Context>> = {
  trl: {
    loss_type: { config: { steps_per_generation: 1 }, run: { gradient_accumulation_steps: 2 }, values: ['dapo', 'grpo', 'bnpo', 'dr_grpo', 'cispo', 'sapo', 'luspo', 'vespo'], why: 'every loss type differs from dapo; on one micro-batch of one process without num_items_in_batch, dapo ≡ bnpo unless gas > 1 (bnpo divides by it)' },
    use_bias_correction_kl: { config: { beta: 0.1 }, why: 'scales the KL term: needs beta ≠ 0' },
    off_policy_mask_threshold: { config: { use_vllm: true, vllm_importance_sampling_correction: false }, values: [null, 0.1], why: 'with use_vllm (TRL holds sampling log-probs only then): a negative-advantage row whose mean(sampling − logp) is above 0.1 and below the derived 0.5' },
    use_adaptive_entropy: { config: { entropy_coef: 0.1 }, why: 'gates entropy_coef: with no last world entropy (+inf) adaptive mode applies 0' },
    entropy_target: { config: { entropy_coef: 0.1, use_adaptive_entropy: true }, run: { last_world_entropy: 0.5 }, why: 'the gate last_world_entropy ≤ entropy_target flips between 0.2 and 0.7' },
    sapo_temperature_pos: { config: { loss_type: 'sapo' }, why: 'sapo only' },
    sapo_temperature_neg: { config: { loss_type: 'sapo' }, why: 'sapo only' },
    vespo_k_pos: { config: { loss_type: 'vespo' }, why: 'vespo only' },
    vespo_lambda_pos: { config: { loss_type: 'vespo' }, why: 'vespo only' },
    vespo_k_neg: { config: { loss_type: 'vespo' }, why: 'vespo only' },
    vespo_lambda_neg: { config: { loss_type: 'vespo' }, why: 'vespo only' },
    use_liger_kernel: { run: { num_items_in_batch: 50 }, why: "Liger's dapo divides by this micro-batch's tokens, TRL's by num_items_in_batch" },
    max_completion_length: { config: { loss_type: 'dr_grpo' }, why: 'dr_grpo divides by B · max_completion_length' },
    use_vllm: { why: 'enables the vLLM IS correction (sampling log-probs present)' },
    vllm_importance_sampling_correction: { config: VLLM, why: 'with use_vllm' },
    vllm_importance_sampling_mode: { config: VLLM, run: TRL_OBJECTIVE, values: ['sequence_mask', 'sequence_truncate', 'token_mask', 'token_truncate'], why: 'with use_vllm; every mode differs on ratios out of [min, max]' },
    vllm_importance_sampling_clip_min: { config: VLLM, run: TRL_OBJECTIVE, why: 'with use_vllm; ratios below 0.5' },
    vllm_importance_sampling_clip_max: { config: { ...VLLM, vllm_importance_sampling_mode: 'token_truncate' }, run: TRL_OBJECTIVE, why: 'with use_vllm; token ratios above 3 truncated at 3 or 3.5' },
    vllm_importance_sampling_cap: { config: VLLM, run: TRL_OBJECTIVE, why: 'with use_vllm; the deprecated alias replaces clip_max' },
    kl_estimator: { config: { beta: 0.1 }, why: 'studio-only: the studio loss shows k1 / k2 / k3 of the KL term (needs beta ≠ 0)' },
    'run.num_processes': { run: { num_items_in_batch: 30 }, why: 'dapo divides num_items_in_batch by the processes (without it TRL refuses, tested in trainer_from_logps)' },
    'run.gradient_accumulation_steps': { config: { loss_type: 'grpo', steps_per_generation: 1 }, why: 'grpo / bnpo / dr_grpo / sapo / luspo divide by it; dapo does not' },
    'run.rank': { config: { loss_type: 'bnpo' }, run: { num_processes: 2 }, values: [0, [0, 1]], why: "a list: the batch holds both processes' rows (rows 0–2, 3–5), each process its own bnpo token count, the two averaged" },
    'run.eos_token_id': { config: { mask_truncated_completions: true }, values: [null, 4], why: "mask_truncated_completions: rows ending in the batch's EOS 2 are truncated where the tokenizer's EOS is another id" },
    'run.last_world_entropy': { config: { entropy_coef: 0.1, use_adaptive_entropy: true }, values: [null, 0.1], why: 'adaptive gate: +inf (null) applies 0, 0.1 ≤ target applies the coefficient' },
    'run.adaptive_entropy_coef': { config: { entropy_coef: 0.1, use_adaptive_entropy: true }, run: { last_world_entropy: 0.1 }, values: [null, 0.3], why: "adaptive: the run's current coefficient replaces the start value" },
  },
  verl: {
    loss_mode: { config: { clip_cov_ratio: 0.5 }, values: ['vanilla', 'gspo', 'sapo', 'cispo', 'gpg', 'clip_cov', 'kl_cov', 'geo_mean'], why: 'every mode differs from vanilla; clip_cov needs slots for its candidates (else refused)' },
    loss_agg_mode: { values: ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'], why: 'every aggregation differs' },
    clip_ratio: { config: { clip_ratio_low: null, clip_ratio_high: null }, why: 'read only where clip_ratio_low / clip_ratio_high are null' },
    use_kl_loss: { why: 'adds kl_loss_coef · KL' },
    use_rollout_log_probs: { run: { on_policy: true }, why: 'on-policy: without it old := log_prob.detach() (ratio 1)' },
    kl_loss_coef: { config: { use_kl_loss: true }, why: 'with use_kl_loss' },
    // k1 = kl, k2 = mse, k3 = low_var_kl are verl's aliases: only the distinct estimators are compared.
    kl_loss_type: { config: { use_kl_loss: true }, values: ['low_var_kl', 'kl', 'abs', 'mse'], why: 'with use_kl_loss; aliases (k1, k2, k3) name the same estimators' },
    loss_scale_factor: { config: { ...ENGINE, loss_agg_mode: 'seq-mean-token-sum-norm' }, why: 'engine worker, seq-mean-token-sum-norm only' },
    tau_pos: { config: { loss_mode: 'sapo' }, why: 'sapo only' },
    tau_neg: { config: { loss_mode: 'sapo' }, why: 'sapo only' },
    clip_cov_ratio: { config: { loss_mode: 'clip_cov' }, values: [0.0002, 0.5], why: 'clip_cov: the default has fewer slots than candidates (verl draws them at random: refused); 0.5 cuts every candidate' },
    clip_cov_lb: { config: { loss_mode: 'clip_cov', clip_cov_ratio: 0.9 }, values: [1, -1], why: 'clip_cov: a lower bound below more covariances adds candidates' },
    clip_cov_ub: { config: { loss_mode: 'clip_cov', clip_cov_ratio: 0.9 }, values: [5, 1.2], why: 'clip_cov: an upper bound below some candidates removes them' },
    kl_cov_ratio: { config: { loss_mode: 'kl_cov' }, why: 'kl_cov only' },
    ppo_kl_coef: { config: { loss_mode: 'kl_cov' }, why: 'kl_cov only' },
    // auto and enable are the same worker (the legacy dp_actor); disable is the engine worker.
    use_legacy_worker_impl: { config: { ppo_micro_batch_size_per_gpu: 64 }, values: ['auto', 'disable'], why: 'the legacy loop scales by 1 / (mini // micro), the engine worker does not' },
    rollout_is: { values: [null, 'sequence', 'token'], why: 'decoupled correction with the rollout log-probs (null, the trainer config\'s default: none)' },
    rollout_is_threshold: { config: { rollout_is: 'sequence' }, why: 'with rollout_is' },
    rollout_is_batch_normalize: { config: { rollout_is: 'sequence' }, why: 'with rollout_is' },
    rollout_rs: { config: { rollout_rs_threshold: '0.5_2' }, values: [null, 'token_k1'], why: 'rejection sampling needs a threshold' },
    rollout_rs_threshold: { config: { rollout_rs: 'token_k1' }, values: [null, '0.5_2', '0.8_1.5'], why: 'with rollout_rs (null is refused, naming the field)' },
    loss_type: { config: { bypass_mode: true }, why: 'bypass mode only' },
    ppo_epochs: { run: { on_policy: null }, why: 'on_policy is derived from num_mini_batches = 1 and ppo_epochs = 1' },
    ppo_mini_batch_size: { config: { ppo_micro_batch_size_per_gpu: 64 }, values: [256, 128], why: 'the loop scale 1 / (mini // micro)' },
    ppo_micro_batch_size_per_gpu: { values: [null, 256, 128], why: 'null is refused without use_dynamic_bsz (naming it); then the loop scale 1 / (mini // micro)' },
    use_dynamic_bsz: { why: 'the loop scale B / ppo_mini_batch_size' },
    'run.num_mini_batches': { run: { on_policy: null }, why: 'on_policy is derived from num_mini_batches = 1 and ppo_epochs = 1' },
    'run.on_policy': { values: [null, false], why: 'null derives on-policy (ratio 1) here; false uses the stored old log-probs' },
    'run.data_parallel_size': { config: { ppo_mini_batch_size: 1, ppo_micro_batch_size_per_gpu: 1 }, run: { mini_batch_index: 0 }, values: [null, 1, 2, 3], why: "with mini_batch_index: null is refused (naming it); 1 rank takes row 0, 2 ranks rows 0 and 3 (averaged), 3 ranks rows 0, 2, 4" },
    'run.mini_batch_index': { config: { ppo_mini_batch_size: 3, ppo_micro_batch_size_per_gpu: 3 }, run: { data_parallel_size: 1 }, values: [null, 0, 1], why: 'a batch of two mini-batches: null is refused (naming ppo_mini_batch_size and the row); 0 / 1 take the first / second three rows' },
    'run.dp_size': { config: ENGINE, why: 'engine worker only' },
    'run.batch_num_tokens': { config: ENGINE, why: 'engine worker, token-mean' },
    'run.global_batch_size': { config: { ...ENGINE, loss_agg_mode: 'seq-mean-token-mean' }, why: 'engine worker, seq-mean-*' },
  },
  openrlhf: {
    'actor.eps_clip_low_high': { values: [null, [0.1, 0.3]], why: 'a number list: no bounds to derive it from' },
    'algo.kl.init_coef': { config: { 'algo.kl.use_loss': true }, why: 'with use_loss' },
    'algo.kl.target': { config: { 'algo.kl.use_loss': true }, values: [null, 0.1], why: 'with use_loss: set, the adaptive controller is refused (naming it)' },
    'algo.kl.estimator': { config: { 'algo.kl.use_loss': true }, values: ['k1', 'k2', 'k3'], why: 'with use_loss' },
    'algo.advantage.is_correction_threshold': { config: { 'algo.advantage.is_correction_enable': true }, values: [[0.5, 5], [0.8, 2]], why: 'with is_correction_enable; a number list' },
    'algo.advantage.is_correction_type': { config: { 'algo.advantage.is_correction_enable': true }, values: ['tis', 'icepop', 'seq-mask-tis'], why: 'with is_correction_enable' },
    'run.other_samples': { config: { 'actor.policy_loss_type': 'gspo' }, why: 'gspo aggregates per sample' },
    'run.loss_batch_info': { config: { 'actor.policy_loss_type': 'gspo' }, values: [null, { dp_size: 2, batch_num_tokens: 12, global_batch_size: 3 }], why: "an object: _optimizer_step_loss_norm's three normalisers (gspo reads global_batch_size too)" },
    openrlhf_code: { run: { num_processes: 2 }, values: ['3c3be62', 'before-ed62d0e2'], why: 'the code before ed62d0e2 takes the micro-batch masked_mean: it differs from the window normaliser once dp_size > 1' },
  },
};

/** Rows that cannot change this loss, with the reason. */
const EXEMPT: Record<TrainerId, Record<Key, string>> = {
  trl: {
    entropy_coef_min: "adaptive entropy: bounds the coefficient TRL sets for the NEXT step (grpo_trainer.py _compute_loss updates self.entropy_coef after this step's loss)",
    entropy_coef_max: 'adaptive entropy: bounds the coefficient for the next step (as entropy_coef_min)',
    entropy_coef_delta: 'adaptive entropy: the step of the coefficient for the next step (as entropy_coef_min)',
  },
  verl: {
    calculate_entropy: 'only shows the entropy: the loss reads it through entropy_coeff, a row of its own',
  },
  openrlhf: {},
};

/**
 * Rows that should change the step's loss and do not: each entry says why. The walk asserts they still fail, so
 * a fix makes the test fail until the entry is removed.
 */
const KNOWN_BUGS: Record<TrainerId, Record<Key, string>> = {
  trl: {},
  verl: {},
  openrlhf: {},
};

/** Scope of the walk: loss / batch config rows, run-context rows (scope run), and EXTRA. */
function walked(trainer: TrainerId): Array<{ key: Key; spec: SettingSpec; where: 'config' | 'run' }> {
  const own = TRAINER_TABLES[trainer].config.filter((s) => (s.scope === 'loss' || s.scope === 'batch' || EXTRA[trainer].includes(s.name)));
  const run = TRAINER_TABLES[trainer].run.filter((s) => s.scope === 'run');
  return [...own.map((spec) => ({ key: spec.name, spec, where: 'config' as const })), ...run.map((spec) => ({ key: `run.${spec.name}`, spec, where: 'run' as const }))];
}

/**
 * The row's failures (empty: it changes the step's loss, or the resolution refuses naming it). Values are compared
 * with the default (values[0]); where the default itself is refused (naming the row), also with values[1].
 */
async function checkRow(trainer: TrainerId, key: Key, row: { spec: SettingSpec; where: 'config' | 'run' }): Promise<string[]> {
  const ctx = CONTEXT[trainer][key];
  const values = ctx?.values ?? [row.spec.default, otherValue(row.spec)];
  if (values.length < 2 || values[1] === undefined) return [`${key}: no other value derives from the row (${row.spec.type}): give CONTEXT.${trainer}["${key}"].values`];
  if (JSON.stringify(values[0]) !== JSON.stringify(row.spec.default)) return [`${key}: the values must start at the row's default ${JSON.stringify(row.spec.default)}`];
  const layer = (v: unknown) => {
    const config = { ...BASE[trainer].config, ...ctx?.config };
    const run = { ...BASE[trainer].run, ...ctx?.run };
    (row.where === 'run' ? run : config)[row.spec.name] = v;
    return stepLoss(trainer, config, run);
  };
  const outcomes = [];
  for (const v of values) outcomes.push(await layer(v));
  const pairs: Array<[number, number]> = values.slice(1).map((_, i) => [0, i + 1]);
  if ('error' in outcomes[0]) pairs.push(...values.slice(2).map((_, i): [number, number] => [1, i + 2]));
  const failures: string[] = [];
  for (const [i, j] of pairs) {
    const [a, b] = [outcomes[i], outcomes[j]];
    const what = `${trainer} ${key}: ${JSON.stringify(values[i])} → ${JSON.stringify(values[j])}`;
    const refused = [a, b].find((o): o is { error: string } => 'error' in o);
    if (refused) {
      if (!refused.error.includes(row.spec.name)) failures.push(`${what}: refused for another reason: ${refused.error}`);
      continue;
    }
    const [x, y] = [a as Computed, b as Computed];
    const m = moved(x, y);
    const hint = ctx ? '' : ' — the row has no CONTEXT entry: give it the context in which it matters, or EXEMPT it with the reason';
    if (m === null) failures.push(`${what}: the step's loss did not move (${x.path} ${x.loss} → ${y.path} ${y.loss})${hint}`);
    else if (m !== 'loss' && !ctx?.gradientOnly) failures.push(`${what}: only the ${m} moved (${x.path} → ${y.path}), the loss stayed ${x.loss}`);
  }
  return failures;
}

describe('the test data names real rows', () => {
  for (const trainer of ['trl', 'verl', 'openrlhf'] as const) {
    it(`${trainer}: every CONTEXT, EXEMPT and EXTRA key is a walked row; none is both covered and exempt`, () => {
      const keys = new Set(walked(trainer).map((r) => r.key));
      for (const k of EXTRA[trainer]) expect(TRAINER_TABLES[trainer].config.some((s) => s.name === k), `EXTRA ${k}`).toBe(true);
      for (const k of Object.keys(CONTEXT[trainer])) expect(keys.has(k), `CONTEXT ${trainer} ${k}`).toBe(true);
      for (const k of Object.keys(EXEMPT[trainer])) {
        expect(keys.has(k), `EXEMPT ${trainer} ${k}`).toBe(true);
        expect(CONTEXT[trainer][k], `${k} is both covered and exempt`).toBeUndefined();
      }
    });
  }
});

for (const trainer of ['trl', 'verl', 'openrlhf'] as const) {
  describe(`${trainer}: every loss-affecting row changes the step's loss (or is refused, naming it)`, () => {
    it.each(walked(trainer).filter((r) => !(r.key in EXEMPT[trainer])).map((r) => [r.key, r] as const))('%s', async (key, row) => {
      const failures = await checkRow(trainer, key, row);
      const known = KNOWN_BUGS[trainer][key];
      if (known) expect(failures, `${trainer} ${key} is listed in KNOWN_BUGS but now changes the loss: remove the entry`).not.toEqual([]);
      else expect(failures).toEqual([]);
    }, 60_000);
  });
}

/**
 * Where a file leaves a row out, the step must compute what it computes with the row at its table default (one
 * table, one default): otherwise "the default" of the walk above is not the default a file gets.
 */
const DEFAULT_MISMATCH: Record<TrainerId, Record<Key, string>> = {
  trl: {},
  verl: {},
  openrlhf: {},
};

for (const trainer of ['trl', 'verl', 'openrlhf'] as const) {
  describe(`${trainer}: a row left out is its table default`, () => {
    it.each(walked(trainer).map((r) => [r.key, r] as const))('%s', async (key, row) => {
      const ctx = CONTEXT[trainer][key];
      const config = { ...BASE[trainer].config, ...ctx?.config };
      const run = { ...BASE[trainer].run, ...ctx?.run };
      const target = row.where === 'run' ? run : config;
      delete target[row.spec.name];
      const absent = await stepLoss(trainer, config, run);
      target[row.spec.name] = row.spec.default;
      const given = await stepLoss(trainer, config, run);
      const same = 'error' in absent || 'error' in given ? JSON.stringify(absent) === JSON.stringify(given) : !differs(absent.loss, given.loss);
      const text = `${trainer} ${key}: left out ${'error' in absent ? absent.error : `${absent.path} ${absent.loss}`}, at its default ${JSON.stringify(row.spec.default)} ${'error' in given ? given.error : `${given.path} ${given.loss}`}`;
      if (DEFAULT_MISMATCH[trainer][key]) expect(same, `${text}: listed in DEFAULT_MISMATCH but now agrees: remove the entry`).toBe(false);
      else expect(same, text).toBe(true);
    }, 60_000);
  });
}

describe('exempt rows that the test can still check', () => {
  it('TRL entropy_coef_min / max / delta leave this step alone (they set the next step’s coefficient)', async () => {
    const ctx = { entropy_coef: 0.1, use_adaptive_entropy: true };
    const run = { last_world_entropy: 0.1 };
    const a = (await stepLoss('trl', ctx, run)) as Computed;
    for (const [k, v] of [['entropy_coef_min', 0.05], ['entropy_coef_max', 0.5], ['entropy_coef_delta', 0.1]] as const) {
      const b = (await stepLoss('trl', { ...ctx, [k]: v }, run)) as Computed;
      expect(moved(a, b), k).toBeNull();
    }
  });
});
