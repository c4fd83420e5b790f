// One GRPO update as a stage machine, UI-independent (the studio worker and the Node CLI run the same
// code). The stages (src/grpo/stages.ts) are functions of (context, state) in step_prepare.ts (render,
// sample, reward, advantages, assemble) and step_train.ts (the GPU stages); each returns its output,
// which the machine stores in the one StepState record the later stages read (src/grpo/step_types.ts).
// `next()` runs one stage and returns {id, ms, gpuBytes, peakBytes, data}; `runToEnd()`; `reset()` goes
// back to before the first stage (undoing the optimizer step when `undo` is set: step_undo.ts).
import { statsSince, type Gpu } from '../gpu/context.ts';
import { ModelLoadError } from '../model/config.ts';
import { STAGES, type StageId } from './stages.ts';
import type { StepConfig } from './step_config.ts';
import { advantages, assemble, render, reward, sample } from './step_prepare.ts';
import { backward, loss, policyForward, reEvaluate, referenceForward, step } from './step_train.ts';
import type { Skipped, StageContext, StageData, StageOutput, StageResult, StepPipelineOptions, StepState } from './step_types.ts';
import { WeightUndo } from './step_undo.ts';
import { widestCompletion } from '../io/batch.ts';

type StageFn<S extends StageId> = (ctx: StageContext, state: StepState) => Promise<StageOutput<S> | Skipped>;

const RUN: { [S in StageId]: StageFn<S> } = {
  render,
  sample,
  reward,
  advantages,
  assemble,
  policy_forward: policyForward,
  reference_forward: referenceForward,
  loss,
  backward,
  step,
  re_evaluate: reEvaluate,
};

export class StepPipeline {
  readonly gpu: Gpu;
  readonly results: StageResult[] = [];
  private readonly opts: StepPipelineOptions;
  private state: StepState = {};
  private owned: { destroy(): void }[] = [];
  private readonly ctx: StageContext;

  constructor(gpu: Gpu, opts: StepPipelineOptions) {
    this.gpu = gpu;
    this.opts = { ...opts }; // its own: `config` becomes the sampled width's (configForWidth)
    const { policy, reference } = opts;
    if (reference && reference.config.vocab_size !== policy.config.vocab_size) {
      throw new ModelLoadError(`the reference's vocabulary (${reference.config.vocab_size} tokens) differs from the policy's (${policy.config.vocab_size})`);
    }
    if (opts.optimizer && JSON.stringify(opts.optimizer.config) !== JSON.stringify(opts.config.optimizer)) {
      throw new Error(`the carried optimizer's settings ${JSON.stringify(opts.optimizer.config)} differ from this update's ${JSON.stringify(opts.config.optimizer)}`);
    }
    this.ctx = {
      gpu,
      opts: this.opts,
      own: (x) => {
        this.owned.push(x);
        return x;
      },
      weights: new WeightUndo(gpu, policy, opts.undo ?? false, opts.optimizer ?? null),
    };
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
    return (this.state[id] as StageOutput<S> | undefined)?.data;
  }

  async next(): Promise<StageResult> {
    const id = this.nextStage;
    if (!id) throw new Error('the update is complete: reset() to run it again');
    const gpu = this.gpu;
    gpu.resetPeak();
    const t0 = performance.now();
    const s0 = { ...gpu.stats };
    const out = await (RUN[id] as StageFn<StageId>)(this.ctx, this.state);
    const ms = performance.now() - t0;
    const skipped = 'skipped' in out ? out.skipped : undefined;
    if (!('skipped' in out)) (this.state as Record<StageId, StageOutput<StageId>>)[id] = out;
    if (id === 'sample' && !('skipped' in out) && this.opts.configForWidth) this.opts.config = this.opts.configForWidth(widestCompletion((out.data as StageData['sample'])));
    const result: StageResult = { id, ms, gpuBytes: gpu.allocatedBytes, peakBytes: gpu.peakBytes, gpuStats: statsSince(gpu.stats, s0), data: 'skipped' in out ? null : out.data, skipped };
    this.results.push(result);
    return result;
  }

  async runToEnd(): Promise<StageResult[]> {
    while (!this.done) await this.next();
    return this.results;
  }

  /**
   * The before/after check: the same prompts with the same generation settings and seed, sampled from the
   * weights as they are now (after the optimizer step) and scored with the same rewards. The update's own
   * state is left as it was.
   */
  async resample(): Promise<{ sample: StageData['sample']; reward: StageData['reward'] }> {
    if (!this.state.step || !this.state.render) throw new Error('the before/after check needs an update from the prompt set that has taken its optimizer step');
    const s = await sample(this.ctx, this.state);
    if ('skipped' in s) throw new Error(s.skipped);
    const r = await reward(this.ctx, { ...this.state, sample: s });
    if ('skipped' in r) throw new Error(r.skipped);
    return { sample: s.data, reward: r.data };
  }

  /** Back to before the first stage: frees the update's buffers and optimizer state; restores the weights if `undo`. */
  async reset(): Promise<void> {
    await this.ctx.weights.restore();
    this.free();
    this.results.length = 0;
  }

  destroy(): void {
    this.ctx.weights.destroy();
    this.free();
  }

  private free(): void {
    for (const o of this.owned) o.destroy();
    this.owned = [];
    this.state = {};
  }
}
