// Command recording: dispatches, copies and clears accumulate and go out in one submit (a streaming
// recorder: in pieces while it records, so the GPU starts on a long forward before its last layer is
// recorded), consecutive dispatches in one compute pass, with the params of every dispatch in shared
// uniform pages bound by dynamic offset. It knows the GPU context only through RecorderHost (context.ts's Gpu), so the two
// modules do not import each other; `Recorder` (context.ts) is GpuRecorder<Gpu>. A dispatch names its
// buffers and params words as the shader does; the shader's interface orders them when the pipeline is
// built, and a name that does not match refuses the dispatch (layout.ts bindByName). With a KernelProfiler
// attached (the Gpu's, or the recorder's own: profiler.ts) each dispatch runs in its own timed pass.
import type { CachedPipeline, Constants, Journal, PipelineCache } from './cache.ts';
import { GpuError } from './errors.ts';
import { bindByName, type ParamWord } from './layout.ts';
import type { KernelProfiler, SubmitTimer } from './profiler.ts';
import type { GpuStats, Work } from './stats.ts';

/** Bytes of one params page: the packed params of up to PARAMS_PAGE / 256 dispatches of one recorder. */
export const PARAMS_PAGE = 64 * 1024;

/**
 * Dispatches a streaming recorder collects before it sends them (RecorderOptions.stream): STREAM_FIRST in its
 * first piece, twice as many in each next one, up to STREAM_DISPATCHES. The small first piece starts the GPU
 * after little recording; the later, bigger ones keep the number of submits low once the GPU is busy.
 */
export const STREAM_FIRST = 16;
export const STREAM_DISPATCHES = 128;

export interface RecorderOptions {
  /**
   * Send the commands to the GPU in pieces (STREAM_FIRST doubling to STREAM_DISPATCHES dispatches) as they are recorded, so the GPU
   * runs the first layers while the CPU still records and encodes the last (a model's forward or backward:
   * thousands of dispatches whose CPU cost would otherwise come before any GPU work). Only for work whose
   * partial execution leaves nothing in use (activations, gradients zeroed by the next backward; never an
   * optimizer step): a failed piece runs nothing, but the pieces before and after it run (its error is
   * known only later, and submit() reports it as before), and a recorder abandoned while recording has run
   * the pieces it sent. A buffer destroyed after it was recorded is caught only while its piece is unsent.
   */
  stream?: boolean;
}

/** A binding: a whole buffer, or a [offset, size) byte window of one (for splits past the binding limit). */
export type Binding = GPUBuffer | { buffer: GPUBuffer; offset?: number; size?: number };

/** What a recorder needs of the GPU context. */
export interface RecorderHost {
  readonly device: GPUDevice;
  readonly limits: GPUSupportedLimits;
  readonly stats: GpuStats;
  readonly cache: PipelineCache;
  readonly lost: Promise<GPUDeviceLostInfo>;
  readonly lostReason: string | null;
  /** When set, every recorder's submit times each dispatch into it (profiler.ts). */
  readonly profiler: KernelProfiler | null;
  createBuffer(label: string, byteSize: number): GPUBuffer;
  paramsPage(k: number): GPUBuffer;
  scoped<T>(kernel: string, fn: () => T): Promise<T>;
  recorderClosed(rec: object): void;
}

/** One dispatch's worth of arguments. */
export interface Dispatch {
  kernel: string; // shown in errors and timings
  shader: string;
  constants?: Constants;
  entryPoint?: string;
  /** The storage buffers by the names of the shader's variables (the entry point's, every one of them). */
  bindings: Record<string, Binding>;
  workgroups: [number, number?, number?];
  /** The params uniform's fields as the shader's struct names them, in its order, if the shader takes one. */
  params?: ParamWord[];
  /** What the dispatch computes and moves, where its launcher declares it (stats, profiler: the bench's fractions of the probe). */
  work?: Work;
}

