// `grpo-studio score --model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]`: re-scores a
// grpo-batch/v1 batch with the policy (and the reference, when given) on the GPU and writes
// {per_token_logps, per_token_entropy, ref_per_token_logps, per_token_kl, adapter} as JSON, each
// per-token array ragged like the batch's completion_ids. Temperature, KL estimator and position_ids
// style ("from_attention_mask", HF generate's, or "arange") come from the batch's `config`.
import { readFileSync, writeFileSync } from 'node:fs';
import { nodeGpu } from '../gpu/node.ts';
import { padBatch, type PaddedBatch } from '../grpo/batch.ts';
import { parseBatch, type GrpoBatch } from '../io/batch.ts';
import { kl_forward } from '../kernels/kl.ts';
import { CausalLM } from '../model/model.ts';
import { score_completions } from '../model/score.ts';
import { openModelSource } from '../model/source_node.ts';
import type { KlEstimator } from '../ref/kl.ts';
import { CliError, flag, parseArgs } from './args.ts';

export interface ScoreResult {
  per_token_logps: number[][];
  per_token_entropy: number[][];
  ref_per_token_logps: number[][] | null;
  per_token_kl: number[][] | null;
  adapter: unknown;
}

/** Token ids must index the model's vocabulary: name the first sample and position that does not. */
function checkVocab(batch: GrpoBatch, model: CausalLM, which: string): void {
  const V = model.config.vocab_size;
  for (const field of ['prompt_ids', 'completion_ids'] as const) {
    batch[field].forEach((row, b) =>
      row.forEach((id, t) => {
        if (!Number.isInteger(id) || id < 0 || id >= V) throw new CliError(`${field} sample ${b}, position ${t}: token ${id} is outside the ${which} vocabulary [0, ${V})`);
      }),
    );
  }
}

/** (B, C) row-major → one row per sample, cut to that sample's completion length. */
function ragged(flat: Float32Array, batch: PaddedBatch): number[][] {
  return Array.from({ length: batch.B }, (_, b) => Array.from(flat.subarray(b * batch.C, b * batch.C + batch.completion_lengths[b])));
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['model', 'batch', 'ref-model', 'out'] });
  const modelPath = flag(args, 'model');
  const batchPath = flag(args, 'batch');
  if (!modelPath || !batchPath) throw new CliError('score needs --model DIR and --batch BATCH.json');
  if (args.positional.length) throw new CliError(`unexpected argument "${args.positional[0]}"`);
  const refPath = flag(args, 'ref-model');

  const batch = parseBatch(readFileSync(batchPath, 'utf8'), batchPath);
  const padded = padBatch(batch);
  if (padded.P < 1 || padded.C < 1) throw new CliError(`${batchPath}: needs at least one prompt token and one completion token (P = ${padded.P}, C = ${padded.C})`);
  const temperature = batch.config?.temperature ?? 1;
  const estimator: KlEstimator = batch.config?.kl_estimator ?? 'k3';
  if (!(temperature > 0)) throw new CliError(`${batchPath}: config.temperature must be > 0, got ${temperature}`);
  if (!['k1', 'k2', 'k3'].includes(estimator)) throw new CliError(`${batchPath}: config.kl_estimator must be k1, k2 or k3, got ${JSON.stringify(estimator)}`);

  const gpu = await nodeGpu();
  const policy = await CausalLM.from_pretrained(openModelSource(modelPath), gpu);
  checkVocab(batch, policy, 'policy');
  const ref = refPath ? await CausalLM.from_pretrained(openModelSource(refPath), gpu) : null;
  if (ref) checkVocab(batch, ref, 'reference');

  const n = padded.B * padded.C;
  const rec = gpu.recorder('score');
  const pol = score_completions(rec, policy, padded, { temperature });
  // A second model has its own workspace, so both forwards can share one submit.
  const rs = ref ? score_completions(rec, ref, padded, { temperature }) : null;
  const kl = rs ? gpu.createBuffer('per_token_kl', n * 4) : null;
  if (rs && kl) kl_forward(rec, { logp: pol.per_token_logps, refLogp: rs.per_token_logps, kl, n, estimator });
  await rec.submit();

  const result: ScoreResult = {
    per_token_logps: ragged(await gpu.readF32(pol.per_token_logps, n), padded),
    per_token_entropy: ragged(await gpu.readF32(pol.per_token_entropy, n), padded),
    ref_per_token_logps: rs ? ragged(await gpu.readF32(rs.per_token_logps, n), padded) : null,
    per_token_kl: kl ? ragged(await gpu.readF32(kl, n), padded) : null,
    adapter: gpu.adapter,
  };
  const json = JSON.stringify(result);
  const out = flag(args, 'out');
  if (out) writeFileSync(out, json);
  else console.log(json);
  pol.destroy();
  rs?.destroy();
  kl?.destroy();
  policy.destroy();
  ref?.destroy();
  return 0;
}
