// Undo for the optimizer step: the studio keeps stepping the same model (each update from the weights the
// last one stepped to, or from the loaded ones), so before an update's weight change it copies the
// trainable weights on the GPU and reset() copies them back: undo returns to the weights before that
// step. Without undo (the CLI) it only records that the weights changed, because a frozen-copy reference
// given as null (the policy itself before the step) is then no longer available.
// An optimizer carried over from earlier updates (StepPipelineOptions.optimizer) has its moments and step
// count saved and restored with the weights, so the update after an undo steps exactly as before.
import type { Gpu } from '../gpu/context.ts';
import type { CausalLM } from '../model/model.ts';
import type { Optimizer, OptimizerState } from './optimizer.ts';

export class WeightUndo {
  private snapshot: Map<string, GPUBuffer> | null = null;
  private optimizerState: OptimizerState | null = null;
  /** The weights changed and no snapshot can restore them. */
  changed = false;

  constructor(
    private readonly gpu: Gpu,
    private readonly policy: CausalLM,
    private readonly keep: boolean,
    private readonly optimizer: Optimizer | null = null,
  ) {}

  /** Call before the weights change. */
  async beforeStep(): Promise<void> {
    if (!this.keep) {
      this.changed = true;
      return;
    }
    if (this.snapshot) return;
    const rec = this.gpu.recorder('snapshot');
    this.snapshot = new Map();
    for (const [name, p] of this.policy.trainableParams) {
      const b = this.gpu.createBuffer(`snapshot.${name}`, p.buffer.size);
      rec.copy(p.buffer, 0, b, 0, p.buffer.size);
      this.snapshot.set(name, b);
    }
    await rec.submit();
    this.optimizerState = (await this.optimizer?.saveState()) ?? null;
  }

  /** Puts the weights (and a carried optimizer's state) back as they were before the step, if a snapshot was taken, and frees it. */
  async restore(): Promise<void> {
    if (!this.snapshot) return;
    const rec = this.gpu.recorder('undo step');
    for (const [name, buf] of this.snapshot) rec.copy(buf, 0, this.policy.trainableParams.get(name)!.buffer, 0, buf.size);
    await rec.submit();
    if (this.optimizerState) this.optimizer!.restoreState(this.optimizerState);
    this.optimizerState = null;
    this.destroy();
  }

  destroy(): void {
    for (const b of this.snapshot?.values() ?? []) b.destroy();
    this.snapshot = null;
    for (const bufs of this.optimizerState?.state.values() ?? []) for (const b of bufs) b.destroy();
    this.optimizerState = null;
  }
}