/** A recorded command; encoded at submit (and again, alone, when a failed submit is diagnosed). */
type Op =
  | { kind: 'dispatch'; d: Dispatch; resources: Record<string, GPUBufferBinding>; slot: number; paramsSize: number }
  | { kind: 'copy'; src: GPUBuffer; srcOffset: number; dst: GPUBuffer; dstOffset: number; size: number }
  | { kind: 'clear'; buf: GPUBuffer; offset: number; size?: number };

const opName = (op: Op) => (op.kind === 'dispatch' ? op.d.kernel : op.kind === 'copy' ? `copy ${op.src.label} → ${op.dst.label}` : `clear ${op.buf.label}`);

/**
 * Records dispatches, copies and clears, and sends them in one submit (a streaming recorder: in pieces, each
 * sent by dispatch() once it is full, the rest by submit()). Consecutive dispatches share one compute pass
 * (WebGPU orders each dispatch's storage writes before the next one's reads within a pass), and send() is the
 * only place commands are encoded, under ONE set of error scopes per submit pushed and popped synchronously
 * around encode + submit (error scopes are a stack: an await inside would let another recorder's errors land
 * in ours).
 *
 * Naming the failing kernel: one scope cannot say which command raised its error, so when it caught one,
 * submit() drops the pipelines and bind groups this submit created from the caches and re-encodes the
 * commands one by one, each into its own throw-away encoder under its own scopes, never submitted. The
 * first command whose encoding errs is the culprit, and its GpuError names it. Encoding is deterministic
 * (same buffers, layouts and pipelines), so the re-run reproduces every encoding-time error; an error the
 * re-run does not reproduce (e.g. a buffer destroyed before submit, checked only by queue.submit) is
 * reported under the recorder's label. submit() awaits every piece's check and diagnoses the whole recording. An invalid command buffer runs nothing, so a failed submit never
 * leaves half its work done (a streaming recorder's other pieces run: RecorderOptions.stream). The cost is
 * paid only on failure.
 *
 * Params: each dispatch's packed params take a 256-byte-aligned slot of the shared params pages (Gpu),
 * each piece's slots written just before its submit; the uniform is bound as a window of the page with a dynamic offset, so the bind
 * group is keyed only on the storage windows and is hit again on the next step.
 */
export class GpuRecorder<G extends RecorderHost> {
  private readonly ops: Op[] = [];
  private readonly temps: GPUBuffer[] = [];
  /** Scratch allocations that failed (or may have: Dawn reports OOM asynchronously), checked at submit. */
  private readonly allocs: { buffer: GPUBuffer; label: string; bytes: number; error: Promise<GPUError | null> }[] = [];
  private params = new Uint8Array(0);
  private paramsView = new DataView(this.params.buffer);
  private paramsBytes = 0;
  private readonly label: string;
  private readonly stream: boolean;
  private closed = false;
  /** Ops, params bytes and dispatches already sent (a streaming recorder's earlier pieces). */
  private sent = { ops: 0, params: 0, dispatches: 0 };
  /** Each piece's error check (settled: the error or null) and the cache entries its encoding created. */
  private readonly pieces: { check: Promise<unknown>; journal: Journal }[] = [];
  readonly kernels: string[] = [];
  /** Times this recorder's dispatches into this profiler instead of the Gpu's (bench/timing.ts); null: the Gpu's, if any. */
  profiler: KernelProfiler | null = null;

  constructor(
    readonly gpu: G,
    label: string,
    opts: RecorderOptions = {},
  ) {
    this.label = label;
    this.stream = opts.stream ?? false;
  }

