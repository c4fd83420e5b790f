// The studio worker's StepRunner (src/bridge/protocol.ts) over the step pipeline: loads a model and its
// tokenizer from the page's ModelChoice (the embedded default, a Hub id or a dropped folder), turns the
// page's settings into a StepConfig and the start of the update (the prompt set, or an imported batch),
// runs the pipeline stage by stage and hands each stage's data through unchanged (the assembled batch with the
// settings the update runs with as its config, as the page's Export writes it), adding what the page
// needs besides: decoded token texts, the Doctor's report on the assembled batch and, at the loss stage, the
// trainer preset's view of the same log-probs (src/worker/trainer_view.ts). The preset also picks the step's
// objective (StepConfig.trainer): its loss and gradient are the trainer's. A run starts at
// `render` with the settings of that moment, from the weights the last update stepped to (StepSettings
// `weights: 'continue'`, as TRL, with the optimizer's moments and step count carried over) or from the
// weights as loaded ('loaded', fresh optimizer); reset() undoes the last optimizer step (weights and
// moments). The frozen-copy reference (β > 0) is a GPU snapshot of the weights taken once at load, so KL
// before the step measures how far the continued policy has moved from the loaded model;
// loadReference() puts a second checkpoint in its place (TRL's ref_model / the CLI's --ref-model).
// loadAdapter() attaches a PEFT LoRA adapter (src/worker/adapter.ts): only it trains, over a frozen base.
// setCheckpointing() turns gradient checkpointing over for the loaded policy and every one loaded later.
import type { Gpu } from '../gpu/context.ts';
import { diagnose, doctorOptions, type KnownModel } from '../doctor/index.ts';
import { ModelLoadError } from '../model/config.ts';
import { kvDecoder } from '../model/generate.ts';
import type { LoadProgress as ModelLoadProgress } from '../model/loader.ts';
import { CausalLM } from '../model/model.ts';
import { loadTokenizer, sourceOf } from './model_source.ts';
import { longestPrompt, modelInfo, pagePlan, type HeldModels } from './model_info.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { BoundedRenderer } from '../tokenize/bounded_node.ts';
import { diffTemplates, type TemplateDiff, type TemplateVariant } from '../tokenize/template_diff.ts';
import { widestCompletion, type ChatMessage, type GrpoBatch } from '../io/batch.ts';
import type { DoctorReport } from '../doctor/types.ts';
import { AdapterSlot } from './adapter.ts';
import { inspectBatch, loadedModel, tokenTexts } from './inspect.ts';
import type { AdapterChoice, AdapterReference, CreateStepRunner, InferredIds, LoadProgress, ModelChoice, ModelInfo, PagePlan, StagePayloads, StageId, StageResult, StepRunner, StepSettings, StepStart, TokenTexts, ToolSettings, JsToolRunner, WhatIfResult, WhatIfSide, BeforeAfterResult, SampledSide, TrainerView } from '../bridge/protocol.ts';
import type { EffectiveSettings } from '../grpo/settings/effective.ts';
import { runJsReward, runJsTools } from './reward_sandbox.ts';
import { promptConversation, samplerOf } from '../bridge/settings.ts';
import { withSettings } from '../bridge/batch_settings.ts';
import { trainerView, trainerWhatIf } from './trainer_view.ts';
import type { JsRewardRunner } from '../grpo/rewards.ts';
import { StepPipeline } from '../grpo/step.ts';
import { stepConfigOf, type StepConfig } from '../grpo/step_config.ts';
import { readsReference } from '../grpo/step_objective.ts';
import { runAdapterNotes } from '../grpo/run_adapter.ts';
import { Optimizer } from '../grpo/optimizer.ts';
import type { PromptSource, StageData, StepPipelineOptions, StepSource } from '../grpo/step_types.ts';
import { grpo_loss_from_logps, LossScratch, warmLossPipelines } from '../grpo/loss_from_logps.ts';
import { rewardAdvantages } from '../grpo/step_prepare.ts';
import { rewardAdvantageGap } from '../grpo/advantages.ts';
import { checkScorable, padBatch, raggedFromPadded } from '../grpo/batch.ts';
import { score_completions } from '../model/score.ts';
import type { LoraAdapter } from '../model/lora_adapter.ts';

