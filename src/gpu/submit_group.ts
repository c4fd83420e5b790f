// Several independent computations recorded into ONE recorder, submitted once and read back in ONE round
// trip. The loss table needs it: every loss type of a trainer on the same log-probs (TRL 8 columns, verl
// 32, OpenRLHF 2) is a few dispatches and a readback each, and was a submit and a round trip per column.
// The columns are independent async computations (a trainer module decides on the CPU between its kernels),
// so the group is a barrier: each participant takes a seat, records into its `recorder` and then awaits
// `read(parts)` once; a seat released without reading (a setting refused before any recording) counts as
// arrived. When every seat has read or been released, the group submits what was recorded and reads every
// part in one readAll. A group of one (`SubmitGroup.single`) is a plain submit + readAll, so a lone
// objective and a table column run the same code.
//
// A participant that records and then fails leaves its dispatches in the shared submit: it must free its
// buffers with Gpu.retire (destroyed once the open recorders have submitted), never destroy(), or the
// submit fails for every seat ("used in submit while destroyed"). The trainer modules retire theirs, and
// refuse settings before recording anyway.
import type { Gpu, Recorder } from './context.ts';

/** A buffer window to read back, as Gpu.readAll takes it. */
export interface ReadPart {
  buf: GPUBuffer;
  byteSize?: number;
  byteOffset?: number;
}

/** One participant's place in a group: it records into `recorder`, then reads once. */
export interface Seat {
  readonly recorder: Recorder;
  read(parts: ReadPart[]): Promise<ArrayBuffer[]>;
}

export class SubmitGroup {
  readonly recorder: Recorder;
  private open: number;
  private seats = 0;
  private readonly waiting: { parts: ReadPart[]; resolve: (b: ArrayBuffer[]) => void; reject: (e: unknown) => void }[] = [];

  constructor(
    private readonly gpu: Gpu,
    label: string,
    private readonly participants: number,
  ) {
    if (!Number.isInteger(participants) || participants < 1) throw new RangeError(`SubmitGroup ${label}: participants must be a positive integer, got ${participants}`);
    this.recorder = gpu.recorder(label);
    this.open = participants;
  }

  /** The one seat of a group of one: record, then read (one submit, one round trip). */
  static single(gpu: Gpu, label: string): Seat {
    return new SubmitGroup(gpu, label, 1).seat();
  }

  /**
   * A participant's seat. `read` resolves with its parts once every seat has read or been released and the
   * group's one submit and readback are done; `release` (call it when the participant ends, however it ends)
   * counts a seat that never read as arrived.
   */
  seat(): Seat & { release(): void } {
    if (++this.seats > this.participants) throw new Error(`SubmitGroup: more seats than its ${this.participants} participants`);
    let arrived = false;
    const arrive = () => {
      arrived = true;
      if (--this.open === 0) void this.flush();
    };
    return {
      recorder: this.recorder,
      read: (parts) => {
        if (arrived) throw new Error('SubmitGroup: a seat reads once');
        const got = new Promise<ArrayBuffer[]>((resolve, reject) => this.waiting.push({ parts, resolve, reject }));
        arrive();
        return got;
      },
      release: () => {
        if (!arrived) arrive();
      },
    };
  }

  private async flush(): Promise<void> {
    const waiting = this.waiting.splice(0);
    try {
      await this.recorder.submit();
      const all = await this.gpu.readAll(waiting.flatMap((w) => w.parts));
      let k = 0;
      for (const w of waiting) {
        w.resolve(all.slice(k, k + w.parts.length));
        k += w.parts.length;
      }
    } catch (e) {
      // Every reader gets the error. With none (every seat released), no result depended on the work.
      for (const w of waiting) w.reject(e);
    }
  }
}
