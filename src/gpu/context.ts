// The one GPU context every kernel launcher, the model runtime and the step pipeline share.
// It owns the device, the adapter report, the pipeline cache (keyed by shader + entry point +
// override constants: pipelines are never created per dispatch), buffer helpers, and error scopes
// that turn WebGPU validation / out-of-memory errors into typed errors carrying the kernel's name.
// It is created by `gpu/node.ts` (Dawn) or `gpu/browser.ts` (navigator.gpu): those differ only in
// where the adapter and the WGSL sources come from.

export type ShaderSources = (name: string) => string;

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

export type GpuErrorKind = 'validation' | 'out-of-memory' | 'internal' | 'device-lost' | 'unsupported';

/** A GPU failure with the name of the kernel (or stage) that caused it. */
export class GpuError extends Error {
  constructor(
    readonly kind: GpuErrorKind,
    readonly kernel: string,
    message: string,
  ) {
    super(`[${kind}] ${kernel}: ${message}`);
    this.name = 'GpuError';
  }
}

export type Constants = Record<string, number | boolean>;

/** A binding: a whole buffer, or a [offset, size) byte window of one (for splits past the binding limit). */
export type Binding = GPUBuffer | { buffer: GPUBuffer; offset?: number; size?: number };

const MAX_WORKGROUPS_PER_DIM = 65535;
const BIND_GROUP_CACHE = 4096;

export class Gpu {
  readonly device: GPUDevice;
  readonly adapter: AdapterReport;
  readonly hasF16: boolean;
  readonly hasSubgroups: boolean;
  readonly hasTimestamps: boolean;
  /** Resolves (never rejects) when the device is lost; `lostReason` is set then. */
  readonly lost: Promise<GPUDeviceLostInfo>;
  lostReason: string | null = null;
  /** The last WebGPU error raised outside an error scope, if any. */
  uncaptured: string | null = null;

  private readonly sources: ShaderSources;
  private readonly modules = new Map<string, GPUShaderModule>();
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly zeroBuffers = new Map<number, GPUBuffer>();
  // Bind groups by pipeline + exact buffer windows: createBindGroup is the largest per-dispatch CPU cost
  // (10-25 µs on Dawn), and a step or decode loop binds the same buffers (params from the pool included)
  // every time. Buffer ids are never reused, so an entry of a destroyed buffer can never be hit again; the
  // cache is an LRU bounded at BIND_GROUP_CACHE entries.
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 1;
  /** Params buffers free for reuse, by size: their last recorder has been submitted (see Recorder.submit). */
  private readonly freeParams = new Map<number, GPUBuffer[]>();

