// One GRPO update as a stage machine, UI-independent (the studio worker and the Node CLI run the same
// code): render prompts → sample G completions → score rewards → advantages → assemble batch → policy
// forward (per-token log-probs, entropy) → reference forward → loss (every aggregation; the configured
// one drives the gradient) → backward → clip + optimizer step → re-evaluate the same batch with the new
// weights. `next()` runs one stage and returns {id, ms, gpuBytes, peakBytes, data}; `runToEnd()`;
// `reset()` goes back to before the first stage (undoing the optimizer step when `undo` is set).
// Starting from an imported grpo-batch/v1 batch, render / sample / reward are skipped and say so.
//
// GPU buffers live across stages: the policy forward's logits and saved activations feed the loss and
// the backward in place, and nothing goes CPU → GPU between policy forward and optimizer step. Each
// stage reads back only what is shown: per-token arrays (B, C), losses and norms.
//
// old_per_token_logps: the batch's, or else the policy's own log-probs before the step (ratio 1, as TRL
// with one iteration per generation). Reference: a given model; with none and β > 0 a frozen copy of
// the policy, which for this update is the policy itself before the step (same weights, same batch:
// its log-probs are the policy forward's); with β = 0 and none, no reference at all, as TRL.
import type { Gpu } from '../gpu/context.ts';
import { BatchFormatError, scaleRewardsOf, type BatchConfig, type ChatMessage, type GrpoBatch, type PositionIdsMode, type ScaleRewards } from '../io/batch.ts';
import { generate, type Decoder, type FinishReason, type GenerateOptions } from '../model/generate.ts';
import type { CausalLM } from '../model/model.ts';
import { score_completions, type CompletionScores } from '../model/score.ts';
import { ModelLoadError, type ParamGroup } from '../model/config.ts';
import { loss_weights } from '../ref/loss_reduce.ts';
import type { RenderOptions, Tokenizer } from '../tokenize/tokenizer.ts';
import { STAGES, type StageId } from './stages.ts';
import { computeAdvantages, type AdvantageEstimator, type GroupStats } from './advantages.ts';
import { assembleBatch, checkScorable, padBatch, type PaddedBatch } from './batch.ts';
import { DEFAULT_GRPO_LOSS_CONFIG, grpo_loss, parseGrpoLossConfig, readGrpoLoss, type ClipCounts, type GrpoLossConfig, type GrpoLossResult, type LossType } from './loss.ts';
import { clipCoefFor, Optimizer, parseOptimizerConfig, type OptimizerConfig } from './optimizer.ts';
import { scoreRewards, type JsRewardRunner, type RewardSpec, type RewardTable } from './rewards.ts';


// ------------------------------------------------------------------------------------------ config

/** Everything one update needs besides the data: TRL's loss fields, the optimizer, clipping, positions. */
export interface StepConfig {
  loss: GrpoLossConfig;
  optimizer: OptimizerConfig;
  max_grad_norm: number; // ≤ 0: no clipping
  position_ids: PositionIdsMode;
  /** How advantages are computed when the batch has rewards but no advantages (and from sampled rewards). */
  scale_rewards: ScaleRewards;
  advantage_estimator: AdvantageEstimator;
}

/**
 * A batch file's `config` (TRL names: epsilon / epsilon_high, optimizer {name, lr, betas, eps,
 * weight_decay}, max_grad_norm) as a StepConfig. Missing fields take TRL's defaults (epsilon_high =
 * epsilon, max_grad_norm 1.0); a missing max_completion_length is the batch's widest completion C.
 * Throws GrpoLossError / OptimizerConfigError naming the field.
 */
export function stepConfigFromBatch(cfg: BatchConfig | undefined, C: number): StepConfig {
  const c = cfg ?? {};
  const d = DEFAULT_GRPO_LOSS_CONFIG;
  const epsilon = c.epsilon ?? d.epsilon_low;
  const loss = parseGrpoLossConfig({
    loss_type: c.loss_type ?? d.loss_type,
    beta: c.beta ?? d.beta,
    epsilon_low: epsilon,
    epsilon_high: c.epsilon_high ?? epsilon,
    delta: c.delta ?? null,
    temperature: c.temperature ?? d.temperature,
    max_completion_length: c.max_completion_length ?? C,
    kl_estimator: c.kl_estimator ?? d.kl_estimator,
    importance_sampling_level: c.importance_sampling_level ?? d.importance_sampling_level,
    num_items_in_batch: c.num_items_in_batch,
  });
  const mgn = c.max_grad_norm ?? 1.0;
  if (typeof mgn !== 'number' || !Number.isFinite(mgn)) throw new BatchFormatError(`config.max_grad_norm: expected a number, got ${JSON.stringify(mgn)}`);
  return {
    loss,
    optimizer: parseOptimizerConfig(c.optimizer),
    max_grad_norm: mgn,
    position_ids: c.position_ids ?? 'from_attention_mask',
    scale_rewards: scaleRewardsOf(c),
    advantage_estimator: c.advantage_estimator ?? 'trl',
  };
}