  dispatch(d: Dispatch): void {
    const t0 = performance.now();
    this.kernels.push(d.kernel);
    const resources: Record<string, GPUBufferBinding> = {};
    for (const name in d.bindings) {
      if (!Object.hasOwn(d.bindings, name)) continue;
      const b = d.bindings[name];
      resources[name] = 'buffer' in b ? { buffer: b.buffer, offset: b.offset ?? 0, size: b.size } : { buffer: b };
    }
    const paramsSize = d.params ? Math.max(16, Math.ceil((d.params.length * 4) / 16) * 16) : 0;
    const slot = d.params ? this.addParams(d.params, paramsSize) : -1;
    this.ops.push({ kind: 'dispatch', d, resources, slot, paramsSize });
    const stats = this.gpu.stats;
    if (d.work) {
      stats.flops += d.work.flops ?? 0;
      stats.bytesMoved += d.work.bytes ?? 0;
    }
    stats.encodeMs += performance.now() - t0;
    if (this.stream && this.kernels.length - this.sent.dispatches >= Math.min(STREAM_DISPATCHES, STREAM_FIRST * 2 ** this.pieces.length)) this.send();
  }

  /**
   * The pipeline of a recorded dispatch and its storage buffers in binding order, the names checked
   * against the shader (bindByName). A mismatch is a GpuError naming the kernel and the shader file;
   * thrown while encoding, it fails the submit like any invalid command, and the diagnosis names it.
   */
  private bind(op: Extract<Op, { kind: 'dispatch' }>): { p: CachedPipeline; storage: GPUBufferBinding[] } {
    const { d } = op;
    const where = `shaders/${d.shader}.wgsl (entry point ${d.entryPoint ?? 'main'})`;
    try {
      const p = this.gpu.cache.pipeline(d.shader, d.constants, d.entryPoint);
      return { p, storage: bindByName(p.iface, op.resources, d.params) };
    } catch (e) {
      throw new GpuError('validation', d.kernel, `${where}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /**
   * Packs params words into the next aligned slot that does not straddle a page, as a uniform struct of 4-byte
   * scalars padded to `size` (16-byte multiples: uniform layout; the padding stays zero, as slots are written
   * once); returns the slot's byte offset.
   */
  private addParams(words: ParamWord[], size: number): number {
    const align = this.gpu.limits.minUniformBufferOffsetAlignment;
    let at = Math.ceil(this.paramsBytes / align) * align;
    if (Math.floor(at / PARAMS_PAGE) !== Math.floor((at + size - 1) / PARAMS_PAGE)) at = Math.ceil(at / PARAMS_PAGE) * PARAMS_PAGE;
    if (at + size > this.params.byteLength) {
      const grown = new Uint8Array(Math.max(PARAMS_PAGE, 2 * this.params.byteLength, at + size));
      grown.set(this.params);
      this.params = grown;
      this.paramsView = new DataView(grown.buffer);
    }
    const dv = this.paramsView;
    for (let i = 0; i < words.length; i++) {
      if (!words[i]) continue; // a hole: refused, naming it, when the dispatch is bound (layout.ts bindByName)
      const [, t, v] = words[i];
      if (t === 'f32') dv.setFloat32(at + 4 * i, v, true);
      else if (t === 'i32') dv.setInt32(at + 4 * i, v, true);
      else dv.setUint32(at + 4 * i, v >>> 0, true);
    }
    this.paramsBytes = at + size;
    return at;
  }

  /**
   * A storage buffer for intermediates (reduction partials) that is destroyed once this recorder's work
   * is submitted. An allocation that fails does not throw here: submit() reports it, naming the first
   * kernel that binds it, after releasing everything this recorder holds.
   */
  scratch(label: string, byteSize: number): GPUBuffer {
    const gpu = this.gpu;
    const bytes = Math.max(16, Math.ceil(byteSize / 4) * 4);
    gpu.device.pushErrorScope('out-of-memory');
    gpu.device.pushErrorScope('validation');
    let buf: GPUBuffer;
    let tooBig: GPUError | null = null;
    try {
      buf = gpu.createBuffer(label, byteSize);
    } catch (e) {
      tooBig = new GPUOutOfMemoryError(e instanceof Error ? e.message : String(e));
      buf = gpu.createBuffer(`${label} (not allocated)`, 16);
    }
    const [val, oom] = [gpu.device.popErrorScope(), gpu.device.popErrorScope()];
    this.allocs.push({ buffer: buf, label, bytes, error: Promise.all([val, oom]).then(([v, o]) => tooBig ?? o ?? v) });
    this.temps.push(buf);
    return buf;
  }

  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.ops.push({ kind: 'copy', src, srcOffset, dst, dstOffset, size });
  }

  clear(buf: GPUBuffer, offset = 0, size?: number): void {
    this.ops.push({ kind: 'clear', buf, offset, size });
  }

  /** Encodes `ops` into `enc`: consecutive dispatches in one compute pass (each in its own, timed, with a `timer`). */
  private encode(enc: GPUCommandEncoder, ops: Op[], timer: SubmitTimer | null = null): void {
    const gpu = this.gpu;
    let pass: GPUComputePassEncoder | null = null;
    const end = () => {
      pass?.end();
      pass = null;
    };
    for (const op of ops) {
      if (op.kind !== 'dispatch') {
        end();
        if (op.kind === 'copy') enc.copyBufferToBuffer(op.src, op.srcOffset, op.dst, op.dstOffset, op.size);
        else enc.clearBuffer(op.buf, op.offset, op.size);
        continue;
      }
      const { d, slot } = op;
      const { p, storage } = this.bind(op);
      const resources = slot < 0 ? storage : [...storage, { buffer: gpu.paramsPage(Math.floor(slot / PARAMS_PAGE)), offset: 0, size: op.paramsSize }];
      const bindGroup = gpu.cache.bindGroup(d.kernel, p.layout, resources);
      if (timer) end();
      if (!pass) {
        const timestampWrites = timer?.next(d.kernel, d.shader, d.work);
        // A pass of one dispatch (timing, diagnosis) carries its kernel's name into the driver's messages.
        pass = enc.beginComputePass({ label: timer || ops.length === 1 ? d.kernel : this.label, timestampWrites });
        gpu.stats.computePasses++;
      }
      pass.setPipeline(p.pipeline);
      pass.setBindGroup(0, bindGroup, slot < 0 ? [] : [slot % PARAMS_PAGE]);
      const [x, y = 1, z = 1] = d.workgroups;
      pass.dispatchWorkgroups(x, y, z);
      gpu.stats.dispatches++;
    }
    end();
  }

  /** Destroys the scratch buffers (the params pages are shared and stay). */
  private release(): void {
    for (const t of this.temps.splice(0)) t.destroy();
    if (!this.closed) this.gpu.recorderClosed(this);
    this.closed = true;
  }

  /**
   * Encodes and submits the ops recorded since the last piece, with their params, under one set of error
   * scopes (synchronous: see the class comment); the piece's check is kept, settled, for submit().
   */
  private send(): void {
    const gpu = this.gpu;
    const t0 = performance.now();
    const ops = this.ops.slice(this.sent.ops);
    const [from, to] = [this.sent.params, this.paramsBytes];
    const journal = gpu.cache.beginJournal();
    let checked: Promise<void>;
    let timer: SubmitTimer | null = null;
    try {
      // Pages (and query sets) first: creating one inside the scopes below could only add its own error to ours.
      for (let k = Math.floor(from / PARAMS_PAGE); k * PARAMS_PAGE < to; k++) gpu.paramsPage(k);
      const profiler = this.profiler ?? gpu.profiler;
      if (profiler) timer = profiler.begin(this.label, this.kernels.length - this.sent.dispatches);
      checked = gpu.scoped(this.label, () => {
        const enc = gpu.device.createCommandEncoder({ label: this.label });
        this.encode(enc, ops, timer);
        timer?.resolve(enc);
        // This piece's slots only: the earlier pieces' are already in the queue (rewriting them would only upload them again).
        for (let k = Math.floor(from / PARAMS_PAGE); k * PARAMS_PAGE < to; k++) {
          const [a, b] = [Math.max(from, k * PARAMS_PAGE), Math.min(to, (k + 1) * PARAMS_PAGE)];
          if (b > a) gpu.device.queue.writeBuffer(gpu.paramsPage(k), a - k * PARAMS_PAGE, this.params, a, b - a);
        }
        gpu.device.queue.submit([enc.finish()]);
        gpu.stats.submits++;
      });
    } finally {
      gpu.cache.endJournal();
      gpu.stats.encodeMs += performance.now() - t0;
    }
    timer?.submitted(checked);
    this.pieces.push({ check: checked.then(() => null, (e: unknown) => e), journal });
    this.sent = { ops: this.ops.length, params: to, dispatches: this.kernels.length };
  }

  /** Submits everything recorded (what a streaming recorder has not sent yet); rejects with a GpuError naming the failing kernel if any command was invalid. */
  async submit(): Promise<void> {
    const gpu = this.gpu;
    if (gpu.lostReason) {
      this.release();
      throw new GpuError('device-lost', this.label, gpu.lostReason);
    }
    if (this.sent.ops < this.ops.length || this.pieces.length === 0) this.send();
    // The device's answers on the allocations and on each piece: time awaiting the GPU, as finish()'s.
    const t0 = performance.now();
    const allocErrors = await Promise.all(this.allocs.map((a) => a.error));
    const failure = (await Promise.all(this.pieces.map((p) => p.check))).find((e) => e !== null) ?? null;
    gpu.stats.waitMs += performance.now() - t0;
    this.release();
    const forget = () => this.pieces.forEach((p) => gpu.cache.forget(p.journal));
    const a = allocErrors.findIndex((e) => e !== null);
    if (a >= 0) {
      const { buffer, label, bytes } = this.allocs[a];
      const user = this.ops.find((op) => op.kind === 'dispatch' && Object.values(op.resources).some((r) => r.buffer === buffer));
      forget();
      throw new GpuError('out-of-memory', user ? opName(user) : label, `scratch "${label}" of ${bytes} bytes could not be allocated: ${allocErrors[a]!.message}`);
    }
    if (failure) {
      forget();
      throw failure instanceof GpuError ? await this.diagnose(failure) : failure;
    }
  }

  /** Re-encodes the commands one at a time (never submitted) to find the first that errs; see the class comment. */
  private async diagnose(err: GpuError): Promise<GpuError> {
    const gpu = this.gpu;
    const counted = { ...gpu.stats }; // the re-encode is no work done: keep it out of the counters
    const journal = gpu.cache.beginJournal();
    const checks: Promise<unknown>[] = [];
    try {
      for (const op of this.ops) {
        const check = gpu.scoped(opName(op), () => {
          const enc = gpu.device.createCommandEncoder({ label: opName(op) });
          this.encode(enc, [op]);
          enc.finish();
        });
        checks.push(check.then(() => null, (e: unknown) => e));
      }
    } finally {
      gpu.cache.endJournal();
      Object.assign(gpu.stats, counted);
    }
    const found = (await Promise.all(checks)).find((e) => e !== null);
    gpu.cache.forget(journal);
    if (found instanceof GpuError) return found;
    return new GpuError(err.kind, `${this.label} (submit)`, err.message);
  }

  /** Submits and waits until the GPU has finished the work (for timings and before reads). */
  async finish(): Promise<void> {
    await this.submit();
    const t0 = performance.now();
    try {
      await Promise.race([
        this.gpu.device.queue.onSubmittedWorkDone(),
        this.gpu.lost.then((info) => {
          throw new GpuError('device-lost', this.label, info.message || info.reason);
        }),
      ]);
    } finally {
      this.gpu.stats.waitMs += performance.now() - t0;
    }
  }
}

