// Per-kernel GPU time: where the GPU time of a step goes, kernel by kernel. A KernelProfiler attached to
// the Gpu (`gpu.profiler = new KernelProfiler(gpu)`; `gpu.profiler = null` detaches) makes EVERY recorder
// submit time each of its dispatches; a recorder's own `rec.profiler` overrides the Gpu's for that recorder
// only (bench/timing.ts times single kernels that way without touching other recorders).
//
// How: the recorder puts each dispatch in its own compute pass whose timestampWrites write the pass's begin
// and end at query indices 2i and 2i + 1 of a query set (a set holds at most 4096 queries in Dawn, so 2048
// dispatches; a LoRA backward records ~2,300 in one recorder, so a submit takes as many sets as it needs,
// `chunk` dispatches each). After the work, in the same command encoder, each set is resolved into a buffer
// and copied into a mappable one; once the submit is known valid the copy is mapped asynchronously and each
// dispatch's end − begin is added to its kernel's {calls, gpu ms} (the Dispatch's `kernel` string, with the
// shader names it ran). Sets and buffers go back to a pool when read, so a step reuses a handful of them.
// `settle()` awaits every read in flight; `take()` returns the totals and starts afresh (`peek()` keeps them),
// so a bench attributes time per stage by settling and taking after each.
//
// What it measures: the sum of dispatch begin→end, launch gaps excluded. A pass per dispatch changes the
// schedule slightly (no overlap between dispatches of one pass), so profile totals are near, not equal to,
// an unprofiled run's wall time. With no profiler attached a recorder pays one null check per submit.
// Times from a submit that failed (an invalid command: nothing ran) or a lost device are dropped, counted in
// `dropped`. Each kernel's declared work (Dispatch.work) is summed beside its time, so a bench can say what
// fraction of the probe it ran at. The layer rule holds: this file imports only stats.ts's types, and the
// recorder imports this file's.
import type { Work } from './stats.ts';

/** Queries a Dawn query set holds at most. */
export const MAX_QUERIES_PER_SET = 4096;

/** What the profiler needs of the GPU context (context.ts's Gpu). */
export interface ProfilerHost {
  readonly device: GPUDevice;
  readonly hasTimestamps: boolean;
}

/** One kernel's accumulated GPU time. */
export interface KernelTime {
  kernel: string;
  /** The shaders the kernel name ran (usually one; a launcher may pick among several). */
  shaders: string[];
  calls: number;
  gpuMs: number;
  /** The declared work of its timed calls (stats.ts Work, summed as GpuStats sums it): 0 where its launcher declares none. */
  flops: number;
  bytesMoved: number;
}

/** A query set with its resolve buffer and mappable copy; `n` dispatches of the current submit use it. */
interface Chunk {
  set: GPUQuerySet;
  resolve: GPUBuffer;
  readback: GPUBuffer;
  kernels: string[];
  shaders: string[];
  work: (Work | undefined)[];
}

/**
 * The timing of one submit, handed to the recorder by KernelProfiler.begin(): `next()` gives the timestamp
 * writes of each dispatch's pass, `resolve()` encodes the resolves after the work, `submitted()` reads them
 * back once the submit is known to be valid.
 */
export class SubmitTimer {
  private at = 0;

  constructor(
    private readonly profiler: KernelProfiler,
    private readonly chunks: Chunk[],
  ) {}