/**
 * A stage's data with the page's extras (src/bridge/protocol.ts StageExtras): token texts and the Doctor's report.
 * The assembled batch goes to the page with the settings the update runs with (`ran`, batchOf), so the batch on
 * screen, the one its Doctor judges and the one its Export writes are one batch. `inferred`: the ids the imported
 * batch's reader inferred (none for the prompt set's own rollout).
 */
function withExtras(id: StageId, data: StageData[StageId] | null, model: KnownModel, pipe: StepPipeline, ran: EffectiveSettings, inferred: InferredIds | undefined): StagePayloads[StageId] | null {
  // The Doctor's options as `grpo-studio doctor` forms them on the exported file (the tokenizer only where it fits
  // the batch, the reader's inferred ids): the batch holds the update's settings, its position ids among them.
  const doctor = (batch: GrpoBatch) => diagnose(batch, doctorOptions(batch, model, inferred));
  if (id === 'assemble' && data) {
    const a = data as StageData['assemble'];
    const batch = batchOf(a, ran);
    return { ...a, batch, token_texts: model.tokenizer ? tokenTexts(model.tokenizer, batch) : null, report: doctor(batch) };
  }
  const assembled = pipe.data('assemble');
  if (id === 'loss' && data && assembled && !assembled.batch.old_per_token_logps) return { ...(data as StageData['loss']), report: doctor(withTrainerSide(pipe, ran)!) };
  return data as StagePayloads[StageId] | null;
}

/**
 * The update's assembled batch with the settings it runs with as its trainer, config and run (src/bridge/batch_settings.ts,
 * as the page's Export writes them): the prompt set's rollout keeps what its StepConfig says of the batch (model_type,
 * position_ids) below them and adds its tokenizer's EOS; an imported batch came to the step with them already.
 */
const batchOf = (a: StageData['assemble'], ran: EffectiveSettings): GrpoBatch => withSettings(a.batch, ran, a.padded.tokenizer_eos_token_id);

/**
 * The update's assembled batch (batchOf) with its trainer side: the batch's own old_per_token_logps, else the policy's
 * log-probs before the step (the loss stage's, ragged like the completions); null before the loss stage. The Doctor's
 * sampler-vs-trainer rule and the mismatch explorer read both sides from it.
 */
function withTrainerSide(pipe: StepPipeline, ran: EffectiveSettings): GrpoBatch | null {
  const assembled = pipe.data('assemble');
  const l = pipe.data('loss');
  if (!assembled || !l) return null;
  const batch = batchOf(assembled, ran);
  if (batch.old_per_token_logps) return batch;
  const C = assembled.padded.C;
  return { ...batch, old_per_token_logps: batch.completion_ids.map((ids, b) => Array.from(l.old_per_token_logps.subarray(b * C, b * C + ids.length))) };
}

class PipelineRunner implements StepRunner {
  private policy: CausalLM | null = null;
  /** The weights as loaded: the frozen-copy reference, and what 'loaded' restores. None under an adapter: the base is frozen itself. */
  private frozen: CausalLM | null = null;
  /** A second checkpoint as the reference, replacing the frozen copy as reference while it is loaded. */
  private refModel: { model: CausalLM; name: string } | null = null;
  /** The optimizer of updates that continue from stepped weights: its moments and step count carry over, as a trainer's next step. */
  private optimizer: Optimizer | null = null;
  /** None for a weights-only folder: id batches step; what renders or decodes text is refused (noTokenizer). */
  private tokenizer: { tokenizer: Tokenizer; kind: string } | null = null;
  private name = '';
  /** Where the policy came from and how its weights are held: f32 to train them all, checkpoint dtype as an adapter's frozen base. */
  private choice: ModelChoice | null = null;
  private storage: 'f32' | 'checkpoint' = 'f32';
  /** Gradient checkpointing, the user's choice: every policy loaded takes it. */
  private checkpointing = false;
  private adapter: AdapterSlot | null = null;
  private pipe: StepPipeline | null = null;
  /** The settings the current update was started with, and its loss stage's trainer view. */
  private ran: EffectiveSettings | null = null;
  private view: TrainerView | null = null;
  /** The ids the current update's imported batch's reader inferred (StepStart): its stages' Doctor judges as the import's. */
  private inferred: InferredIds | undefined = undefined;

  constructor(
    private readonly gpu: Gpu,
    private readonly runJs: JsRewardRunner,
    private readonly runTools: JsToolRunner,
    private readonly templateRenderer?: (tok: Tokenizer) => BoundedRenderer,
  ) {}

