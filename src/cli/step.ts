// `grpo-studio step --model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]`: one GRPO update
// on a batch in any supported format (src/io/formats) with the step pipeline (src/grpo/step.ts): policy forward, reference forward,
// loss, backward, clipped optimizer step and re-evaluation, configured by the batch's `config` (loss_type,
// beta, epsilon, epsilon_high, delta, temperature, kl_estimator, importance_sampling_level, optimizer
// {name, lr, betas, eps, weight_decay}, max_grad_norm, position_ids). Without --ref-model and with β > 0
// the reference is a frozen copy of the policy. Writes JSON; per-token arrays are ragged over each
// sample's completion (the batch's completion_ids lengths).
import { nodeGpu } from '../gpu/node.ts';
import { raggedFromPadded } from '../grpo/batch.ts';
import { StepPipeline } from '../grpo/step.ts';
import { stepConfigFromBatch, type StepConfig } from '../grpo/step_config.ts';
import type { StageData } from '../grpo/step_types.ts';
import { CausalLM } from '../model/model.ts';
import { openModelSource } from '../model/source_node.ts';
import { checkBatchForModel, CliError, modelBatchArgs, readBatchFor, warnUnused, writeResult } from './args.ts';

export interface StepCliResult {
  per_token_logps: number[][];
  ref_per_token_logps: number[][] | null;
  per_token_kl: number[][] | null;
  per_token_entropy: number[][];
  per_token_loss: number[][];
  loss: number;
  loss_type: string;
  losses: Record<string, number>;
  grad_norm: number;
  group_grad_norms: Record<string, number>;
  clip_coef: number;
  update_norm: number;
  group_update_norms: Record<string, number>;
  post_step_per_token_logps: number[][];
  loss_after: number;
  timings_ms: Record<string, number>;
  gpu_bytes: Record<string, number>; // peak bytes held during each stage
  adapter: unknown;
}

/** Bad config fields are input errors: one line and exit 2. */
function config(batchConfig: Parameters<typeof stepConfigFromBatch>[0], C: number, source: string): StepConfig {
  try {
    return stepConfigFromBatch(batchConfig, C);
  } catch (e) {
    const err = e as Error;
    if (err.name === 'GrpoLossError' || err.name === 'OptimizerConfigError' || err.name === 'SettingsError') throw new CliError(`${source}: ${err.message}`);
    throw e;
  }
}

export async function run(argv: string[]): Promise<number> {
  const { model: modelPath, batch: batchPath, refModel: refPath, out } = modelBatchArgs(argv, 'step');
  const batch = readBatchFor(batchPath, 'step');
  const C = batch.completion_ids.reduce((m, r) => Math.max(m, r.length), 0);
  const cfg = config(batch.config, C, batchPath);

  const gpu = await nodeGpu();
  const policy = await CausalLM.from_pretrained(openModelSource(modelPath), gpu);
  warnUnused('step', modelPath, policy.info);
  checkBatchForModel(batch, policy.config, batchPath, 'step', 'policy');
  const reference = refPath ? await CausalLM.from_pretrained(openModelSource(refPath), gpu) : null;
  if (reference) warnUnused('step', refPath!, reference.info);
  if (reference) checkBatchForModel(batch, reference.config, batchPath, 'step', 'reference');
  const pipe = new StepPipeline(gpu, { policy, reference, config: cfg, source: { kind: 'batch', batch } });
  try {
    const results = await pipe.runToEnd();
    const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
    const { padded } = d('assemble');
    const rag = (a: ArrayLike<number>) => raggedFromPadded(a, padded);
    const loss = d('loss');
    const step = d('step');
    const result: StepCliResult = {
      per_token_logps: rag(d('policy_forward').per_token_logps),
      ref_per_token_logps: pipe.data('reference_forward') ? rag(d('reference_forward').ref_per_token_logps!) : null,
      per_token_kl: loss.per_token_kl && rag(loss.per_token_kl),
      per_token_entropy: rag(d('policy_forward').per_token_entropy),
      per_token_loss: rag(loss.per_token_loss),
      loss: loss.loss,
      loss_type: cfg.loss.loss_type,
      losses: loss.losses,
      grad_norm: d('backward').grad_norm,
      group_grad_norms: d('backward').group_grad_norms,
      clip_coef: step.clip_coef,
      update_norm: step.update_norm,
      group_update_norms: step.group_update_norms,
      post_step_per_token_logps: rag(d('re_evaluate').post_per_token_logps),
      loss_after: d('re_evaluate').loss_after,
      timings_ms: Object.fromEntries(results.filter((r) => !r.skipped).map((r) => [r.id, r.ms])),
      gpu_bytes: Object.fromEntries(results.filter((r) => !r.skipped).map((r) => [r.id, r.peakBytes])),
      adapter: gpu.adapter,
    };
    return await writeResult(out, result, 'step');
  } catch (e) {
    const err = e as Error;
    if (err.name === 'GrpoLossError') throw new CliError(`${batchPath}: ${err.message}`);
    throw e;
  } finally {
    pipe.destroy();
    policy.destroy();
    reference?.destroy();
  }
}