// ------------------------------------------------------------------------------------------ sources

/** Where the update starts: an imported batch, or prompts to render, sample and score. */
export type StepSource = { kind: 'batch'; batch: GrpoBatch } | PromptSource;

export interface PromptSource {
  kind: 'prompts';
  prompts: { messages: ChatMessage[]; answer: string }[];
  tokenizer: Tokenizer;
  render?: RenderOptions;
  /** Sampler settings, G, max_new_tokens, seed; pad / EOS default to the tokenizer's. */
  generation: Omit<GenerateOptions, 'pad_token_id' | 'eos_token_ids' | 'on_step'> & { pad_token_id?: number; eos_token_ids?: number[] };
  /** The decoder over the policy (src/model/generate.ts kvDecoder). */
  decoder: () => Decoder;
  rewards: RewardSpec[];
  /** Runs user JS rewards with a time limit (the sandbox worker in the browser). */
  runJs: JsRewardRunner;
}

// ------------------------------------------------------------------------------------------ results

/** A (B, C) per-token array over the padded completion grid; positions past a row's completion hold 0 or junk: read the masks. */
export type PerToken = Float32Array;

export interface StageData {
  render: { prompt_texts: string[]; prompt_ids: number[][]; messages: ChatMessage[][] }; // one per prompt
  sample: { completion_ids: number[][]; completion_texts: string[]; sampling_per_token_logps: number[][]; finish_reason: FinishReason[]; decode_ms: number };
  reward: RewardTable;
  advantages: { advantages: number[]; groups: GroupStats[] | null; from: 'batch' | 'rewards' };
  assemble: { batch: GrpoBatch; padded: PaddedBatch };
  policy_forward: { per_token_logps: PerToken; per_token_entropy: PerToken };
  reference_forward: { ref_per_token_logps: PerToken | null; reference: 'model' | 'frozen-copy' | 'none' };
  loss: {
    old_per_token_logps: PerToken;
    importance_ratio: PerToken;
    per_token_kl: PerToken | null;
    per_token_loss: PerToken;
    token_weight: PerToken; // ∂loss/∂per_token_loss under the chosen aggregation
    clip: Uint32Array; // CLIP_LOW | CLIP_HIGH | DELTA_BINDS bits
    loss: number;
    losses: Record<LossType, number>;
    policy_term: number; // the loss without β·KL
    kl_term: number; // β·KL, same aggregation
    mean_kl: number; // Σ M·KL / Σ M
    clip_counts: ClipCounts;
  };
  backward: { grad_norm: number; group_grad_norms: Record<ParamGroup, number> };
  step: { optimizer: OptimizerConfig; clip_coef: number; step: number; update_norm: number; group_update_norms: Record<ParamGroup, number> };
  re_evaluate: {
    post_per_token_logps: PerToken;
    delta_per_token_logps: PerToken; // after − before
    post_per_token_kl: PerToken | null;
    post_per_token_loss: PerToken;
    loss_after: number;
    losses_after: Record<LossType, number>;
  };
}

export interface StageResult<S extends StageId = StageId> {
  id: S;
  ms: number; // wall time, GPU work included
  gpuBytes: number; // bytes allocated by GPU buffers after the stage
  peakBytes: number; // the most allocated during the stage
  /** Why the stage did not run (e.g. render / sample / reward for an imported batch). */
  skipped?: string;
  data: StageData[S] | null;
}

// ------------------------------------------------------------------------------------------ pipeline

export interface StepPipelineOptions {
  policy: CausalLM;
  /** The reference policy; null: a frozen copy of the policy when β > 0, none when β = 0. */
  reference: CausalLM | null;
  config: StepConfig;
  source: StepSource;
  /** Keep a copy of the weights before the step so reset() can restore them (the studio; costs one copy of the weights). */
  undo?: boolean;
}