  /**
   * Loads the new model beside the current one and swaps only when it loaded and fits its tokenizer: a
   * failed load (no weights, an offline Hub id, a mismatched vocabulary) keeps the model that worked. A folder
   * without tokenizer.json loads without one (an id batch needs none, as `grpo-studio score`).
   * The frozen-copy reference is snapshotted here, once; a reference checkpoint of the previous model is dropped.
   */
  async load(choice: ModelChoice, onProgress: (p: LoadProgress) => void, storage: 'f32' | 'checkpoint' = 'f32'): Promise<ModelInfo> {
    const source = sourceOf(choice);
    onProgress({ label: 'tokenizer', loaded: 0, total: 0 });
    const tok = await loadTokenizer(source);
    const policy = await CausalLM.from_pretrained(source, this.gpu, {
      storage,
      onProgress: (p: ModelLoadProgress) => onProgress({ label: `policy weights${p.file ? `: ${p.file}` : ''} (${p.phase})`, loaded: p.loaded, total: p.total }),
    });
    let frozen: CausalLM | null = null;
    try {
      // A tokenizer may have fewer ids than the embedding (padded vocabularies), never more: its ids would index past it.
      if (tok && tok.tokenizer.vocab_size > policy.config.vocab_size) {
        throw new ModelLoadError(`${source.name}: the tokenizer has ${tok.tokenizer.vocab_size} tokens but the model's vocab_size is ${policy.config.vocab_size}: they do not belong together`);
      }
      if (storage === 'f32') frozen = await policy.snapshot();
    } catch (e) {
      policy.destroy();
      throw e;
    }
    this.dispose();
    policy.checkpointing = this.checkpointing;
    this.policy = policy;
    this.frozen = frozen;
    this.tokenizer = tok;
    this.name = source.name;
    this.choice = choice;
    this.storage = storage;
    return modelInfo(this.held());
  }

  async loadReference(choice: ModelChoice | null, onProgress: (p: LoadProgress) => void): Promise<ModelInfo> {
    const policy = this.policy;
    if (!policy) throw new Error('load a model first: the reference checkpoint must match its vocabulary');
    let next: PipelineRunner['refModel'] = null;
    if (choice) {
      const source = sourceOf(choice);
      // Frozen weights stay in their checkpoint dtype (bf16 at half the bytes), as the CLI's --ref-model.
      const model = await CausalLM.from_pretrained(source, this.gpu, {
        storage: 'checkpoint',
        onProgress: (p: ModelLoadProgress) => onProgress({ label: `reference weights${p.file ? `: ${p.file}` : ''} (${p.phase})`, loaded: p.loaded, total: p.total }),
      });
      if (model.config.vocab_size !== policy.config.vocab_size) {
        model.destroy();
        throw new ModelLoadError(`${source.name}: the reference's vocabulary (${model.config.vocab_size} tokens) differs from the policy's (${policy.config.vocab_size}): it cannot score the same completions`);
      }
      next = { model, name: source.name };
    }
    // The update on screen was computed against the old reference: it is dropped (its stepped weights stay).
    await this.drop(false);
    this.refModel?.model.destroy();
    this.refModel = next;
    return modelInfo(this.held());
  }

  async loadAdapter(choice: AdapterChoice | null, onProgress: (p: LoadProgress) => void): Promise<ModelInfo> {
    const policy = this.policy;
    if (!policy || !this.choice) throw new Error('load a model first: an adapter belongs to its base model');
    const next = choice ? await AdapterSlot.open(this.gpu, choice, policy, this.choice) : null;
    await this.drop(false);
    this.dropOptimizer();
    const old = this.adapter;
    this.adapter = null;
    policy.adapter = null;
    const storage = next ? 'checkpoint' : 'f32';
    if (storage !== this.storage && policy.info?.dtypes.includes('BF16')) {
      // bf16 weights are held as bf16 only frozen: the base under an adapter; to train them all, as f32. A reload
      // either way; if it fails, the model and adapter that worked stay.
      const ref = this.refModel;
      this.refModel = null;
      try {
        await this.load(this.choice, onProgress, storage);
      } catch (e) {
        next?.destroy();
        this.adapter = old;
        policy.adapter = old?.adapter ?? null;
        throw e;
      } finally {
        this.refModel = ref;
      }
    } else {
      // The base as loaded under an adapter; the copy of it that restarts a full-weight run is then not needed.
      if (next && this.frozen) {
        await policy.loadWeightsFrom(this.frozen);
        this.frozen.destroy();
        this.frozen = null;
      }
      this.frozen ??= next ? null : await policy.snapshot();
      this.storage = storage;
    }
    old?.destroy();
    this.adapter = next;
    this.policy!.adapter = next?.adapter ?? null;
    return modelInfo(this.held());
  }

