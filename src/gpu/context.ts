// The one GPU context every kernel launcher, the model runtime and the step pipeline share.
// It owns the device, the adapter report, the pipeline cache (keyed by shader + entry point +
// override constants: pipelines are never created per dispatch), the bind-group cache, buffer helpers,
// pooled read-backs, and error scopes that turn WebGPU validation / out-of-memory errors into typed
// errors carrying the failing kernel's name (see Recorder for how one set of scopes per submit still
// names the kernel). It is created by `gpu/node.ts` (Dawn) or `gpu/browser.ts` (navigator.gpu): those
// differ only in where the adapter and the WGSL sources come from. `profiler` (profiler.ts), when set,
// makes every recorder time each of its dispatches per kernel.
import { PipelineCache, type ShaderSources } from './cache.ts';
import { GpuError, type GpuErrorKind } from './errors.ts';
import type { KernelProfiler } from './profiler.ts';
import { GpuRecorder, PARAMS_PAGE, type RecorderOptions } from './recorder.ts';
import { StagingPool } from './staging.ts';
import { zeroStats, type GpuStats } from './stats.ts';

export { GpuError, type GpuErrorKind } from './errors.ts';
export { statsSince, zeroStats, type GpuStats } from './stats.ts';
export type { Constants, ShaderSources } from './cache.ts';
export type { Binding, Dispatch } from './recorder.ts';
export type { ParamWord } from './layout.ts';
export { KernelProfiler, type KernelTime } from './profiler.ts';

/** Everything a user (or a bug report) needs to know about the adapter we are running on. */
export interface AdapterReport {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  backend: string; // "webgpu (browser)", "dawn-node vulkan", ...
  isFallback: boolean;
  features: string[];
  limits: Record<string, number>;
}

/**
 * The adapter's class, for the launchers that keep a kernel per class (GEMM, attention): a GPU, SwiftShader, or
 * another CPU adapter (lavapipe, a fallback adapter). On a CPU adapter an invocation is a coroutine, so
 * barriers are dear, and a subgroup is one SIMD register; SwiftShader is told apart because the kernels that
 * lead on lavapipe do not lead there (src/kernels/matmul.ts).
 */
export type AdapterClass = 'gpu' | 'swiftshader' | 'cpu';

export function adapterClass(a: AdapterReport): AdapterClass {
  // Read once per report: the launchers ask at every dispatch.
  let cls = classes.get(a);
  if (cls === undefined) {
    const text = `${a.vendor} ${a.architecture} ${a.device} ${a.description}`;
    cls = /swiftshader/i.test(text) ? 'swiftshader' : a.isFallback || a.architecture === 'software' || /llvmpipe|lavapipe/i.test(text) ? 'cpu' : 'gpu';
    classes.set(a, cls);
  }
  return cls;
}
const classes = new WeakMap<AdapterReport, AdapterClass>();

/** A CPU adapter: lavapipe, SwiftShader, a fallback adapter (adapterClass). */
export const isCpuAdapter = (a: AdapterReport): boolean => adapterClass(a) !== 'gpu';

/**
 * The most invocations a launcher gives a workgroup whose size it may choose. SwiftShader compiles a pipeline in
 * time that grows with its workgroup (loss_reduce_forward 1.3 s at 256 invocations, 0.07 s at 16; the row
 * attention 0.54 s at 64 rows, 0.09 s at 16) and runs those kernels no slower with 16: the page's first
 * update paid seconds of compilation. Elsewhere no cap.
 */
export function workgroupCap(a: AdapterReport): number {
  return adapterClass(a) === 'swiftshader' ? 16 : Infinity;
}

/** A command recorder of this GPU (recorder.ts); `rec.gpu` is the full Gpu. */
export type Recorder = GpuRecorder<Gpu>;

const MAX_WORKGROUPS_PER_DIM = 65535;

