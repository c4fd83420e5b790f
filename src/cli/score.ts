// `grpo-studio score --model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]`: re-scores a
// batch in any supported format (grpo-batch/v1, TRL, verl, OpenRLHF, prime-rl: src/io/formats) with the policy (and the reference, when given) on the GPU and writes
// {per_token_logps, per_token_entropy, ref_per_token_logps, per_token_kl, adapter} as JSON, each
// per-token array ragged like the batch's completion_ids. Temperature, KL estimator and position_ids
// style ("from_attention_mask", HF generate's, or "arange") come from the batch's `config`.
import { nodeGpu } from '../gpu/node.ts';
import { raggedFromPadded } from '../grpo/batch.ts';
import { kl_forward } from '../kernels/kl.ts';
import { CausalLM } from '../model/model.ts';
import { score_completions } from '../model/score.ts';
import { openModelSource } from '../model/source_node.ts';
import { checkBatchForModel, checkScorableFile, checkSameVocabulary, modelBatchArgs, modelOfFlag, padBatchOf, readBatchFor, stepSettingsOfFile, warnUnused, writeResult } from './args.ts';

export interface ScoreResult {
  per_token_logps: number[][];
  per_token_entropy: number[][];
  ref_per_token_logps: number[][] | null;
  per_token_kl: number[][] | null;
  adapter: unknown;
}

export async function run(argv: string[]): Promise<number> {
  const { model: modelPath, batch: batchPath, refModel: refPath, out } = modelBatchArgs(argv, 'score');
  const { batch } = readBatchFor(batchPath, 'score');
  const padded = padBatchOf(batch, batchPath);
  // The batch's settings as `step` and the page resolve them (its trainer's names: verl's temperature,
  // OpenRLHF's rollout.temperature): the same temperature scores the same batch everywhere.
  const { temperature, kl_estimator: estimator } = stepSettingsOfFile(batch, batchPath).config.loss;

  const gpu = await nodeGpu();
  // Scoring never trains: weights stay in their checkpoint dtype (bf16 at half the bytes).
  const policy = await modelOfFlag('model', modelPath, () => CausalLM.from_pretrained(openModelSource(modelPath), gpu, { storage: 'checkpoint' }));
  warnUnused('score', modelPath, policy.info);
  checkBatchForModel(batch, policy.config, batchPath, 'score', 'policy');
  checkScorableFile(batch, padded, policy.config, batchPath);
  const ref = refPath ? await modelOfFlag('ref-model', refPath, () => CausalLM.from_pretrained(openModelSource(refPath), gpu, { storage: 'checkpoint' })) : null;
  if (ref) warnUnused('score', refPath!, ref.info);
  if (ref) checkSameVocabulary(policy.config, modelPath, ref.config, refPath!);
  if (ref) checkBatchForModel(batch, ref.config, batchPath, 'score', 'reference');

  const n = padded.B * padded.C;
  const rec = gpu.recorder('score', { stream: true });
  const pol = score_completions(rec, policy, padded, { temperature });
  // A second model has its own workspace, so both forwards can share one recorder.
  const rs = ref ? score_completions(rec, ref, padded, { temperature }) : null;
  const kl = rs ? gpu.createBuffer('per_token_kl', n * 4) : null;
  if (rs && kl) kl_forward(rec, { logp: pol.per_token_logps, refLogp: rs.per_token_logps, kl, n, estimator });
  await rec.submit();

  const ragged = async (buf: GPUBuffer) => raggedFromPadded(await gpu.readF32(buf, n), padded);
  const result: ScoreResult = {
    per_token_logps: await ragged(pol.per_token_logps),
    per_token_entropy: await ragged(pol.per_token_entropy),
    ref_per_token_logps: rs ? await ragged(rs.per_token_logps) : null,
    per_token_kl: kl ? await ragged(kl) : null,
    adapter: gpu.adapter,
  };
  const code = await writeResult(out, result, 'score');
  pol.destroy();
  rs?.destroy();
  kl?.destroy();
  policy.destroy();
  ref?.destroy();
  return code;
}