  async adapterReference(reference: AdapterReference): Promise<ModelInfo> {
    if (!this.adapter) throw new Error('no adapter: the adapter reference applies to a loaded or created adapter');
    await this.drop(false);
    this.adapter.setReference(reference);
    return modelInfo(this.held());
  }

  async setCheckpointing(on: boolean): Promise<ModelInfo> {
    if (!this.policy) throw new Error('load a model first: gradient checkpointing applies to the loaded policy');
    if (this.policy.checkpointing === on) return modelInfo(this.held());
    await this.drop(false);
    this.checkpointing = on;
    this.policy!.checkpointing = on;
    this.policy!.releaseWorkspace(); // the next forward sizes its workspace for the new choice
    return modelInfo(this.held());
  }

  async saveAdapter(): Promise<Record<string, Uint8Array>> {
    if (!this.adapter) throw new Error('no adapter to save: load or create one first');
    return this.adapter.save();
  }

  /** The held models as modelInfo / pagePlan read them. */
  private held(): HeldModels {
    return { limits: this.gpu.limits, policy: this.policy!, name: this.name, tokenizer: this.tokenizer, frozen: this.frozen, refModel: this.refModel, adapter: this.adapter };
  }

  async runStage(stage: StageId, settings: StepSettings, start: StepStart = { kind: 'prompts' }): Promise<StageResult> {
    const policy = this.policy;
    const frozen = this.frozen;
    const tokenizer = this.tokenizer?.tokenizer;
    if (!policy || !(frozen || this.adapter)) throw new Error('load a model first');
    if (stage === 'render' || !this.pipe) {
      if (start.kind === 'prompts' && !tokenizer) throw this.noTokenizer('the prompt set (its chat template, sampling from prompts)');
      await this.drop(false);
      if (settings.weights === 'loaded') {
        if (frozen) await policy.loadWeightsFrom(frozen);
        this.adapter?.restoreLoaded();
        this.dropOptimizer();
      }
      // The sampler's temperature, budget and G are the settings' (one value: a trainer samples with what it scores with).
      const s = start.kind === 'prompts' ? samplerOf(settings.settings, settings.sampling) : settings.sampling;
      // An imported batch steps with the settings the update runs with in place of its file's (the page's edits,
      // another trainer): the advantages stage's checks read them, as the CLI's read them from the page's export.
      const source: StepSource =
        start.kind === 'batch'
          ? { kind: 'batch', batch: withSettings(start.batch, settings.settings) }
          : {
              kind: 'prompts',
              prompts: settings.prompts.map((p) => ({ messages: promptConversation(p), answer: p.answer })),
              tokenizer: tokenizer!,
              generation: { ...s, eos_token_ids: s.eos_token_ids ?? undefined },
              decoder: () => kvDecoder(policy),
              rewards: settings.rewards,
              runJs: this.runJs,
              ...(settings.tools ? { tools: toolsOf(settings.tools, this.runTools) } : {}),
            };
      this.ran = settings.settings;
      this.inferred = start.kind === 'batch' ? start.inferred : undefined;
      // The CLI's resolution (stepConfigOf): the studio loss, the trainer's objective where the studio loss is not it,
      // the optimizer step; an update that continues a run is that many steps further along TRL's lr schedule.
      // A combination the trainer refuses runs to the loss stage, which shows the refusal (and what it offers) beside
      // the loss table; the backward refuses with the same message the CLI gives before it starts.
      const steps_done = this.optimizer?.t ?? 0;
      const configFor = (C: number) => stepConfigOf(settings.settings, C, { steps_done, refuse: false });
      // C: the batch's widest completion, as the CLI's; a prompt-set update's is known once sampled (the pipeline's
      // configForWidth), till then its sampling budget stands in (the optimizer, all that is read before, does not depend on it).
      const config = configFor(start.kind === 'batch' ? widestCompletion(start.batch) : settings.sampling.max_new_tokens);
      // The run's own adapter, or none, as the CLI's step decides it (src/grpo/run_adapter.ts): a LoRA run stepped on
      // every weight, or on another adapter, is refused before any stage. What it accepts but notes (an adapter made
      // here, an adapter on a full-weight run) goes to the console: the adapter panel already names where it came from.
      for (const n of runAdapterNotes(settings.settings, this.adapter?.adapter ?? null, policy.config, { created: this.adapter?.created ?? false })) console.warn(n);
      // Changed optimizer settings start from fresh moments (step 1, shown by the step stage); the learning rate alone may move.
      const withoutLr = (c: StepConfig['optimizer'] | undefined) => JSON.stringify(c && { ...c, lr: 0 });
      if (withoutLr(this.optimizer?.config) !== withoutLr(config.optimizer)) this.dropOptimizer();
      this.optimizer?.setLearningRate(config.optimizer.lr);
      this.optimizer ??= new Optimizer(this.gpu, policy.trainableParams.values(), config.optimizer);
      // No KL term (β = 0 and none of the trainer's): no reference at all, as TRL (which then loads none).
      const ref = this.refModel;
      const lora = !ref && this.adapter ? this.adapter.referenceOf(policy) : null;
      const opts: StepPipelineOptions = {
        policy,
        reference: !readsReference(config.loss.beta, config.trainer) ? null : ref ? ref.model : lora ? lora.model : frozen!,
        reference_source: ref ? { kind: 'model', name: ref.name } : lora ? lora.source : { kind: 'frozen-copy' },
        config,
        ...(start.kind === 'prompts' ? { configForWidth: configFor } : {}),
        source,
        undo: true,
        optimizer: this.optimizer,
      };
      this.pipe = new StepPipeline(this.gpu, opts);
    }
    const pipe = this.pipe;
    if (pipe.nextStage !== stage) throw new Error(`stage "${stage}" cannot run now: the next stage is ${pipe.nextStage ? `"${pipe.nextStage}"` : 'none (reset first)'}`);
    const r = await pipe.next();
    const data = withExtras(r.id, r.data, this.known()!, pipe, this.ran!, this.inferred);
    if (r.id === 'loss' && data) {
      // The settings of this update are the ones sent with its first stage.
      this.view = await trainerView(this.gpu, pipe, this.ran!);
      return { ...r, data: { ...(data as StagePayloads['loss']), trainer: this.view } };
    }
    return { ...r, data };
  }

