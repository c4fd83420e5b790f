// A pool of MAP_READ staging buffers for read-backs. Every read used to create and destroy its own
// staging buffer; a stage reads the same few shapes back on every step, so buffers are kept by size
// class (powers of two up to 1 MiB) and reused once unmapped. The pool is bounded: beyond MAX_POOLED bytes of idle
// buffers a returned one is destroyed instead. Staging memory is not counted in Gpu.allocatedBytes (it is
// not part of the model's memory plan), but `pooledBytes` reports it.

const MAX_POOLED = 64 * 2 ** 20;
const MIN_CLASS = 256;
const POW2_UP_TO = 2 ** 20;

export class StagingPool {
  private readonly free = new Map<number, GPUBuffer[]>();
  /** Bytes of idle staging buffers held for reuse. */
  pooledBytes = 0;
  /** Staging buffers created so far (a pool that works stops creating them on a repeated read pattern). */
  created = 0;

  constructor(private readonly device: GPUDevice) {}

  /** An unmapped COPY_DST | MAP_READ buffer of at least `byteSize` bytes. */
  acquire(byteSize: number): GPUBuffer {
    // Small reads share power-of-two classes; a large one (logits in a test) is reused only by the same size.
    const size = byteSize <= POW2_UP_TO ? Math.max(MIN_CLASS, 2 ** Math.ceil(Math.log2(byteSize))) : Math.ceil(byteSize / 4) * 4;
    const b = this.free.get(size)?.pop();
    if (b) {
      this.pooledBytes -= size;
      return b;
    }
    this.created++;
    return this.device.createBuffer({ label: `staging(${size})`, size, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
  }

  /** Gives an unmapped buffer back (or destroys it when the pool is full or it failed to map). */
  release(b: GPUBuffer, ok = true): void {
    if (!ok || b.mapState !== 'unmapped' || this.pooledBytes + b.size > MAX_POOLED) {
      b.destroy();
      return;
    }
    let list = this.free.get(b.size);
    if (!list) this.free.set(b.size, (list = []));
    list.push(b);
    this.pooledBytes += b.size;
  }
}
