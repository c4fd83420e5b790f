// Undo for the optimizer step: the studio keeps stepping the same model (each update from the weights the
// last one stepped to, or from the loaded ones), so before an update's weight change it copies the
// trainable weights on the GPU and reset() copies them back: undo returns to the weights before that
// step. Without undo (the CLI) it only records that the weights changed, because a frozen-copy reference
// given as null (the policy itself before the step) is then no longer available.
import type { Gpu } from '../gpu/context.ts';
import type { CausalLM } from '../model/model.ts';

export class WeightUndo {
  private snapshot: Map<string, GPUBuffer> | null = null;
  /** The weights changed and no snapshot can restore them. */
  changed = false;

  constructor(
    private readonly gpu: Gpu,
    private readonly policy: CausalLM,
    private readonly keep: boolean,
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
  }

  /** Puts the weights back as they were before the step (if a snapshot was taken) and frees it. */
  async restore(): Promise<void> {
    if (!this.snapshot) return;
    const rec = this.gpu.recorder('undo step');
    for (const [name, buf] of this.snapshot) rec.copy(buf, 0, this.policy.trainableParams.get(name)!.buffer, 0, buf.size);
    await rec.submit();
    this.destroy();
  }

  destroy(): void {
    for (const b of this.snapshot?.values() ?? []) b.destroy();
    this.snapshot = null;
  }
}