  updateBatch(): GrpoBatch | null {
    return this.pipe ? withTrainerSide(this.pipe, this.ran!) : null;
  }

  async scoreSides(batch: GrpoBatch, settings: EffectiveSettings): Promise<{ trainer: number[][]; base: number[][] | null }> {
    const policy = this.policy;
    if (!policy) throw new Error('load a model first: the trainer side is recomputed with it');
    // As `grpo-studio score` (src/cli/score.ts): the batch padded as the step pads it, the settings' temperature.
    const config = stepConfigOf(settings, widestCompletion(batch), { refuse: false });
    const padded = padBatch(batch, { position_ids: config.position_ids });
    checkScorable(batch, padded, policy.config.vocab_size, 'policy');
    // The trainer side is the run's policy: a LoRA run's through its adapter (refused without it), as `mismatch --model`.
    runAdapterNotes(settings, this.adapter?.adapter ?? null, policy.config, { created: this.adapter?.created ?? false });
    // Views of the policy's weights with a workspace of their own: an update between its forward and its backward
    // keeps its saved activations. The adapter's view scores the trainer side; the adapter-off view, the base.
    const score = async (adapter: LoraAdapter | null): Promise<number[][]> => {
      const view = policy.withAdapter(adapter);
      const rec = this.gpu.recorder('mismatch-score');
      const s = score_completions(rec, view, padded, { temperature: config.loss.temperature });
      try {
        await rec.submit();
        return raggedFromPadded(await this.gpu.readF32(s.per_token_logps, padded.B * padded.C), padded);
      } finally {
        s.destroy();
        view.destroy();
      }
    };
    const adapter = this.adapter?.adapter ?? null;
    return { trainer: await score(adapter), base: adapter ? await score(null) : null };
  }

  tokenizerFor(batch: GrpoBatch): { special_ids: ReadonlySet<number>; tokenText: (id: number) => string } | null {
    const known = this.known();
    // The tokenizer only where the Doctor would decode the batch with it: another model's would name every token wrongly.
    const tok = known && doctorOptions(batch, known).tokenizer;
    return tok ? { special_ids: new Set(tok.special_token_ids), tokenText: (id) => tok.decode([id]) } : null;
  }