  constructor(device: GPUDevice, adapter: AdapterReport, sources: ShaderSources) {
    this.device = device;
    this.adapter = adapter;
    this.sources = sources;
    this.hasF16 = device.features.has('shader-f16');
    this.hasSubgroups = device.features.has('subgroups');
    this.hasTimestamps = device.features.has('timestamp-query');
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

  // ---------------------------------------------------------------- pipelines

  private module(shader: string): GPUShaderModule {
    let m = this.modules.get(shader);
    if (!m) {
      m = this.device.createShaderModule({ label: shader, code: this.sources(shader) });
      this.modules.set(shader, m);
    }
    return m;
  }

  /** Cached compute pipeline for `shaders/<shader>.wgsl`, entry point and override constants. */
  pipeline(shader: string, constants: Constants = {}, entryPoint = 'main'): GPUComputePipeline {
    const keys = Object.keys(constants).sort();
    const key = `${shader}:${entryPoint}:${keys.map((k) => `${k}=${Number(constants[k])}`).join(',')}`;
    let p = this.pipelines.get(key);
    if (!p) {
      const c: Record<string, number> = {};
      for (const k of keys) c[k] = Number(constants[k]);
      p = this.device.createComputePipeline({
        label: key,
        layout: 'auto',
        compute: { module: this.module(shader), entryPoint, constants: c },
      });
      this.pipelines.set(key, p);
    }
    return p;
  }

  get pipelineCount(): number {
    return this.pipelines.size;
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

  /**
   * A uniform buffer holding a dispatch's packed params (u32/i32/f32 words), reused from a pool when one
   * of that size is free, so a step's thousands of dispatches do not each create and destroy a buffer.
   * Reuse is safe once the recorder that used it has been submitted: this writeBuffer is queued after
   * that submit, so the earlier commands still read the earlier values.
   */
  paramsBuffer(words: ArrayBuffer): GPUBuffer {
    const buf = this.freeParams.get(words.byteLength)?.pop() ?? this.createBuffer('params', words.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.device.queue.writeBuffer(buf, 0, words);
    return buf;
  }

  /** Returns params buffers to the pool (after the recorder that used them was submitted). */
  releaseParams(bufs: GPUBuffer[]): void {
    for (const b of bufs) {
      let free = this.freeParams.get(b.size);
      if (!free) this.freeParams.set(b.size, (free = []));
      free.push(b);
    }
  }

  /** Reads `byteSize` bytes (default: whole buffer) back to the CPU. */
  async read(buf: GPUBuffer, byteSize = buf.size, byteOffset = 0): Promise<ArrayBuffer> {
    const size = Math.ceil(byteSize / 4) * 4;
    const staging = this.device.createBuffer({ label: `${buf.label}:readback`, size, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
    const enc = this.device.createCommandEncoder({ label: 'readback' });
    enc.copyBufferToBuffer(buf, byteOffset, staging, 0, size);
    this.device.queue.submit([enc.finish()]);
    await this.checkedMap(staging, `read ${buf.label}`);
    const out = staging.getMappedRange().slice(0, byteSize);
    staging.unmap();
    staging.destroy();
    return out;
  }

  async readF32(buf: GPUBuffer, count?: number, elemOffset = 0): Promise<Float32Array> {
    const n = count ?? buf.size / 4 - elemOffset;
    return new Float32Array(await this.read(buf, n * 4, elemOffset * 4));
  }

  async readU32(buf: GPUBuffer, count?: number, elemOffset = 0): Promise<Uint32Array> {
    const n = count ?? buf.size / 4 - elemOffset;
    return new Uint32Array(await this.read(buf, n * 4, elemOffset * 4));
  }

  private async checkedMap(buf: GPUBuffer, what: string): Promise<void> {
    const lost = this.lost.then((info) => {
      throw new GpuError('device-lost', what, info.message || info.reason || 'device lost');
    });
    await Promise.race([buf.mapAsync(GPUMapMode.READ), lost]);
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

  /** A bind group for `pipeline` with these entries (@group(0), bindings in order), cached. */
  bindGroup(label: string, pipeline: GPUComputePipeline, resources: GPUBufferBinding[]): GPUBindGroup {
    const id = (b: GPUBuffer) => {
      let i = this.bufferIds.get(b);
      if (i === undefined) this.bufferIds.set(b, (i = this.nextBufferId++));
      return i;
    };
    const key = `${pipeline.label}|${resources.map((r) => `${id(r.buffer)}:${r.offset ?? 0}:${r.size ?? ''}`).join(',')}`;
    let bg = this.bindGroups.get(key);
    if (bg) {
      this.bindGroups.delete(key); // move to the LRU's young end
    } else {
      bg = this.device.createBindGroup({ label, layout: pipeline.getBindGroupLayout(0), entries: resources.map((resource, binding) => ({ binding, resource })) });
      if (this.bindGroups.size >= BIND_GROUP_CACHE) this.bindGroups.delete(this.bindGroups.keys().next().value as string);
    }
    this.bindGroups.set(key, bg);
    return bg;
  }

  // ---------------------------------------------------------------- recording

  /** Starts a command recorder: dispatches accumulate in one encoder and go out in one submit. */
  recorder(label: string): Recorder {
    return new Recorder(this, label);
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

/** One dispatch's worth of arguments. */
export interface Dispatch {
  kernel: string; // shown in errors and timings
  shader: string;
  constants?: Constants;
  entryPoint?: string;
  bindings: Binding[]; // @group(0) @binding(i) in order
  workgroups: [number, number?, number?];
  /** Packed params for a uniform at @binding(bindings.length), if the shader takes one. */
  params?: ArrayBuffer;
}

/**
 * Records dispatches into one command encoder. Each dispatch's encoding sits in its own error scope so a
 * validation error names the exact kernel; `submit()` sends the work and surfaces the first error.
 */
export class Recorder {
  private readonly encoder: GPUCommandEncoder;
  private readonly checks: Promise<void>[] = [];
  private readonly temps: GPUBuffer[] = [];
  private readonly params: GPUBuffer[] = [];
  private readonly label: string;
  readonly kernels: string[] = [];
  /** When set (benchmarks), dispatch k writes GPU timestamps at query indices 2k (begin) and 2k + 1 (end). */
  timestamps: GPUQuerySet | null = null;

  constructor(
    readonly gpu: Gpu,
    label: string,
  ) {
    this.label = label;
    this.encoder = gpu.device.createCommandEncoder({ label });
  }

  dispatch(d: Dispatch): void {
    const gpu = this.gpu;
    const k = this.kernels.length;
    this.kernels.push(d.kernel);
    const check = gpu.scoped(d.kernel, () => {
      const pipeline = gpu.pipeline(d.shader, d.constants, d.entryPoint);
      const resources: GPUBufferBinding[] = d.bindings.map((b) => ('buffer' in b ? { buffer: b.buffer, offset: b.offset ?? 0, size: b.size } : { buffer: b }));
      if (d.params) {
        const u = gpu.paramsBuffer(d.params);
        this.params.push(u);
        resources.push({ buffer: u });
      }
      const bindGroup = gpu.bindGroup(d.kernel, pipeline, resources);
      const timestampWrites = this.timestamps ? { querySet: this.timestamps, beginningOfPassWriteIndex: 2 * k, endOfPassWriteIndex: 2 * k + 1 } : undefined;
      const pass = this.encoder.beginComputePass({ label: d.kernel, timestampWrites });
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      const [x, y = 1, z = 1] = d.workgroups;
      pass.dispatchWorkgroups(x, y, z);
      pass.end();
    });
    // Surfaced by submit(); marked handled here so a recording abandoned before submit is no unhandled rejection.
    check.catch(() => {});
    this.checks.push(check);
  }

  /** A storage buffer for intermediates (reduction partials) that is destroyed once this recorder's work is submitted. */
  scratch(label: string, byteSize: number): GPUBuffer {
    const buf = this.gpu.createBuffer(label, byteSize);
    this.temps.push(buf);
    return buf;
  }

  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  clear(buf: GPUBuffer, offset = 0, size?: number): void {
    this.encoder.clearBuffer(buf, offset, size);
  }

  /** Submits everything recorded; rejects with the first kernel's GpuError if any dispatch was invalid. */
  async submit(): Promise<void> {
    const gpu = this.gpu;
    await gpu.scoped(this.label, () => {
      gpu.device.queue.submit([this.encoder.finish()]);
    });
    const results = await Promise.allSettled(this.checks);
    for (const t of this.temps) t.destroy();
    gpu.releaseParams(this.params.splice(0));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** Submits and waits until the GPU has finished the work (for timings and before reads). */
  async finish(): Promise<void> {
    await this.submit();
    await Promise.race([
      this.gpu.device.queue.onSubmittedWorkDone(),
      this.gpu.lost.then((info) => {
        throw new GpuError('device-lost', this.label, info.message || info.reason);
      }),
    ]);
  }
}

/** Packs a params struct: a list of [type, value] words, padded to 16 bytes (uniform layout). */
export function packParams(words: Array<['u32' | 'i32' | 'f32', number]>): ArrayBuffer {
  const buf = new ArrayBuffer(Math.max(16, Math.ceil((words.length * 4) / 16) * 16));
  const dv = new DataView(buf);
  words.forEach(([t, v], i) => {
    if (t === 'f32') dv.setFloat32(i * 4, v, true);
    else if (t === 'i32') dv.setInt32(i * 4, v, true);
    else dv.setUint32(i * 4, v >>> 0, true);
  });
  return buf;
}