const f32 = (gpu: Gpu, b: GPUBuffer, n: number) => gpu.readF32(b, n);

export class StepPipeline {
  readonly gpu: Gpu;
  readonly results: StageResult[] = [];
  private readonly opts: StepPipelineOptions;
  private readonly stageData: Partial<{ [S in StageId]: StageData[S] }> = {};
  private owned: { destroy(): void }[] = [];
  private padded: PaddedBatch | null = null;
  private gpuIn: { advantages: GPUBuffer; old: GPUBuffer | null } | null = null;
  private policyScores: CompletionScores | null = null;
  private refLogps: GPUBuffer | null = null;
  private lossRes: GrpoLossResult | null = null;
  private optimizer: Optimizer | null = null;
  private snapshot: Map<string, GPUBuffer> | null = null;
  /** Set once weights changed and no snapshot can undo it: a frozen-copy reference would be wrong from then on. */
  private stepped = false;

  constructor(gpu: Gpu, opts: StepPipelineOptions) {
    this.gpu = gpu;
    this.opts = opts;
    const { policy, reference } = opts;
    if (reference && reference.config.vocab_size !== policy.config.vocab_size) {
      throw new ModelLoadError(`the reference's vocabulary (${reference.config.vocab_size} tokens) differs from the policy's (${policy.config.vocab_size})`);
    }
  }

  get config(): StepConfig {
    return this.opts.config;
  }

  /** The stage next() runs, or null when the update is complete. */
  get nextStage(): StageId | null {
    return STAGES[this.results.length] ?? null;
  }

  get done(): boolean {
    return this.nextStage === null;
  }

  /** The data of a completed stage. */
  data<S extends StageId>(id: S): StageData[S] | undefined {
    return this.stageData[id] as StageData[S] | undefined;
  }

  async next(): Promise<StageResult> {
    const id = this.nextStage;
    if (!id) throw new Error('the update is complete: reset() to run it again');
    const gpu = this.gpu;
    gpu.resetPeak();
    const t0 = performance.now();
    const out = await this.run(id);
    const result: StageResult = { id, ms: performance.now() - t0, gpuBytes: gpu.allocatedBytes, peakBytes: gpu.peakBytes, data: 'skipped' in out ? null : out.data, skipped: 'skipped' in out ? out.skipped : undefined };
    if (!('skipped' in out)) (this.stageData as Record<string, unknown>)[id] = out.data;
    this.results.push(result);
    return result;
  }

  async runToEnd(): Promise<StageResult[]> {
    while (!this.done) await this.next();
    return this.results;
  }

  /** Back to before the first stage: frees the update's buffers and optimizer state; restores the weights if `undo`. */
  async reset(): Promise<void> {
    if (this.snapshot) {
      const rec = this.gpu.recorder('undo step');
      for (const [name, buf] of this.snapshot) rec.copy(buf, 0, this.opts.policy.trainableParams.get(name)!.buffer, 0, buf.size);
      await rec.submit();
      for (const b of this.snapshot.values()) b.destroy();
      this.snapshot = null;
    }
    this.free();
    this.results.length = 0;
    for (const k of Object.keys(this.stageData)) delete (this.stageData as Record<string, unknown>)[k];
  }

  destroy(): void {
    for (const b of this.snapshot?.values() ?? []) b.destroy();
    this.snapshot = null;
    this.free();
  }

  private free(): void {
    for (const o of this.owned) o.destroy();
    this.owned = [];
    this.optimizer?.destroy();
    this.optimizer = null;
    this.padded = null;
    this.gpuIn = null;
    this.policyScores = null;
    this.refLogps = null;
    this.lossRes = null;
  }

  private own<T extends { destroy(): void }>(x: T): T {
    this.owned.push(x);
    return x;
  }

  private need<S extends StageId>(id: S): StageData[S] {
    const d = this.data(id);
    if (!d) throw new Error(`stage "${id}" has no result`);
    return d;
  }

  private get prompts(): PromptSource | null {
    return this.opts.source.kind === 'prompts' ? this.opts.source : null;
  }

  private get beta(): number {
    return this.config.loss.beta;
  }

  // ---------------------------------------------------------------- stages