  /** The timestamp writes of the next dispatch's own pass. */
  next(kernel: string, shader: string, work?: Work): GPUComputePassTimestampWrites {
    const per = this.profiler.chunk;
    const c = this.chunks[Math.floor(this.at / per)];
    if (!c) throw new Error(`profiler: more dispatches than the ${this.chunks.length * per} the submit's query sets hold`);
    const i = this.at++ % per;
    c.kernels.push(kernel);
    c.shaders.push(shader);
    c.work.push(work);
    return { querySet: c.set, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** Resolves every used query into its chunk's buffer and copies it to the mappable one (after the work in `enc`). */
  resolve(enc: GPUCommandEncoder): void {
    for (const c of this.chunks) {
      const n = c.kernels.length;
      if (n === 0) continue;
      enc.resolveQuerySet(c.set, 0, 2 * n, c.resolve, 0);
      enc.copyBufferToBuffer(c.resolve, 0, c.readback, 0, 16 * n);
    }
  }

  /** Reads the times back once `checked` (the submit's error check) resolves; a failed submit drops them. */
  submitted(checked: Promise<unknown>): void {
    for (const c of this.chunks) this.profiler.read(c, checked);
  }
}

export class KernelProfiler {
  /** Dispatches per query set (2 queries each). */
  readonly chunk: number;
  /** Dispatches whose times were lost: their submit failed or the device was lost before the read. */
  dropped = 0;
  private readonly device: GPUDevice;
  private readonly totals = new Map<string, { calls: number; ns: number; shaders: Set<string>; flops: number; bytesMoved: number }>();
  private readonly pool: Chunk[] = [];
  private readonly pending = new Set<Promise<void>>();
  private created = 0;
  private destroyed = false;

  /**
   * `chunk`: dispatches per query set (default and most MAX_QUERIES_PER_SET / 2; tests use a small one to
   * cross set boundaries cheaply). Throws if the adapter has no 'timestamp-query' feature.
   */
  constructor(host: ProfilerHost, opts: { chunk?: number } = {}) {
    if (!host.hasTimestamps) throw new Error("KernelProfiler: this adapter has no 'timestamp-query' feature, so GPU time per kernel cannot be measured");
    const chunk = opts.chunk ?? MAX_QUERIES_PER_SET / 2;
    if (!Number.isInteger(chunk) || chunk < 1 || 2 * chunk > MAX_QUERIES_PER_SET) throw new RangeError(`KernelProfiler: chunk must be an integer in [1, ${MAX_QUERIES_PER_SET / 2}], got ${chunk}`);
    this.device = host.device;
    this.chunk = chunk;
  }

  /** Query sets created so far (each with its two buffers): the pool's size once the reads settle. */
  get querySets(): number {
    return this.created;
  }

  /**
   * The timer of a submit of `dispatches` dispatches. Called by the recorder before its error scopes, so a
   * failing query-set allocation is not charged to its kernels.
   */
  begin(label: string, dispatches: number): SubmitTimer {
    if (this.destroyed) throw new Error(`KernelProfiler: destroyed; detach it before recording "${label}"`);
    const chunks: Chunk[] = [];
    for (let k = 0; k * this.chunk < dispatches; k++) chunks.push(this.pool.pop() ?? this.create(label));
    return new SubmitTimer(this, chunks);
  }

  private create(label: string): Chunk {
    this.created++;
    const bytes = 16 * this.chunk; // 2 queries × 8 bytes per dispatch
    // Created through the device, not Gpu.createBuffer: the profiler's buffers stay out of the memory figures it sits beside.
    return {
      set: this.device.createQuerySet({ label: `profiler ${label}`, type: 'timestamp', count: 2 * this.chunk }),
      resolve: this.device.createBuffer({ label: 'profiler resolve', size: bytes, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
      readback: this.device.createBuffer({ label: 'profiler readback', size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
      kernels: [],
      shaders: [],
      work: [],
    };
  }

  /** (SubmitTimer's) Maps a chunk's copy after its submit checked out, adds its times, and returns it to the pool. */
  read(c: Chunk, checked: Promise<unknown>): void {
    const n = c.kernels.length;
    if (n === 0) {
      if (this.destroyed) free(c);
      else this.pool.push(c);
      return;
    }
    let mapped = false;
    const p = checked
      .then(() => c.readback.mapAsync(GPUMapMode.READ, 0, 16 * n))
      .then(() => {
        mapped = true;
        const ts = new BigUint64Array(c.readback.getMappedRange(0, 16 * n));
        for (let i = 0; i < n; i++) {
          // A begin after its end is no time spent (timestamps of some drivers are not monotonic across passes).
          const ns = ts[2 * i + 1] > ts[2 * i] ? Number(ts[2 * i + 1] - ts[2 * i]) : 0;
          this.add(c.kernels[i], c.shaders[i], ns, c.work[i]);
        }
      })
      .catch(() => {
        this.dropped += n;
      })
      .finally(() => {
        if (mapped) c.readback.unmap();
        c.kernels.length = 0;
        c.shaders.length = 0;
        c.work.length = 0;
        this.pending.delete(p);
        if (this.destroyed) free(c); // a read that landed after destroy(): nothing will reuse its chunk
        else this.pool.push(c);
      });
    this.pending.add(p);
  }

  private add(kernel: string, shader: string, ns: number, work: Work | undefined): void {
    let t = this.totals.get(kernel);
    if (!t) this.totals.set(kernel, (t = { calls: 0, ns: 0, shaders: new Set(), flops: 0, bytesMoved: 0 }));
    t.calls++;
    t.ns += ns;
    t.shaders.add(shader);
    t.flops += work?.flops ?? 0;
    t.bytesMoved += work?.bytes ?? 0;
  }

  /** Resolves when every read in flight has been added (never rejects: lost times count in `dropped`). */
  async settle(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  /** The totals so far, most GPU time first (reads still in flight are not in them: settle() first). */
  peek(): KernelTime[] {
    return [...this.totals]
      .map(([kernel, t]) => ({ kernel, shaders: [...t.shaders], calls: t.calls, gpuMs: t.ns / 1e6, flops: t.flops, bytesMoved: t.bytesMoved }))
      .sort((a, b) => b.gpuMs - a.gpuMs || a.kernel.localeCompare(b.kernel));
  }

  /** peek(), then reset(): the time since the last take. */
  take(): KernelTime[] {
    const out = this.peek();
    this.reset();
    return out;
  }

  /** Forgets the totals (reads in flight still land, in the next take). */
  reset(): void {
    this.totals.clear();
    this.dropped = 0;
  }

  /**
   * Frees the pooled query sets and buffers (call after detaching; chunks whose reads are still in flight are
   * freed when they land); a later begin() throws.
   */
  destroy(): void {
    this.destroyed = true;
    for (const c of this.pool.splice(0)) free(c);
  }
}

function free(c: Chunk): void {
  c.set.destroy();
  c.resolve.destroy();
  c.readback.destroy();
}
