// A verl dump is saved after verl's rollout correction (compute_rollout_correction_and_add_to_batch runs before
// compute_advantage in ray_trainer.py fit): its response_mask is after rejection sampling and its
// rollout_is_weights are what the loss multiplied by. Built from verl's own outputs (the golden trainer cases'
// loss_mask and importance_sampling_ratio, tests/golden/trainers/README.md) as the hook would save them: the reader
// takes them, and the objective on the read batch's mask gives the golden loss; settings that do not give the
// dump's weights or mask, and verl's combinations the studio cannot redo over the rejected mask, are one line,
// naming the sample, the position and (where they exist) the settings that would.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { expectClose } from '../helpers/close.ts';
import { parseSafeTensors, toF64, toI32, writeSafeTensors, type SafeTensors } from '../../src/io/safetensors.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { readTrainerCase } from '../../src/cli/trainer_case.ts';
import { trainerLossFromLogps } from '../../src/grpo/trainers/from_logps.ts';

type Tensors = Parameters<typeof writeSafeTensors>[0];

function golden(file: string): SafeTensors {
  return parseSafeTensors(new Uint8Array(readFileSync(path.join(GOLDEN_ROOT, 'trainers', 'verl', file))), file);
}

/**
 * The config the golden harness ran: the case's fields over verl's RolloutCorrectionConfig dataclass, whose
 * rollout_is is "sequence" (verl/trainer/config/algorithm.py; tests/golden/trainers/README.md).
 */
const caseConfig = (st: SafeTensors): Record<string, unknown> => ({ rollout_is: 'sequence', ...JSON.parse(st.metadata.config) });

/** The case as verl's hook saves the batch: one prompt token, response_mask after rejection, the weights verl applied. */
function dumpOf(st: SafeTensors, o: { config?: Record<string, unknown>; responseMask?: ArrayLike<number>; weights?: ArrayLike<number> | null; drop?: string[] } = {}): Uint8Array {
  const [B, T] = st.tensors.get('completion_mask')!.shape;
  const cm = toI32(st, 'completion_mask');
  const i64 = (a: ArrayLike<number>, shape: number[]) => ({ dtype: 'I64' as const, shape, data: BigInt64Array.from(Array.from(a), (x) => BigInt(Math.round(x))) });
  const f32 = (a: ArrayLike<number>) => ({ dtype: 'F32' as const, shape: [B, T], data: Float32Array.from(a) });
  const tensors: Tensors = {
    prompts: i64(new Array(B).fill(7), [B, 1]),
    responses: i64(toI32(st, 'completion_ids'), [B, T]),
    attention_mask: i64(Array.from({ length: B }, (_, b) => [1, ...cm.subarray(b * T, b * T + T)]).flat(), [B, T + 1]),
    response_mask: i64(o.responseMask ?? toF64(st, 'loss_mask'), [B, T]),
    advantages: f32(toF64(st, 'advantages')),
    rollout_log_probs: f32(toF64(st, 'sampling_per_token_logps')),
  };
  if (st.tensors.has('old_per_token_logps')) tensors.old_log_probs = f32(toF64(st, 'old_per_token_logps'));
  const config: Record<string, unknown> = { ...caseConfig(st), rollout_n: 2, ...o.config };
  const weights = o.weights === undefined ? (config.rollout_is ? toF64(st, 'importance_sampling_ratio') : null) : o.weights;
  if (weights) tensors.rollout_is_weights = f32(weights);
  for (const k of o.drop ?? []) delete tensors[k];
  return writeSafeTensors(tensors, { uid: JSON.stringify(Array.from({ length: B }, (_, b) => `g${b >> 1}`)), config: JSON.stringify(config) });
}

const read = (bytes: Uint8Array) => readAnyBatch(bytes, 'verl.safetensors');

// The golden cases whose verl run corrected in decoupled mode (the driver, before the dump).
const DECOUPLED = ['case_06.safetensors', 'case_07.safetensors', 'case_10.safetensors'];