  private async run(id: StageId): Promise<{ data: StageData[StageId] } | { skipped: string }> {
    switch (id) {
      case 'render':
        return this.render();
      case 'sample':
        return this.sample();
      case 'reward':
        return this.reward();
      case 'advantages':
        return { data: this.advantages() };
      case 'assemble':
        return { data: this.assemble() };
      case 'policy_forward':
        return { data: await this.policyForward() };
      case 'reference_forward':
        return this.referenceForward();
      case 'loss':
        return { data: await this.loss() };
      case 'backward':
        return { data: await this.backward() };
      case 'step':
        return { data: await this.step() };
      case 're_evaluate':
        return { data: await this.reEvaluate() };
    }
  }

  private static readonly FROM_BATCH = 'the update starts from an imported batch';

  private render(): { data: StageData['render'] } | { skipped: string } {
    const src = this.prompts;
    if (!src) return { skipped: StepPipeline.FROM_BATCH };
    const rendered = src.prompts.map((p) => src.tokenizer.renderChat(p.messages, src.render));
    return { data: { prompt_texts: rendered.map((r) => r.text), prompt_ids: rendered.map((r) => r.ids), messages: src.prompts.map((p) => p.messages) } };
  }

  /** pad / EOS for generation and assembly: the settings', else the tokenizer's (pad falls back to EOS, as TRL). */
  private special(src: PromptSource): { pad: number; eos: number[] } {
    const eos = src.generation.eos_token_ids ?? (src.tokenizer.eos_token_id !== undefined ? [src.tokenizer.eos_token_id] : []);
    const pad = src.generation.pad_token_id ?? src.tokenizer.pad_token_id ?? eos[0];
    if (pad === undefined) throw new RangeError('the tokenizer has neither a pad nor an EOS token: set pad_token_id');
    return { pad, eos };
  }

  private async sample(): Promise<{ data: StageData['sample'] } | { skipped: string }> {
    const src = this.prompts;
    if (!src) return { skipped: StepPipeline.FROM_BATCH };
    const { pad, eos } = this.special(src);
    const decoder = src.decoder();
    try {
      const out = await generate(decoder, this.need('render').prompt_ids, { ...src.generation, pad_token_id: pad, eos_token_ids: eos });
      return {
        data: {
          completion_ids: out.completion_ids,
          completion_texts: out.completion_ids.map((ids) => src.tokenizer.decode(ids)),
          sampling_per_token_logps: out.sampling_per_token_logps,
          finish_reason: out.finish_reason,
          decode_ms: out.timings.prefill_ms + out.timings.decode_ms,
        },
      };
    } finally {
      decoder.dispose();
    }
  }

  private async reward(): Promise<{ data: StageData['reward'] } | { skipped: string }> {
    const src = this.prompts;
    if (!src) return { skipped: StepPipeline.FROM_BATCH };
    const r = this.need('render');
    const s = this.need('sample');
    const G = src.generation.num_generations;
    const samples = s.completion_ids.map((ids, i) => ({
      index: i,
      group: Math.floor(i / G),
      prompt: r.prompt_texts[Math.floor(i / G)],
      completion: s.completion_texts[i],
      answer: src.prompts[Math.floor(i / G)].answer,
      completion_ids: ids,
    }));
    return { data: await scoreRewards(src.rewards, samples, src.runJs) };
  }

  /** The batch's advantages, or TRL's group advantages from its (or the sampled) rewards. */
  private advantages(): StageData['advantages'] {
    const c = this.config;
    const src = this.opts.source;
    if (src.kind === 'batch' && src.batch.advantages) return { advantages: [...src.batch.advantages], groups: null, from: 'batch' };
    const rewards = src.kind === 'batch' ? src.batch.rewards : this.need('reward').rewards;
    if (!rewards) throw new BatchFormatError('the batch has neither "advantages" nor "rewards": nothing to take a step on');
    const G = src.kind === 'batch' ? src.batch.num_generations : src.generation.num_generations;
    const a = computeAdvantages(rewards, { num_generations: G, scale_rewards: c.scale_rewards, estimator: c.advantage_estimator });
    return { advantages: Array.from(a.advantages), groups: a.groups, from: 'rewards' };
  }