export class Gpu {
  readonly device: GPUDevice;
  readonly adapter: AdapterReport;
  readonly hasF16: boolean;
  readonly hasSubgroups: boolean;
  readonly hasTimestamps: boolean;
  /** Resolves (never rejects) when the device is lost; `lostReason` is set then. */
  readonly lost: Promise<GPUDeviceLostInfo>;
  lostReason: string | null = null;
  /** Running totals since the device was created; take differences with statsSince. */
  readonly stats: GpuStats = zeroStats();
  /** The last WebGPU error raised outside an error scope, if any. */
  uncaptured: string | null = null;
  /** Pipelines, layouts and bind groups, each created once. */
  readonly cache: PipelineCache;
  /**
   * Attach a KernelProfiler (`gpu.profiler = new KernelProfiler(gpu)`) and every recorder submit from then on
   * runs each dispatch in its own timed pass and adds its GPU time to the profiler, per kernel; null (the
   * default) detaches: the normal path.
   */
  profiler: KernelProfiler | null = null;
  private readonly zeroBuffers = new Map<number, GPUBuffer>();
  /**
   * Uniform pages the recorders write their dispatches' params into (page k serves slots k·PAGE.. of
   * every recorder). Sharing them is safe: a recorder writes its params and submits in one synchronous
   * step, and queue order makes a later recorder's write land after the earlier commands ran.
   */
  readonly paramsPages: GPUBuffer[] = [];
  readonly staging: StagingPool;
  constructor(device: GPUDevice, adapter: AdapterReport, sources: ShaderSources) {
    this.device = device;
    this.adapter = adapter;
    this.cache = new PipelineCache(device, sources, this.stats);
    this.hasF16 = device.features.has('shader-f16');
    this.hasSubgroups = device.features.has('subgroups');
    this.hasTimestamps = device.features.has('timestamp-query');
    this.staging = new StagingPool(device);
    // Errors outside any scope (e.g. a buffer allocation failing) must not vanish: keep the last one so
    // the next scoped call can report it, and log it.
    device.addEventListener('uncapturederror', (ev) => {
      const msg = (ev as GPUUncapturedErrorEvent).error.message;
      this.uncaptured = msg;
      console.error(`[webgpu] uncaptured error: ${msg}`);
    });
    this.lost = device.lost.then((info) => {
      this.lostReason = `${info.reason}: ${info.message}`;
      return info;
    });
  }

  get limits(): GPUSupportedLimits {
    return this.device.limits;
  }

  /** Throws a clear error if a required limit is below what a kernel needs (fail fast, named). */
  requireLimit(kernel: string, name: keyof GPUSupportedLimits, atLeast: number): void {
    const have = this.device.limits[name] as number;
    if (have < atLeast) {
      throw new GpuError('unsupported', kernel, `needs limit ${String(name)} >= ${atLeast}, adapter has ${have}`);
    }
  }

  // ---------------------------------------------------------------- buffers

  createBuffer(label: string, byteSize: number, usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST): GPUBuffer {
    // WebGPU needs sizes in multiples of 4; zero-sized bindings are invalid, so keep at least 16 bytes.
    const size = Math.max(16, Math.ceil(byteSize / 4) * 4);
    if (size > this.device.limits.maxBufferSize) {
      throw new GpuError('out-of-memory', label, `buffer of ${size} bytes exceeds maxBufferSize ${this.device.limits.maxBufferSize}`);
    }
    const buf = this.device.createBuffer({ label, size, usage });
    this.track(buf, size);
    return buf;
  }

  /** Bytes held by buffers from createBuffer that are not destroyed yet, and the most held since resetPeak(). */
  allocatedBytes = 0;
  peakBytes = 0;

  resetPeak(): void {
    this.peakBytes = this.allocatedBytes;
  }

  /** Counts a buffer's bytes until its (first) destroy(): the step pipeline reports memory per stage from this. */
  private track(buf: GPUBuffer, size: number): void {
    this.allocatedBytes += size;
    this.peakBytes = Math.max(this.peakBytes, this.allocatedBytes);
    const destroy = buf.destroy.bind(buf);
    let live = true;
    buf.destroy = () => {
      if (live) this.allocatedBytes -= size;
      live = false;
      destroy();
    };
  }