  inspect(batch: GrpoBatch, opts: { deferTokenizerRules?: boolean; inferred?: InferredIds } = {}): { report: DoctorReport; token_texts?: TokenTexts; deferred?: boolean } {
    return inspectBatch(batch, this.known(), opts);
  }

  /** The loaded model as the Doctor knows it (src/worker/inspect.ts), or null before a load. */
  private known(): KnownModel | null {
    return this.policy && this.choice ? loadedModel(this.tokenizer?.tokenizer, this.policy.config, this.name) : null;
  }

  /** The one-line refusal of what needs the tokenizer a weights-only model lacks. */
  private noTokenizer(what: string): Error {
    return new Error(`${this.name} has no tokenizer (no tokenizer.json in its folder): ${what} needs one; import an id batch to step it, or load a folder with tokenizer.json`);
  }

  async templateDiff(conversations: ChatMessage[][], variants: [TemplateVariant, TemplateVariant]): Promise<TemplateDiff> {
    if (!this.policy) throw new Error('load a model first: the template diff renders with its tokenizer');
    const tok = this.tokenizer?.tokenizer;
    if (!tok) throw this.noTokenizer('the template diff');
    if (!this.templateRenderer) throw new Error('no bounded chat-template renderer here (the page passes its template sandbox)');
    const renderer = this.templateRenderer(tok);
    try {
      return await diffTemplates(tok, conversations, variants, renderer);
    } finally {
      await renderer.close();
    }
  }

  private whatIfCurrent: { pipe: StepPipeline; side: WhatIfSide; scratch: LossScratch } | null = null;

  async whatIf(settings: EffectiveSettings): Promise<WhatIfResult> {
    const t0 = performance.now();
    const pipe = this.pipe;
    const l = pipe?.data('loss');
    const a = pipe?.data('assemble');
    const pf = pipe?.data('policy_forward');
    const adv = pipe?.data('advantages');
    if (!pipe || !l || !a || !pf || !adv) throw new Error('what-if needs an update that has reached its loss stage: run it to "loss" first');
    const ran = pipe.config;
    // The step's own resolution (one parser): a bad value is named, not used. The temperature stays the update's.
    const asked = stepConfigOf(settings, a.padded.C, { refuse: false });
    const next: StepConfig = { ...asked, loss: { ...asked.loss, temperature: ran.loss.temperature } };
    const notes: string[] = [];
    if (asked.loss.temperature !== ran.loss.temperature) notes.push(`temperature stays ${ran.loss.temperature}: a new temperature needs a new forward (log-probs change), which a what-if does not run`);
    const ref = pipe.data('reference_forward')?.ref_per_token_logps ?? null;
    if (next.loss.beta !== 0 && !ref) throw new Error(`β = ${next.loss.beta} needs reference log-probs, and this update ran with β = 0 (no reference forward): run it with β > 0 first`);
    const { B, C } = a.padded;
    // The what-if's advantages: the update's, unless its advantage settings differ; then the rewards' under them,
    // as the advantages stage computes them (its groups, TRL's unscorable rows, OpenRLHF's clamp) — where the
    // settings name a formula the studio does not recompute (rewardAdvantageGap) or there are no rewards, the
    // update's are kept and a note says why.
    const formula = (c: StepConfig) => JSON.stringify([c.scale_rewards, c.advantage_estimator, c.advantage_clip]);
    let nextAdvantages: ArrayLike<number> = adv.advantages;
    const gap = rewardAdvantageGap({ trainer: settings.trainer, config: settings.config, run: settings.run });
    if (gap) notes.push(`advantages are the update's: ${gap}`);
    else if (formula(next) !== formula(ran)) {
      if (!a.batch.rewards) notes.push('the batch has advantages but no rewards: advantage scaling cannot be recomputed');
      else nextAdvantages = rewardAdvantages(a.batch, a.batch.num_generations, a.batch.group_ids, next).advantages;
    }
    const scratch = this.whatIfCurrent?.pipe === pipe ? this.whatIfCurrent.scratch : new LossScratch(this.gpu);
    const side = async (c: StepConfig): Promise<WhatIfSide> => {
      const advantages = Float32Array.from(c === next ? nextAdvantages : adv.advantages);
      const terms = await grpo_loss_from_logps(
        this.gpu,
        { B, T: C, per_token_logps: pf.per_token_logps, completion_mask: a.padded.completion_mask, advantages, old_per_token_logps: l.old_per_token_logps, ref_per_token_logps: c.loss.beta !== 0 ? ref : null },
        c.loss,
        scratch,
      );
      return { terms, advantages };
    };
    if (this.whatIfCurrent?.pipe !== pipe) {
      this.whatIfCurrent?.scratch.destroy();
      this.whatIfCurrent = { pipe, side: await side(ran), scratch };
      // After answering the first what-if, compile the other aggregations' pipelines while the user reads it.
      setTimeout(() => warmLossPipelines(this.gpu, next.loss), 0);
    }
    const current = this.whatIfCurrent.side;
    const whatif = await side(next);
    // The self-check compares studio loss with studio loss (under a trainer preset the stage's `loss` is the trainer's).
    // The trainer side: the update's own terms only beside the same trainer's (a preset what-if has no current value).
    const own = this.ran?.trainer === settings.trainer ? (this.view?.terms ?? null) : null;
    return { settings, current, whatif, check: Math.abs(current.terms.loss - l.studio_losses[ran.loss.loss_type]), trainer: await trainerWhatIf(this.gpu, pipe, own, settings), notes, ms: performance.now() - t0 };
  }