  private assemble(): StageData['assemble'] {
    const src = this.opts.source;
    const advantages = this.need('advantages').advantages;
    let batch: GrpoBatch;
    if (src.kind === 'batch') {
      batch = { ...src.batch, advantages };
    } else {
      const { pad, eos } = this.special(src);
      const s = this.need('sample');
      const rw = this.need('reward');
      const r = this.need('render');
      batch = assembleBatch({
        prompt_ids: r.prompt_ids,
        completion_ids: s.completion_ids,
        num_generations: src.generation.num_generations,
        pad_token_id: pad,
        eos_token_ids: eos,
        rewards: rw.rewards,
        rewards_per_func: rw.rewards_per_func,
        reward_weights: rw.weights,
        advantages,
        sampling_per_token_logps: s.sampling_per_token_logps,
        messages: r.messages,
        prompt_texts: s.completion_ids.map((_, i) => r.prompt_texts[Math.floor(i / src.generation.num_generations)]),
        completion_texts: s.completion_texts,
        config: this.batchConfig(),
      });
    }
    const padded = padBatch(batch, { position_ids: this.config.position_ids });
    checkScorable(batch, padded, this.opts.policy.config.vocab_size, 'policy');
    if (advantages.length !== padded.B) throw new BatchFormatError(`advantages has ${advantages.length} values for ${padded.B} samples`);
    this.padded = padded;
    const gpu = this.gpu;
    this.gpuIn = {
      advantages: this.own(gpu.upload('advantages', Float32Array.from(advantages))), // (B)
      old: padded.old_per_token_logps ? this.own(gpu.upload('old_per_token_logps', padded.old_per_token_logps)) : null, // (B, C)
    };
    return { batch, padded };
  }

  /** The StepConfig written back in a batch file's terms (so an exported batch replays the same update). */
  private batchConfig(): BatchConfig {
    const { loss: l, optimizer, max_grad_norm, position_ids, scale_rewards, advantage_estimator } = this.config;
    return {
      loss_type: l.loss_type, beta: l.beta, epsilon: l.epsilon_low, epsilon_high: l.epsilon_high, delta: l.delta, temperature: l.temperature,
      kl_estimator: l.kl_estimator, importance_sampling_level: l.importance_sampling_level, max_completion_length: l.max_completion_length,
      optimizer: { ...optimizer }, max_grad_norm, position_ids, scale_rewards, advantage_estimator, model_type: this.opts.policy.config.model_type,
    };
  }

  private get n(): number {
    return this.padded!.B * this.padded!.C;
  }

  /** Forward with saved activations, scoring every completion position (TRL computes them all; the masks decide). */
  private async policyForward(): Promise<StageData['policy_forward']> {
    if (this.stepped && !this.opts.reference && this.beta !== 0) {
      throw new Error('the frozen-copy reference is the policy as loaded, and its weights have changed: reload the model or give a reference model');
    }
    const rec = this.gpu.recorder('policy_forward');
    const s = this.own(score_completions(rec, this.opts.policy, this.padded!, { temperature: this.config.loss.temperature, save: true }));
    await rec.finish();
    this.policyScores = s;
    const [lp, ent] = await Promise.all([f32(this.gpu, s.per_token_logps, this.n), f32(this.gpu, s.per_token_entropy, this.n)]);
    return { per_token_logps: lp, per_token_entropy: ent };
  }

  private async referenceForward(): Promise<{ data: StageData['reference_forward'] } | { skipped: string }> {
    const ref = this.opts.reference;
    if (!ref) {
      if (this.beta === 0) return { skipped: 'β = 0: no reference model is loaded (as TRL)' };
      // The frozen copy has the policy's weights as they are before this step: its log-probs are the policy forward's.
      this.refLogps = this.policyScores!.per_token_logps;
      return { data: { ref_per_token_logps: this.need('policy_forward').per_token_logps, reference: 'frozen-copy' } };
    }
    const rec = this.gpu.recorder('reference_forward');
    const s = this.own(score_completions(rec, ref, this.padded!, { temperature: this.config.loss.temperature }));
    await rec.finish();
    this.refLogps = s.per_token_logps;
    return { data: { ref_per_token_logps: await f32(this.gpu, s.per_token_logps, this.n), reference: 'model' } };
  }

