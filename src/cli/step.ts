// `grpo-studio step --model DIR --batch BATCH.json [--ref-model DIR] [--adapter DIR | --create-adapter SPEC]
// [--ref-adapter] [--save-adapter DIR] [--checkpointing] [--out RESULT.json]`: one GRPO update
// on a batch in any supported format (src/io/formats) with the step pipeline (src/grpo/step.ts): policy forward, reference forward,
// loss, backward, clipped optimizer step and re-evaluation, configured by the batch's `config` (loss_type,
// beta, epsilon, epsilon_high, delta, temperature, kl_estimator, importance_sampling_level, optimizer
// {name, lr, betas, eps, weight_decay}, max_grad_norm, position_ids). With β > 0 the KL is to the batch's own
// ref_per_token_logps when it carries them (a trainer dump's: its reference, which --ref-model is then only checked
// against, `reference_check`), else to --ref-model, else to a frozen copy of the policy. Writes JSON; per-token arrays are ragged over each
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
// A run that trained a LoRA adapter (OpenRLHF ds.lora.rank, verl lora_rank / lora_adapter_path) is stepped only on
// its adapter: src/grpo/run_adapter.ts refuses a full-parameter step, an adapter of another r / lora_alpha / modules,
// LoRA dropout and a 4-bit base, naming the batch's setting (exit 2), before any stage.
// --checkpointing: gradient checkpointing (each layer's activations recomputed in the backward).
//
// μ > 1 (TRL num_iterations, verl ppo_epochs, OpenRLHF train.max_epochs): the update steps over the batch μ
// times; `passes` holds every pass (its loss, mean KL, clipped tokens, ratio range, grad norm) and each is
// printed as one line on stderr (stdout stays the JSON), so pass 2's ratio and clipping are not hidden
// behind the post-step log-probs, which are the last pass's. The result's `settings` echo a key no row reads as the
// file wrote it, a non-finite number there as its text: an unread arg does not change the exit status.
import { basename, resolve } from 'node:path';
import { msg } from '../doctor/util.ts';
import { nodeGpu } from '../gpu/node.ts';
import { raggedFromPadded } from '../grpo/batch.ts';
import { StepPipeline } from '../grpo/step.ts';
import type { OptimizerConfig } from '../grpo/optimizer.ts';
import { runAdapterNotes } from '../grpo/run_adapter.ts';
import { readsReference, type TrainerObjective } from '../grpo/step_objective.ts';
import { rowOf, type EffectiveSettings } from '../grpo/settings/effective.ts';
import type { ReferenceSource, StageData } from '../grpo/step_types.ts';
import { initLoraWeights, loadLoraAdapter, newLoraOptionsFromText, saveLoraAdapter } from '../model/lora.ts';
import { LoraAdapter } from '../model/lora_adapter.ts';
import { CausalLM } from '../model/model.ts';
import { openModelSource } from '../model/source_node.ts';
import { checkBatchForModel, checkOutDir, checkSameVocabulary, CliError, flag, modelBatchArgs, modelOfFlag, readBatchFor, stepSettingsOfFile, warnUnused, writeOutDir, writeResult } from './args.ts';

/** One pass over the batch: pass 1 is the loss stage and the first step, passes 2 … μ the step stage's further passes. */
export interface StepCliPass {
  pass: number;
  loss: number;
  /** Σ M·KL / Σ M; null with β = 0 (no reference, no KL). */
  mean_kl: number | null;
  clipped_low: number;
  clipped_high: number;
  /** (clipped low + high) / the loss's tokens. */
  clipped_fraction: number;
  /** The range of exp(logp − old) over the loss's tokens: [1, 1] on pass 1, off 1 from pass 2 on; null without a loss token. */
  ratio_min: number | null;
  ratio_max: number | null;
  grad_norm: number;
  clip_coef: number;
  update_norm: number;
}