  async beforeAfter(): Promise<BeforeAfterResult> {
    const pipe = this.pipe;
    const s = pipe?.data('sample');
    const r = pipe?.data('reward');
    const render = pipe?.data('render');
    if (!pipe || !s || !r || !render) throw new Error('the before/after check needs an update from the prompt set (render, sample, reward) that has taken its optimizer step');
    const after = await pipe.resample();
    const side = (x: StageData['sample'], y: StageData['reward']): SampledSide => ({ completion_texts: x.completion_texts, lengths: x.completion_ids.map((c) => c.length), rewards: y.rewards, rewards_per_func: y.rewards_per_func });
    return { G: s.completion_ids.length / render.prompt_ids.length, names: r.names, before: side(s, r), after: side(after.sample, after.reward) };
  }

  plan(settings: StepSettings, batch?: { B: number; P: number; C: number }): PagePlan {
    if (!this.policy) throw new Error('load a model first');
    if (batch) return pagePlan(this.held(), batch.B, batch.P, batch.C);
    const P = longestPrompt(this.held(), settings.prompts.map(promptConversation));
    return pagePlan(this.held(), settings.prompts.length * settings.sampling.num_generations, P, settings.sampling.max_new_tokens);
  }

  async reset(undo = true): Promise<void> {
    await this.drop(undo);
  }

  /** Drops the run, undoing its optimizer step or keeping the stepped weights. */
  private async drop(undo: boolean): Promise<void> {
    this.whatIfCurrent?.scratch.destroy();
    this.whatIfCurrent = null;
    this.view = null;
    if (undo) await this.pipe?.reset();
    this.pipe?.destroy();
    this.pipe = null;
  }

  private dropOptimizer(): void {
    this.optimizer?.destroy();
    this.optimizer = null;
  }

  dispose(): void {
    this.whatIfCurrent?.scratch.destroy();
    this.whatIfCurrent = null;
    this.pipe?.destroy();
    this.pipe = null;
    this.dropOptimizer();
    this.adapter?.destroy();
    this.adapter = null;
    this.policy?.destroy();
    this.policy = null;
    this.frozen?.destroy();
    this.frozen = null;
    this.refModel?.model.destroy();
    this.refModel = null;
  }
}

/** `runJsReward` defaults to the sandbox worker (the browser); Node callers without JS rewards need none. */
export const createStepRunner = (gpu: Gpu, deps: Partial<Parameters<CreateStepRunner>[1]> = {}): StepRunner =>
  new PipelineRunner(gpu, deps.runJsReward ?? ((spec, samples) => runJsReward(spec, samples)), deps.runJsTools ?? ((source, calls, timeout) => runJsTools(source, calls, timeout)), deps.templateRenderer);

/** The prompt source's tool loop from the page's tool settings: the calls run with the tools source in the sandbox. */
const toolsOf = (t: ToolSettings, run: JsToolRunner): NonNullable<PromptSource['tools']> => ({
  schemas: t.schemas,
  loop: { way: t.way, max_tool_calling_iterations: t.max_tool_calling_iterations },
  run: (calls) => run(t.source, calls, t.timeout_ms),
});