  /** Per-token KL, loss and every aggregation, and dlogits of the chosen one written over the logits (no second (rows, V) buffer). */
  private async loss(): Promise<StageData['loss']> {
    const p = this.padded!;
    const s = this.policyScores!;
    const rec = this.gpu.recorder('loss');
    const res = this.own(
      await grpo_loss(
        this.gpu,
        {
          B: p.B, T: p.C, V: this.opts.policy.config.vocab_size, logits: s.logits,
          completion_ids: s.completion_ids, completion_mask: s.completion_mask, advantages: this.gpuIn!.advantages,
          old_per_token_logps: this.gpuIn!.old, ref_per_token_logps: this.refLogps,
        },
        this.config.loss,
        { rec, dlogits: 'in-place', scoreMaskedRows: true },
      ),
    );
    await rec.finish();
    this.lossRes = res;
    const r = await readGrpoLoss(this.gpu, res);
    const cfg = this.config.loss;
    const weight = loss_weights(p.completion_mask, p.B, p.C, cfg.loss_type, cfg);
    let kl_term = 0;
    let klSum = 0;
    let tokens = 0;
    for (let i = 0; i < this.n; i++) {
      if (!p.completion_mask[i]) continue;
      tokens++;
      klSum += r.per_token_kl?.[i] ?? 0;
      if (cfg.beta !== 0) kl_term += weight[i] * cfg.beta * r.per_token_kl![i];
    }
    return {
      old_per_token_logps: p.old_per_token_logps ?? this.need('policy_forward').per_token_logps,
      importance_ratio: r.importance_ratio,
      per_token_kl: r.per_token_kl,
      per_token_loss: r.per_token_loss,
      token_weight: Float32Array.from(weight),
      clip: r.clip,
      loss: r.loss,
      losses: r.losses,
      policy_term: r.loss - kl_term,
      kl_term,
      mean_kl: r.per_token_kl ? klSum / Math.max(1, tokens) : NaN,
      clip_counts: r.clip_counts,
    };
  }

  private async backward(): Promise<StageData['backward']> {
    const policy = this.opts.policy;
    const rec = this.gpu.recorder('backward');
    policy.backward(rec, this.lossRes!.dlogits!);
    await rec.finish();
    // Under a LoRA adapter only A and B train: the norms and the step see the adapter alone (TRL + PEFT).
    this.optimizer ??= new Optimizer(this.gpu, policy.trainableParams.values(), this.config.optimizer);
    return this.optimizer.gradNorms(policy.trainableGrads!);
  }

  private async step(): Promise<StageData['step']> {
    const policy = this.opts.policy;
    if (this.opts.undo && !this.snapshot) {
      const rec = this.gpu.recorder('snapshot');
      this.snapshot = new Map();
      for (const [name, p] of policy.trainableParams) {
        const b = this.gpu.createBuffer(`snapshot.${name}`, p.buffer.size);
        rec.copy(p.buffer, 0, b, 0, p.buffer.size);
        this.snapshot.set(name, b);
      }
      await rec.submit();
    } else if (!this.opts.undo) {
      this.stepped = true;
    }
    const clip_coef = clipCoefFor(this.need('backward'), this.config.max_grad_norm);
    const u = await this.optimizer!.step(policy.trainableGrads!, clip_coef);
    return { optimizer: this.config.optimizer, ...u };
  }

  /** The same batch through the updated policy: log-probs after, their change, KL to the same reference, the loss again. */
  private async reEvaluate(): Promise<StageData['re_evaluate']> {
    const p = this.padded!;
    const gpu = this.gpu;
    const before = this.policyScores!;
    const rec = gpu.recorder('re_evaluate');
    // save: true keeps the one training workspace instead of allocating an inference one beside it.
    const s = this.own(score_completions(rec, this.opts.policy, p, { temperature: this.config.loss.temperature, save: true }));
    const res = this.own(
      await grpo_loss(
        gpu,
        {
          B: p.B, T: p.C, V: this.opts.policy.config.vocab_size, logits: s.logits,
          completion_ids: s.completion_ids, completion_mask: s.completion_mask, advantages: this.gpuIn!.advantages,
          old_per_token_logps: this.gpuIn!.old ?? before.per_token_logps, ref_per_token_logps: this.refLogps,
        },
        this.config.loss,
        { rec, backward: false, scoreMaskedRows: true },
      ),
    );
    await rec.finish();
    const r = await readGrpoLoss(gpu, res);
    const pre = this.need('policy_forward').per_token_logps;
    return {
      post_per_token_logps: r.per_token_logps,
      delta_per_token_logps: r.per_token_logps.map((x, i) => x - pre[i]),
      post_per_token_kl: r.per_token_kl,
      post_per_token_loss: r.per_token_loss,
      loss_after: r.loss,
      losses_after: r.losses,
    };
  }
}
