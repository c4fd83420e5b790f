// `grpo-studio step --model DIR --batch BATCH.json [--ref-model DIR] [--adapter DIR | --create-adapter SPEC]
// [--ref-adapter] [--save-adapter DIR] [--checkpointing] [--out RESULT.json]`: one GRPO update
// on a batch in any supported format (src/io/formats) with the step pipeline (src/grpo/step.ts): policy forward, reference forward,
// loss, backward, clipped optimizer step and re-evaluation, configured by the batch's `config` (loss_type,
// beta, epsilon, epsilon_high, delta, temperature, kl_estimator, importance_sampling_level, optimizer
// {name, lr, betas, eps, weight_decay}, max_grad_norm, position_ids). Without --ref-model and with β > 0
// the reference is a frozen copy of the policy. Writes JSON; per-token arrays are ragged over each
// sample's completion (the batch's completion_ids lengths). The batch's trainer (its format: verl and
// OpenRLHF dumps are theirs, anything else TRL), `config` and `run` pick the objective as on the page
// (src/grpo/step_objective.ts): another trainer, or a TRL setting / run context the studio loss does not
// apply, makes the loss and the gradient that trainer's; the result names it (`objective`).
//
// --adapter: the policy is the model plus a PEFT LoRA adapter; only the adapter trains. The reference
// (no --ref-model, β > 0) is then the model with the adapter disabled, as TRL when it creates the adapter
// from peft_config; --ref-adapter makes it a frozen copy of the loaded adapter instead, as TRL when handed
// an already-wrapped PeftModel. --save-adapter writes the stepped adapter as a PEFT folder.
// --create-adapter SPEC: a new adapter instead of a loaded one, then as --adapter. SPEC is PEFT LoraConfig's
// names plus the init seed, e.g. `r=16,lora_alpha=32,use_rslora=true,target_modules=q_proj,v_proj,seed=0`
// (absent keys at their defaults; src/model/lora_fields.ts), made by initLoraWeights as the page's "create":
// lora_A Kaiming-uniform from the seed, lora_B = 0.
// --checkpointing: gradient checkpointing (each layer's activations recomputed in the backward).
import { basename, resolve } from 'node:path';
import { nodeGpu } from '../gpu/node.ts';
import { raggedFromPadded } from '../grpo/batch.ts';
import { StepPipeline } from '../grpo/step.ts';
import type { OptimizerConfig } from '../grpo/optimizer.ts';
import type { TrainerObjective } from '../grpo/step_objective.ts';
import type { EffectiveSettings } from '../grpo/settings/effective.ts';
import type { ReferenceSource, StageData } from '../grpo/step_types.ts';
import { initLoraWeights, loadLoraAdapter, newLoraOptionsFromText, saveLoraAdapter } from '../model/lora.ts';
import { LoraAdapter } from '../model/lora_adapter.ts';
import { CausalLM } from '../model/model.ts';
import { openModelSource } from '../model/source_node.ts';
import { checkBatchForModel, checkOutDir, checkSameVocabulary, CliError, flag, modelBatchArgs, readBatchFor, stepSettingsOfFile, warnUnused, writeOutDir, writeResult } from './args.ts';

export interface StepCliResult {
  per_token_logps: number[][];
  /** Which reference the KL was measured against (the reference stage's label), or null: none (β = 0). */
  reference: string | null;
  ref_per_token_logps: number[][] | null;
  per_token_kl: number[][] | null;
  per_token_entropy: number[][];
  per_token_loss: number[][];
  loss: number;
  loss_type: string;
  /** The trainer objective that formed loss, gradient and loss_after; null: the studio loss (loss_type). */
  objective: TrainerObjective | null;
  losses: Record<string, number>;
  grad_norm: number;
  group_grad_norms: Record<string, number>;
  clip_coef: number;
  /** The optimizer step taken: the batch's `optimizer`, or TRL's (learning rate at run.global_step's schedule). */
  optimizer: OptimizerConfig;
  update_norm: number;
  group_update_norms: Record<string, number>;
  post_step_per_token_logps: number[][];
  loss_after: number;
  timings_ms: Record<string, number>;
  gpu_bytes: Record<string, number>; // peak bytes held during each stage
  adapter: unknown;
  /** The settings the update ran with (the batch's trainer, config and run) and where each value came from. */
  settings: EffectiveSettings;
}

