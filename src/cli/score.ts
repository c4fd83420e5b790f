// `grpo-studio score --model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]`: re-scores a
// batch in any supported format (grpo-batch/v1, TRL, verl, OpenRLHF, prime-rl: src/io/formats) with the policy (and the reference, when given) on the GPU and writes
// {per_token_logps, per_token_entropy, ref_per_token_logps, per_token_kl, adapter} as JSON, each
// per-token array ragged like the batch's completion_ids. Temperature, KL estimator and position_ids
// style ("from_attention_mask", HF generate's, or "arange") come from the batch's `config`.
// The reference is the step's (src/grpo/step_train.ts storedReference): a batch that carries its own
// ref_per_token_logps (the trainer's reference) is scored against those whatever --ref-model says, and a --ref-model
// given too is checked against them (`reference_check`: its largest |Δ| over the loss tokens). The KL is the batch
// trainer's estimator (step_objective.ts trainerKl: verl's kl_loss_type, OpenRLHF's algo.kl.estimator, with their
// clamps; TRL's kl_estimator, k3), as the step's loss takes it.
import { nodeGpu } from '../gpu/node.ts';
import { raggedFromPadded } from '../grpo/batch.ts';
import { runAdapterNotes } from '../grpo/run_adapter.ts';
import { kl_forward } from '../kernels/kl.ts';
import { trainerKl } from '../grpo/step_objective.ts';
import { referenceDiff, storedReference } from '../grpo/step_train.ts';
import { ppoKl } from '../grpo/trainers/ppo_run.ts';
import { CausalLM } from '../model/model.ts';
import { score_completions } from '../model/score.ts';
import { openModelSource } from '../model/source_node.ts';
import { checkBatchForModel, checkScorableFile, checkSameVocabulary, CliError, modelBatchArgs, modelOfFlag, padBatchOf, readBatchFor, stepSettingsOfFile, warnUnused, writeResult } from './args.ts';

export interface ScoreResult {
  per_token_logps: number[][];
  per_token_entropy: number[][];
  /** The batch's own when it carries them, else --ref-model's; null: neither. */
  ref_per_token_logps: number[][] | null;
  /** Which reference: "batch" (its ref_per_token_logps), "model" (--ref-model), or null. */
  reference: 'batch' | 'model' | null;
  /** With the batch's own reference log-probs and --ref-model too: that model's largest |Δ| from them over the loss tokens. */
  reference_check: { model: string; max_abs_diff: number; tokens: number } | null;
  per_token_kl: number[][] | null;
  adapter: unknown;
}

export async function run(argv: string[]): Promise<number> {
  const { model: modelPath, batch: batchPath, refModel: refPath, out } = modelBatchArgs(argv, 'score');
  const { batch } = readBatchFor(batchPath, 'score');
  const padded = padBatchOf(batch, batchPath);
  // The batch's settings as `step` and the page resolve them (its trainer's names: verl's temperature,
  // OpenRLHF's rollout.temperature): the same temperature scores the same batch everywhere.
  const { settings, config } = stepSettingsOfFile(batch, batchPath);
  const { temperature, kl_estimator: estimator } = config.loss;

  const gpu = await nodeGpu();
  // Scoring never trains: weights stay in their checkpoint dtype (bf16 at half the bytes).
  const policy = await modelOfFlag('model', modelPath, () => CausalLM.from_pretrained(openModelSource(modelPath), gpu, { storage: 'checkpoint' }));
  warnUnused('score', modelPath, policy.info);
  checkBatchForModel(batch, policy.config, batchPath, 'score', 'policy');
  checkScorableFile(batch, padded, policy.config, batchPath);
  // A run that trained a LoRA adapter scores through it (src/grpo/run_adapter.ts): `score` takes no adapter, so the
  // base alone would be another policy's log-probs; refused naming the batch's setting (`mismatch --adapter` scores it).
  try {
    runAdapterNotes(settings, null, policy.config);
  } catch (e) {
    policy.destroy();
    if ((e as Error).name === 'SettingsError') throw new CliError(`${batchPath}: ${(e as Error).message}`);
    throw e;
  }
  const ref = refPath ? await modelOfFlag('ref-model', refPath, () => CausalLM.from_pretrained(openModelSource(refPath), gpu, { storage: 'checkpoint' })) : null;
  if (ref) warnUnused('score', refPath!, ref.info);
  if (ref) checkSameVocabulary(policy.config, modelPath, ref.config, refPath!);
  if (ref) checkBatchForModel(batch, ref.config, batchPath, 'score', 'reference');

  const n = padded.B * padded.C;
  const rec = gpu.recorder('score', { stream: true });
  const pol = score_completions(rec, policy, padded, { temperature });
  // A second model has its own workspace, so both forwards can share one recorder.
  const rs = ref ? score_completions(rec, ref, padded, { temperature }) : null;
  await rec.submit();

  const logp = await gpu.readF32(pol.per_token_logps, n);
  const modelRef = rs ? await gpu.readF32(rs.per_token_logps, n) : null;
  const stored = storedReference(padded);
  const refLogps = stored ?? modelRef;
  const klSpec = trainerKl(settings);
  let kl: Float32Array | null = null;
  if (refLogps && klSpec) kl = await ppoKl(gpu, logp, refLogps, padded.completion_mask, padded.B, padded.C, klSpec);
  else if (refLogps) {
    const [lb, rb, kb] = [gpu.upload('per_token_logps', logp), gpu.upload('ref_per_token_logps', refLogps), gpu.createBuffer('per_token_kl', n * 4)];
    const r2 = gpu.recorder('score kl');
    kl_forward(r2, { logp: lb, refLogp: rb, kl: kb, n, estimator });
    await r2.submit();
    kl = await gpu.readF32(kb, n);
    [lb, rb, kb].forEach((b) => b.destroy());
  }

  const rag = (a: ArrayLike<number>) => raggedFromPadded(a, padded);
  const result: ScoreResult = {
    per_token_logps: rag(logp),
    per_token_entropy: rag(await gpu.readF32(pol.per_token_entropy, n)),
    ref_per_token_logps: refLogps ? rag(refLogps) : null,
    reference: stored ? 'batch' : modelRef ? 'model' : null,
    reference_check: stored && modelRef ? referenceDiff(modelRef, padded, refPath!) : null,
    per_token_kl: kl ? rag(kl) : null,
    adapter: gpu.adapter,
  };
  const code = await writeResult(out, result, 'score');
  pol.destroy();
  rs?.destroy();
  policy.destroy();
  ref?.destroy();
  return code;
}