export interface StepCliResult {
  per_token_logps: number[][];
  /** Which reference the KL was measured against (the reference stage's label), or null: none (β = 0). */
  reference: string | null;
  /** With the batch's own ref_per_token_logps (which the loss reads) and a reference model too: that model's largest |Δ| from them over the loss tokens. */
  reference_check: { model: string; max_abs_diff: number; tokens: number } | null;
  ref_per_token_logps: number[][] | null;
  per_token_kl: number[][] | null;
  per_token_entropy: number[][];
  /** The loss's per-token loss (the trainer's tensor under a trainer objective: a token its aggregation drops keeps its value, token_weight 0); null where the trainer forms none. */
  per_token_loss: number[][] | null;
  loss: number;
  /** The aggregation `loss` is, its key in `losses`: the studio's loss_type, or the trainer objective's (TRL loss_type, verl loss_agg_mode, OpenRLHF's by policy loss type). */
  loss_type: string;
  /** The trainer objective that formed loss, gradient and loss_after; null: the studio loss (loss_type). */
  objective: TrainerObjective | null;
  /**
   * The loss under each aggregation (losses[loss_type] is `loss`). Under a trainer objective: the trainer's own loss
   * with its aggregation setting changed (its run scalings in); a studio aggregation name the trainer has none for
   * (or that the trainer refuses with the rest of the config) is absent. per_token_loss, per_token_kl and `passes` are the trainer's too (src/grpo/step_types.ts).
   */
  losses: Record<string, number>;
  grad_norm: number;
  group_grad_norms: Record<string, number>;
  clip_coef: number;
  /** The optimizer step taken: the batch's `optimizer`, or TRL's (learning rate at run.global_step's schedule). */
  optimizer: OptimizerConfig;
  update_norm: number;
  group_update_norms: Record<string, number>;
  /**
   * What the trainer's optimizer step sums besides this batch's gradient (other processes' or micro-batches'), or
   * null: the batch is the whole step. Set, grad_norm, clip_coef, update_norm and post_step_per_token_logps are the
   * batch's own step (also said on stderr), not the trainer's.
   */
  update_scope: string | null;
  post_step_per_token_logps: number[][];
  loss_after: number;
  /** Every pass over the batch, in order (one with μ = 1); post_step_per_token_logps and loss_after follow the last. */
  passes: StepCliPass[];
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
  const policy = await modelOfFlag('model', modelPath, () => CausalLM.from_pretrained(openModelSource(modelPath), gpu, { storage: lora ? 'checkpoint' : 'f32' }));
  warnUnused('step', modelPath, policy.info);
  checkBatchForModel(batch, policy.config, batchPath, 'step', 'policy');
  // A created adapter's base_model_name_or_path is --model as given, as PEFT records the name_or_path the base was loaded from.
  const weights = adapterPath ? await loadLoraAdapter(openModelSource(adapterPath), policy.config) : newAdapter && initLoraWeights(policy.config, newAdapter, modelPath, '--create-adapter');
  const adapter = weights ? LoraAdapter.fromWeights(gpu, weights) : null;
  // The run's own adapter, or none (src/grpo/run_adapter.ts): a LoRA run stepped full-parameter, or on an adapter of
  // another rank / scaling / modules, is not its update. Refused naming the batch's setting (exit 2), before any stage.
  let adapterNotes: string[];
  try {
    adapterNotes = runAdapterNotes(settings, adapter, policy.config, { created: newAdapter !== null });
  } catch (e) {
    adapter?.destroy();
    policy.destroy();
    if ((e as Error).name === 'SettingsError') throw new CliError(`${batchPath}: ${(e as Error).message}`);
    throw e;
  }
  for (const n of adapterNotes) console.error(`note: ${n}`);
  policy.adapter = adapter;
  policy.checkpointing = args.flags.has('checkpointing');
  // With an adapter and no reference model: the base with the adapter disabled (β > 0), unless --ref-adapter
  // asks for the frozen copy of the loaded (or created) adapter, which for this update is the policy before the step (null).
  const adapterOff = adapter && !refPath && !refAdapter && readsReference(cfg.loss.beta, cfg.trainer) ? policy.withAdapter(null) : null;
  const reference = refPath ? await modelOfFlag('ref-model', refPath, () => CausalLM.from_pretrained(openModelSource(refPath), gpu, { storage: 'checkpoint' })) : adapterOff;
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
      reference_check: pipe.data('reference_forward')?.reference_check ?? null,
      ref_per_token_logps: pipe.data('reference_forward') ? rag(d('reference_forward').ref_per_token_logps!) : null,
      per_token_kl: loss.per_token_kl && rag(loss.per_token_kl),
      per_token_entropy: rag(d('policy_forward').per_token_entropy),
      // NaN throughout: the trainer forms no per-token loss (verl geo_mean's one value per sequence).
      per_token_loss: loss.per_token_loss.every((v) => Number.isNaN(v)) ? null : rag(loss.per_token_loss),
      loss: loss.loss,
      loss_type: loss.aggregation,
      objective: loss.objective,
      // A name the trainer has no aggregation for (NaN in the stage's table) is left out, not written as a number.
      losses: Object.fromEntries(Object.entries(loss.losses).filter(([, v]) => !Number.isNaN(v))),
      grad_norm: d('backward').grad_norm,
      group_grad_norms: d('backward').group_grad_norms,
      clip_coef: step.clip_coef,
      optimizer: cfg.optimizer,
      update_norm: step.update_norm,
      group_update_norms: step.group_update_norms,
      update_scope: step.scope,
      post_step_per_token_logps: rag(d('re_evaluate').post_per_token_logps),
      loss_after: d('re_evaluate').loss_after,
      passes: [
        { pass: 1, ...loss, grad_norm: d('backward').grad_norm, clip_coef: step.clip_coef, update_norm: step.update_norm },
        ...step.passes,
      ].map((p) => passRow(p, lossMask(padded))),
      timings_ms: Object.fromEntries(results.filter((r) => !r.skipped).map((r) => [r.id, r.ms])),
      gpu_bytes: Object.fromEntries(results.filter((r) => !r.skipped).map((r) => [r.id, r.peakBytes])),
      adapter: gpu.adapter,
      settings: echoedSettings(settings),
    };
    if (result.passes.length > 1) for (const p of result.passes) console.error(passLine(p, result.passes.length));
    if (step.scope) console.error(`note: ${step.scope}`);
    if (saveAdapter) {
      const files = saveLoraAdapter(await adapter!.read());
      writeOutDir(saveAdapter, files, '--save-adapter');
    }
    return await writeResult(out, result, 'step');
  } catch (e) {
    const err = e as Error;
    // A setting the batch's trainer objective rejects is named by the loss and refused by the backward, and what
    // the stages find in the batch (no advantages nor rewards, a mask row of the wrong length) in the order the
    // page's pipeline finds it: input errors, naming the file.
    if (err.name === 'GrpoLossError' || err.name === 'SettingsError' || err.name === 'BatchFormatError') throw new CliError(`${batchPath}: ${err.message}`);
    throw e;
  } finally {
    pipe.destroy();
    policy.destroy();
    reference?.destroy();
    adapter?.destroy();
  }
}