  /** Storage buffer initialised from a typed array (Float32Array, Int32Array, Uint32Array, Uint16Array). */
  upload(label: string, data: ArrayBufferView, usage?: GPUBufferUsageFlags): GPUBuffer {
    const buf = this.createBuffer(label, data.byteLength, usage);
    this.write(buf, data);
    return buf;
  }

  write(buf: GPUBuffer, data: ArrayBufferView, byteOffset = 0): void {
    // writeBuffer wants a byte length that is a multiple of 4.
    const len = data.byteLength;
    if (len % 4 === 0) {
      this.device.queue.writeBuffer(buf, byteOffset, data.buffer, data.byteOffset, len);
    } else {
      const padded = new Uint8Array(Math.ceil(len / 4) * 4);
      padded.set(new Uint8Array(data.buffer, data.byteOffset, len));
      this.device.queue.writeBuffer(buf, byteOffset, padded);
    }
  }

  /** Params page `k` (created on first use; never destroyed, so bind groups over it stay cached). */
  paramsPage(k: number): GPUBuffer {
    while (this.paramsPages.length <= k) this.paramsPages.push(this.createBuffer(`params page ${this.paramsPages.length}`, PARAMS_PAGE, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST));
    return this.paramsPages[k];
  }

  /** Reads `byteSize` bytes (default: whole buffer) back to the CPU, through a pooled staging buffer. */
  async read(buf: GPUBuffer, byteSize = buf.size, byteOffset = 0): Promise<ArrayBuffer> {
    return (await this.readAll([{ buf, byteSize, byteOffset }]))[0];
  }

  /**
   * Reads several buffer windows back with one copy submit and one map of one pooled staging buffer (a
   * stage's read-back is a handful of small per-token arrays: one round trip instead of one each).
   */
  async readAll(parts: { buf: GPUBuffer; byteSize?: number; byteOffset?: number }[]): Promise<ArrayBuffer[]> {
    const at: number[] = [];
    let total = 0;
    for (const p of parts) {
      at.push(total);
      total += Math.ceil((p.byteSize ?? p.buf.size) / 4) * 4;
    }
    const what = `read ${parts.map((p) => p.buf.label).join(', ')}`;
    if (total === 0) return parts.map(() => new ArrayBuffer(0));
    const staging = this.staging.acquire(total);
    let ok = false;
    try {
      await this.scoped(what, () => {
        const enc = this.device.createCommandEncoder({ label: 'readback' });
        parts.forEach((p, i) => {
          const size = Math.ceil((p.byteSize ?? p.buf.size) / 4) * 4;
          if (size > 0) enc.copyBufferToBuffer(p.buf, p.byteOffset ?? 0, staging, at[i], size);
        });
        this.device.queue.submit([enc.finish()]);
      });
      await this.checkedMap(staging, what, total);
      const mapped = staging.getMappedRange(0, total);
      const out = parts.map((p, i) => mapped.slice(at[i], at[i] + (p.byteSize ?? p.buf.size)));
      staging.unmap();
      this.stats.readbacks++;
      this.stats.bytesRead += parts.reduce((s, p) => s + (p.byteSize ?? p.buf.size), 0);
      ok = true;
      return out;
    } finally {
      this.staging.release(staging, ok);
    }
  }

  async readF32(buf: GPUBuffer, count?: number, elemOffset = 0): Promise<Float32Array> {
    const n = count ?? buf.size / 4 - elemOffset;
    return new Float32Array(await this.read(buf, n * 4, elemOffset * 4));
  }

  async readU32(buf: GPUBuffer, count?: number, elemOffset = 0): Promise<Uint32Array> {
    const n = count ?? buf.size / 4 - elemOffset;
    return new Uint32Array(await this.read(buf, n * 4, elemOffset * 4));
  }