describe("verl dump after the rollout correction: verl's weights and rejected mask", () => {
  it.each(DECOUPLED)('%s: read as saved, and the loss on its rejected mask is the golden loss', async (file) => {
    const st = golden(file);
    const cfg = caseConfig(st);
    expect(cfg.bypass_mode ?? false).toBe(false);
    const { batch } = read(dumpOf(st));
    const c = readTrainerCase(st, file);
    const { logits: _l, V: _v, ...inputs } = c;
    // The read batch's loss mask: completion_mask (what verl attends) × tool_mask (response_mask inside it).
    const effective = Int32Array.from((batch.completion_mask as number[][]).flatMap((m, b) => m.map((x, t) => x * (batch.tool_mask?.[b][t] ?? 1))));
    expect(Array.from(effective)).toEqual(Array.from(toF64(st, 'loss_mask')));
    const scored = { per_token_logps: Float32Array.from(toF64(st, 'per_token_logps')), per_token_entropy: Float32Array.from(toF64(st, 'per_token_entropy')), temperature: 1 };
    const r = await trainerLossFromLogps(await testGpu(), { ...inputs, completion_mask: effective }, scored);
    expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${file} loss from the dump` });
  }, 60_000);

  it('settings that do not give the dump\'s weights: one line naming the position and the settings that do', () => {
    // case_07: sequence weights with batch normalisation; case_06: token weights truncated at 1.5.
    expect(() => read(dumpOf(golden('case_07.safetensors'), { config: { rollout_is_batch_normalize: false } }))).toThrow(
      /^verl\.safetensors: rollout_is_weights at sample \d+, response position \d+ is [\d.e-]+, but rollout_is = sequence, rollout_is_threshold 2, rollout_is_batch_normalize false over old_log_probs − rollout_log_probs give [\d.e-]+: the dump's weights are those of rollout_is = sequence, rollout_is_threshold 2, rollout_is_batch_normalize true; give the run's algorithm\.rollout_correction$/,
    );
    const six = golden('case_06.safetensors');
    expect(Math.max(...toF64(six, 'importance_sampling_ratio'))).toBe(1.5); // the case truncates: its largest weight is the threshold
    expect(() => read(dumpOf(six, { config: { rollout_is_threshold: 3 } }))).toThrow(/the dump's weights are those of rollout_is = token, rollout_is_threshold 1\.5, rollout_is_batch_normalize false/);
    expect(() => read(dumpOf(six, { config: { rollout_is: 'sequence' } }))).toThrow(/the dump's weights are those of rollout_is = token, rollout_is_threshold 1\.5/);
    // Weights no setting gives (another run's, here every one 0.7 times verl's): said, with nothing offered.
    expect(() => read(dumpOf(six, { weights: toF64(six, 'importance_sampling_ratio').map((w) => 0.7 * w) }))).toThrow(/: no rollout_is, threshold or normalisation gives them: the settings or the log-probs are not the run's$/);
  });

  it('a rejection the dump\'s mask does not show: one line naming the position', () => {
    // case_10 rejected with seq_mean_k3 ≤ 0.05; redone at ≤ 0.01 it drops rows verl kept.
    expect(() => read(dumpOf(golden('case_10.safetensors'), { config: { rollout_rs_threshold: '0.01' } }))).toThrow(
      /^verl\.safetensors: response_mask keeps sample \d+, response position \d+, which rollout_rs = seq_mean_k3 \(rollout_rs_threshold 0\.01\) rejects when redone over it: .*not the run's$/,
    );
  });

  it("case_05, sequence weights beside token rejection: verl's weights are over the mask before rejection, which the dump no longer holds: refused, never redone over the rejected mask", () => {
    // verl's own run: rollout_is = sequence (the dataclass default) weighed over the response_mask before token_k1
    // removed tokens from it; a row that kept some tokens and lost others has another sum over the rejected mask.
    const st = golden('case_05.safetensors');
    const [B, T] = st.tensors.get('completion_mask')!.shape;
    const before = toI32(st, 'completion_mask');
    const after = toF64(st, 'loss_mask');
    const cut = Array.from({ length: B }, (_, b) => [b * T, b * T + T]).filter(([a, e]) => after.subarray(a, e).some((x) => x) && after.subarray(a, e).some((x, t) => !x && before[a + t]));
    expect(cut.length).toBeGreaterThan(0);
    expect(() => read(dumpOf(st))).toThrow(
      /^verl\.safetensors: rollout_is_weights at sample \d+, response position \d+ is [\d.e-]+, but rollout_is = sequence, rollout_is_threshold 2, rollout_is_batch_normalize false over old_log_probs − rollout_log_probs give [\d.e-]+: verl weighed over the response_mask before its rejection sampling \(rollout_rs = token_k1\), which the dump no longer holds, or the settings are not the run's$/,
    );
    // Saved without the weights, the same dump would be redone over the rejected mask: refused too.
    expect(() => read(dumpOf(st, { weights: null }))).toThrow(/^verl\.safetensors: rollout_is_weights is missing, and rollout_is = sequence beside rollout_rs = token_k1: .*save rollout_is_weights with the batch/);
    // Without them where the redo cannot differ (case_10: sequence weights, sequence rejection): read.
    expect(() => read(dumpOf(golden('case_10.safetensors'), { weights: null }))).not.toThrow();
  });

  it("bypass_mode where the workers' loss is not the bypass loss (verl issue #4912): one line; the same loss without it reads", () => {
    // case_11: bypass, reinforce with token IS, token_k1 rejection (the case has no old log-probs: apply_bypass_mode's are the rollout's).
    const eleven = golden('case_11.safetensors');
    expect(caseConfig(eleven)).toMatchObject({ bypass_mode: true, loss_type: 'reinforce', rollout_rs: 'token_k1' });
    const bypassed = (config: Record<string, unknown>) => dumpOf(eleven, { config, weights: null });
    expect(() => read(bypassed({}))).toThrow(/^verl\.safetensors: config bypass_mode is true with loss_type reinforce, rollout_rs token_k1: at verl b178a3c apply_bypass_mode sets loss_mode = bypass_mode on the driver's config only .*set algorithm\.rollout_correction\.bypass_mode false in the dump's __metadata__ config \(its old_log_probs are already its rollout_log_probs\)$/);
    expect(() => read(bypassed({ rollout_rs: null, loss_type: 'reinforce' }))).toThrow(/bypass_mode is true with loss_type reinforce:/);
    expect(() => read(bypassed({ rollout_rs: null, loss_type: 'ppo_clip', loss_mode: 'gspo' }))).toThrow(/bypass_mode is true with loss_mode gspo: .* run their own loss_mode gspo against rollout_log_probs/);
    // ppo_clip against the rollout, vanilla, no rejection: the bypass loss is the workers' vanilla loss.
    expect(() => read(bypassed({ rollout_rs: null, rollout_is: 'token', loss_type: 'ppo_clip', loss_mode: 'vanilla' }))).not.toThrow();
    // A config saved after apply_bypass_mode: its loss_mode is the driver's rewrite, the workers' own is gone.
    expect(() => read(bypassed({ rollout_rs: null, rollout_is: 'token', loss_type: 'ppo_clip', loss_mode: 'bypass_mode' }))).toThrow(/^verl\.safetensors: config loss_mode = "bypass_mode" is what apply_bypass_mode writes into the driver's config .*set loss_mode in the dump's __metadata__ config to the run's actor\.policy_loss\.loss_mode \(vanilla by default\)$/);
  });

  it('weights without rollout_log_probs, or beside bypass_mode: one line; never a step without them', () => {
    const six = golden('case_06.safetensors');
    expect(() => read(dumpOf(six, { drop: ['rollout_log_probs'] }))).toThrow(/^verl\.safetensors: rollout_is_weights is present but rollout_log_probs is not: .*save rollout_log_probs with the batch$/);
    expect(() => read(dumpOf(six, { config: { bypass_mode: true, loss_mode: 'vanilla', rollout_rs: null } }))).toThrow(/^verl\.safetensors: rollout_is_weights is present, but config bypass_mode is true: verl computes no weights before the actor in bypass mode/);
  });
});