export async function run(argv: string[]): Promise<number> {
  const { model: modelPath, batch: batchPath, refModel: refPath, out, args } = modelBatchArgs(argv, 'step', { values: ['adapter', 'create-adapter', 'save-adapter'], switches: ['ref-adapter', 'checkpointing'] });
  const adapterPath = flag(args, 'adapter');
  const createSpec = flag(args, 'create-adapter');
  if (adapterPath && createSpec !== undefined) throw new CliError('--adapter and --create-adapter both give the adapter: give one');
  // Checked before any weight is read: a bad SPEC is one line, not a model load later.
  const newAdapter = createSpec === undefined ? null : newLoraOptionsFromText(createSpec, '--create-adapter');
  const lora = adapterPath !== undefined || newAdapter !== null;
  const saveAdapter = flag(args, 'save-adapter');
  const refAdapter = args.flags.has('ref-adapter');
  if ((saveAdapter || refAdapter) && !lora) throw new CliError(`--${saveAdapter ? 'save-adapter' : 'ref-adapter'} needs --adapter DIR or --create-adapter SPEC`);
  if (refAdapter && refPath) throw new CliError('--ref-adapter and --ref-model both name the reference: give one');
  // Checked before the step: a folder that cannot be written is one line now, not a failure (or a hang) after the work.
  if (saveAdapter !== undefined) checkOutDir(saveAdapter, '--save-adapter');
  const { batch } = readBatchFor(batchPath, 'step');
  const { settings, config: cfg } = stepSettingsOfFile(batch, batchPath);

  const gpu = await nodeGpu();
  // Frozen weights (a LoRA base, a reference model) stay in their checkpoint dtype: bf16 at half the bytes.
  const policy = await CausalLM.from_pretrained(openModelSource(modelPath), gpu, { storage: lora ? 'checkpoint' : 'f32' });
  warnUnused('step', modelPath, policy.info);
  checkBatchForModel(batch, policy.config, batchPath, 'step', 'policy');
  // A created adapter's base_model_name_or_path is --model as given, as PEFT records the name_or_path the base was loaded from.
  const weights = adapterPath ? await loadLoraAdapter(openModelSource(adapterPath), policy.config) : newAdapter && initLoraWeights(policy.config, newAdapter, modelPath, '--create-adapter');
  const adapter = weights ? LoraAdapter.fromWeights(gpu, weights) : null;
  policy.adapter = adapter;
  policy.checkpointing = args.flags.has('checkpointing');
  // With an adapter and no reference model: the base with the adapter disabled (β > 0), unless --ref-adapter
  // asks for the frozen copy of the loaded (or created) adapter, which for this update is the policy before the step (null).
  const adapterOff = adapter && !refPath && !refAdapter && cfg.loss.beta !== 0 ? policy.withAdapter(null) : null;
  const reference = refPath ? await CausalLM.from_pretrained(openModelSource(refPath), gpu, { storage: 'checkpoint' }) : adapterOff;
  if (refPath && reference) warnUnused('step', refPath, reference.info);
  if (refPath && reference) checkSameVocabulary(policy.config, modelPath, reference.config, refPath);
  if (refPath && reference) checkBatchForModel(batch, reference.config, batchPath, 'step', 'reference');
  const reference_source: ReferenceSource | undefined = refPath ? { kind: 'model', name: basename(resolve(refPath)) } : adapterOff ? { kind: 'base-without-adapter' } : adapter ? { kind: 'frozen-adapter' } : undefined;
  const pipe = new StepPipeline(gpu, { policy, reference, reference_source, config: cfg, source: { kind: 'batch', batch } });
  try {
    const results = await pipe.runToEnd();
    const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
    const { padded } = d('assemble');
    const rag = (a: ArrayLike<number>) => raggedFromPadded(a, padded);
    const loss = d('loss');
    const step = d('step');
    const result: StepCliResult = {
      per_token_logps: rag(d('policy_forward').per_token_logps),
      reference: pipe.data('reference_forward')?.reference_label ?? null,
      ref_per_token_logps: pipe.data('reference_forward') ? rag(d('reference_forward').ref_per_token_logps!) : null,
      per_token_kl: loss.per_token_kl && rag(loss.per_token_kl),
      per_token_entropy: rag(d('policy_forward').per_token_entropy),
      per_token_loss: rag(loss.per_token_loss),
      loss: loss.loss,
      loss_type: cfg.loss.loss_type,
      objective: loss.objective,
      losses: loss.losses,
      grad_norm: d('backward').grad_norm,
      group_grad_norms: d('backward').group_grad_norms,
      clip_coef: step.clip_coef,
      optimizer: cfg.optimizer,
      update_norm: step.update_norm,
      group_update_norms: step.group_update_norms,
      post_step_per_token_logps: rag(d('re_evaluate').post_per_token_logps),
      loss_after: d('re_evaluate').loss_after,
      timings_ms: Object.fromEntries(results.filter((r) => !r.skipped).map((r) => [r.id, r.ms])),
      gpu_bytes: Object.fromEntries(results.filter((r) => !r.skipped).map((r) => [r.id, r.peakBytes])),
      adapter: gpu.adapter,
      settings,
    };
    if (saveAdapter) {
      const files = saveLoraAdapter(await adapter!.read());
      writeOutDir(saveAdapter, files, '--save-adapter');
    }
    return await writeResult(out, result, 'step');
  } catch (e) {
    const err = e as Error;
    // A setting the batch's trainer objective rejects is named by the loss and refused by the backward: input error.
    if (err.name === 'GrpoLossError' || err.name === 'SettingsError') throw new CliError(`${batchPath}: ${err.message}`);
    throw e;
  } finally {
    pipe.destroy();
    policy.destroy();
    reference?.destroy();
    adapter?.destroy();
  }
}