/**
 * The settings as the result echoes them. A key no row reads is kept as the file wrote it (listed as not read), and
 * a non-finite number there (an unread arg's Infinity: OpenRLHF's max_ckpt_mem default) is written as its text, so
 * an arg the step never used does not make its result non-finite (writeResult's exit 1). Every row's value is
 * finite once read (table.ts checkSetting), so a number the step used is never rewritten.
 */
function echoedSettings(s: EffectiveSettings): EffectiveSettings {
  const text = (v: unknown): unknown =>
    typeof v === 'number' && !Number.isFinite(v) ? String(v) : Array.isArray(v) ? v.map(text) : v !== null && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, text(x)])) : v;
  const side = (where: 'config' | 'run') => Object.fromEntries(Object.entries(s[where]).map(([k, v]) => [k, rowOf(s.trainer, where, k) ? v : text(v)]));
  return { ...s, config: side('config'), run: side('run') };
}

/** The tokens the loss reads: completion_mask, times tool_mask where the batch has one. */
function lossMask(p: { completion_mask: ArrayLike<number>; tool_mask?: ArrayLike<number> }): (i: number) => boolean {
  return (i) => p.completion_mask[i] !== 0 && (!p.tool_mask || p.tool_mask[i] !== 0);
}

type PassSource = Pick<StepCliPass, 'pass' | 'loss' | 'grad_norm' | 'clip_coef' | 'update_norm'> & { mean_kl: number; per_token_kl: unknown; importance_ratio: ArrayLike<number>; clip_counts: { low: number; high: number; tokens: number } };

function passRow(p: PassSource, inLoss: (i: number) => boolean): StepCliPass {
  let [lo, hi] = [Infinity, -Infinity];
  for (let i = 0; i < p.importance_ratio.length; i++)
    if (inLoss(i)) {
      lo = Math.min(lo, p.importance_ratio[i]);
      hi = Math.max(hi, p.importance_ratio[i]);
    }
  const c = p.clip_counts;
  return {
    pass: p.pass,
    loss: p.loss,
    mean_kl: p.per_token_kl ? p.mean_kl : null,
    clipped_low: c.low,
    clipped_high: c.high,
    clipped_fraction: c.tokens ? (c.low + c.high) / c.tokens : 0,
    // No token in the loss (every completion masked): no range, not an empty min / max's ±Infinity.
    ratio_min: lo <= hi ? lo : null,
    ratio_max: lo <= hi ? hi : null,
    grad_norm: p.grad_norm,
    clip_coef: p.clip_coef,
    update_norm: p.update_norm,
  };
}

/** One pass as a line: `pass 2/3: loss … · clipped 4.2% (3 low, 2 high) · ratio [0.98, 1.03] · mean KL … · grad norm …`. */
function passLine(p: StepCliPass, of: number): string {
  const pct = Number((100 * p.clipped_fraction).toFixed(1));
  const kl = p.mean_kl === null ? 'no KL (β = 0)' : msg`mean KL ${p.mean_kl}`;
  const ratio = p.ratio_min === null ? 'no token in the loss' : msg`ratio [${p.ratio_min}, ${p.ratio_max}]`;
  return msg`pass ${p.pass}/${of}: loss ${p.loss} · clipped ${pct}% (${p.clipped_low} low, ${p.clipped_high} high) · ${ratio} · ${kl} · grad norm ${p.grad_norm}`;
}