  private async checkedMap(buf: GPUBuffer, what: string, size: number): Promise<void> {
    const lost = this.lost.then((info) => {
      throw new GpuError('device-lost', what, info.message || info.reason || 'device lost');
    });
    const t0 = performance.now();
    try {
      await Promise.race([buf.mapAsync(GPUMapMode.READ, 0, size), lost]);
    } finally {
      this.stats.waitMs += performance.now() - t0;
    }
  }

  /** A zero-filled storage buffer of at least `byteSize` bytes, shared by optional bindings. */
  zeros(byteSize: number): GPUBuffer {
    const size = Math.max(16, Math.ceil(byteSize / 16) * 16);
    let b = this.zeroBuffers.get(size);
    if (!b) {
      b = this.createBuffer(`zeros(${size})`, size);
      this.zeroBuffers.set(size, b);
    }
    return b;
  }

  // ---------------------------------------------------------------- recording

  /** Recorders created and not yet submitted (they may bind a buffer retire() was given). */
  private readonly open = new Set<object>();
  /** Retired buffers, each waiting for the recorders that were open when it was retired. */
  private readonly retired: { buf: GPUBuffer; waiting: Set<object> }[] = [];

  /** Starts a command recorder: dispatches accumulate and go out in one submit (in pieces as recorded, with `stream`). */
  recorder(label: string, opts: RecorderOptions = {}): Recorder {
    const rec = new GpuRecorder(this, label, opts);
    this.open.add(rec);
    return rec;
  }

  /** Recorders created and not yet submitted (they may bind a buffer given to retire()). */
  get openRecorderCount(): number {
    return this.open.size;
  }

  /** Called by a recorder once it has submitted (or failed to): buffers retired while it was open may go. */
  recorderClosed(rec: object): void {
    this.open.delete(rec);
    for (let i = this.retired.length - 1; i >= 0; i--) {
      const r = this.retired[i];
      r.waiting.delete(rec);
      if (r.waiting.size === 0) {
        r.buf.destroy();
        this.retired.splice(i, 1);
      }
    }
  }

  /**
   * Destroys a buffer no new work will use once every recorder open now has submitted: one of them may
   * have recorded a dispatch binding it (commands are encoded at submit). A recorder abandoned without
   * submit keeps what was retired while it was open. Already submitted work is unaffected: WebGPU frees
   * a destroyed buffer only after the queue is done with it.
   */
  retire(buf: GPUBuffer): void {
    if (this.open.size === 0) buf.destroy();
    else this.retired.push({ buf, waiting: new Set(this.open) });
  }

  /** Splits a 1-D count of workgroups into (x, y) within the per-dimension limit. */
  static grid(workgroups: number): [number, number] {
    if (workgroups <= MAX_WORKGROUPS_PER_DIM) return [Math.max(1, workgroups), 1];
    const y = Math.ceil(workgroups / MAX_WORKGROUPS_PER_DIM);
    return [Math.ceil(workgroups / y), y];
  }

  /**
   * Runs the synchronous `fn` inside validation + out-of-memory + internal error scopes; a captured error
   * becomes a GpuError naming `kernel`. The scopes are pushed and popped synchronously around `fn`:
   * error scopes are a stack, so an await in between would let another dispatch's scopes interleave and
   * misattribute its errors.
   */
  scoped<T>(kernel: string, fn: () => T): Promise<T> {
    if (this.lostReason) return Promise.reject(new GpuError('device-lost', kernel, this.lostReason));
    const d = this.device;
    d.pushErrorScope('internal');
    d.pushErrorScope('out-of-memory');
    d.pushErrorScope('validation');
    let result: T | undefined;
    let thrown: unknown = null;
    try {
      result = fn();
    } catch (e) {
      thrown = e;
    }
    const pops = [d.popErrorScope(), d.popErrorScope(), d.popErrorScope()];
    return Promise.all(pops).then(([val, oom, internal]) => {
      const err = val ?? oom ?? internal;
      if (err) {
        const kind: GpuErrorKind = err === oom ? 'out-of-memory' : err === internal ? 'internal' : 'validation';
        throw new GpuError(kind, kernel, err.message);
      }
      if (thrown) throw thrown;
      return result as T;
    });
  }
}
