// Benchmark suite `loss`: the fused log-prob gather (forward, and backward in place) against a read-only
// pass over the same bytes (the roofline) and a naive 4-pass version with a materialised log_softmax
// (N, V), on the same device in the same run. Reports bytes moved, GB/s, time relative to the read-only
// pass (target on real GPUs: forward ≤ 1.15×), naive/fused, and the extra GPU memory each needs beyond
// the logits, as a fraction of the logits' size (from the buffers each allocates: WebGPU cannot query
// memory use). The read-only pass has the fused kernel's access pattern (four loads in flight per
// thread); the naive passes are plain one-element loops, as a straightforward port would write them, so
// naive/fused mixes the 5× traffic with that per-pass difference (compare naive's GB/s to the roofline's).
import { Gpu, GpuError, type Recorder } from '../src/gpu/context.ts';
import { bindingLimit, rowsPerWindow, rowWindow } from '../src/kernels/windows.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../src/kernels/logprob_gather.ts';
import { timeKernels } from './timing.ts';
import { ofPeak, type BenchOptions, type Row } from './types.ts';

const WG = 256;

/** Fills a big buffer from one 16 MiB block of random logits (uploading 1.2 GB of fresh randoms is slow). */
function fillLogits(gpu: Gpu, buf: GPUBuffer, bytes: number): void {
  const block = new Float32Array(4 << 20);
  let s = 12345;
  for (let i = 0; i < block.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    block[i] = ((s >>> 8) / (1 << 24) - 0.5) * 16;
  }
  for (let off = 0; off < bytes; off += block.byteLength) gpu.write(buf, block.subarray(0, Math.min(block.length, (bytes - off) / 4)), off);
}

function read_only(rec: Recorder, logits: GPUBuffer, out: GPUBuffer, N: number, V: number): void {
  const per = rowsPerWindow(rec.gpu, bindingLimit(rec.gpu), N, V);
  for (let r0 = 0; r0 < N; r0 += per) {
    const rc = Math.min(per, N - r0);
    const w = rowWindow(rec.gpu, logits, r0, rc, V);
    rec.dispatch({
      kernel: 'bench_read_forward',
      shader: 'bench_read_forward',
      constants: { WG },
      bindings: { logits: w.binding, out: { buffer: out, offset: r0 * 4, size: rc * 4 } },
      params: [['rows', 'u32', rc], ['V', 'u32', V], ['elem_base', 'u32', w.base]],
      workgroups: Gpu.grid(rc),
    });
  }
}

function naive(rec: Recorder, b: { logits: GPUBuffer; ids: GPUBuffer; rowMax: GPUBuffer; lse: GPUBuffer; logSoftmax: GPUBuffer; logp: GPUBuffer; entropy: GPUBuffer }, N: number, V: number): void {
  const per = rowsPerWindow(rec.gpu, bindingLimit(rec.gpu), N, V);
  for (let pass = 0; pass < 4; pass++) {
    for (let r0 = 0; r0 < N; r0 += per) {
      const rc = Math.min(per, N - r0);
      const lw = rowWindow(rec.gpu, b.logits, r0, rc, V);
      rec.dispatch({
        kernel: `bench_naive_forward pass ${pass}`,
        shader: 'bench_naive_forward',
        constants: { WG, PASS: pass },
        bindings: { logits: lw.binding, ids: b.ids, row_max: b.rowMax, lse: b.lse, log_softmax: rowWindow(rec.gpu, b.logSoftmax, r0, rc, V).binding, logp: b.logp, entropy: b.entropy },
        params: [['row_start', 'u32', r0], ['rows', 'u32', rc], ['V', 'u32', V], ['elem_base', 'u32', lw.base], ['temperature', 'f32', 1]],
        workgroups: Gpu.grid(rc),
      });
    }
  }
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const sizes = opts.quick ? { N: [64], V: [50257, 151936] } : { N: [512, 2048], V: [50257, 151936] };
  const reps = opts.quick ? 3 : 10;
  const rows: Row[] = [];
  for (const N of sizes.N) {
    for (const V of sizes.V) {
      const bytes = N * V * 4;
      const logitsMB = bytes / 2 ** 20;
      // The naive version needs a second (N, V) buffer.
      if (bytes > gpu.limits.maxBufferSize) {
        rows.push({ N, V, kernel: 'all', note: `skipped: logits of ${bytes} bytes exceed maxBufferSize ${gpu.limits.maxBufferSize}` });
        continue;
      }
      const created: GPUBuffer[] = [];
      const buf = (label: string, size: number) => {
        const b = gpu.createBuffer(label, size);
        created.push(b);
        return b;
      };
      try {
        const logits = await gpu.scoped('bench alloc logits', () => buf('logits', bytes));
        fillLogits(gpu, logits, bytes);
        const ids = gpu.upload('ids', Int32Array.from({ length: N }, (_, i) => (i * 7919) % V));
        const mask = gpu.upload('mask', new Int32Array(N).fill(1));
        const [logp, lse, entropy, rowOut, rowMax, dlogp] = [buf('logp', N * 4), buf('lse', N * 8), buf('entropy', N * 4), buf('row sums', N * 4), buf('row max', N * 4), buf('dlogp', N * 4)];
        gpu.write(dlogp, new Float32Array(N).fill(0.5));
        created.push(ids, mask);

        const tRead = await timeKernels(gpu, 'read-only', (rec) => read_only(rec, logits, rowOut, N, V), { reps });
        const tFwd = await timeKernels(gpu, 'forward', (rec) => logprob_gather_forward(rec, { logits, ids, mask, logp, lse, entropy, N, V, temperature: 1 }), { reps });
        let tNaive: { ms: number; wallMs: number } | null = null;
        let naiveNote = '';
        try {
          const logSoftmax = await gpu.scoped('bench alloc log_softmax', () => buf('log_softmax', bytes));
          tNaive = await timeKernels(gpu, 'naive', (rec) => naive(rec, { logits, ids, rowMax, lse: rowOut, logSoftmax, logp, entropy }, N, V), { reps });
          logSoftmax.destroy();
        } catch (e) {
          if (!(e instanceof GpuError)) throw e;
          naiveNote = `naive skipped: ${e.message.split('\n')[0]}`;
        }
        // Last: in place overwrites the logits with their gradient.
        const tBwd = await timeKernels(gpu, 'backward', (rec) => logprob_gather_backward(rec, { logits, ids, mask, lse, dlogp, dlogits: 'in-place', N, V, temperature: 1 }), { reps });

        const row = (kernel: string, t: { ms: number; wallMs: number } | null, moved: number, extraBytes: number, note = ''): Row => ({
          N,
          V,
          kernel,
          'logits MB': +logitsMB.toFixed(1),
          ms: t === null ? null : +t.ms.toFixed(3),
          'wall ms': t === null ? null : +t.wallMs.toFixed(3),
          'moved MB': +(moved / 2 ** 20).toFixed(1),
          'GB/s': t === null ? null : +(moved / 1e9 / (t.ms / 1e3)).toFixed(2),
          of_copy_peak: t === null ? null : ofPeak(moved / 1e9 / (t.ms / 1e3), opts.peak?.copy_gbps),
          'x read-only': t === null ? null : +(t.ms / tRead.ms).toFixed(3),
          'naive/fused': kernel === 'forward (fused)' && tNaive !== null ? +(tNaive.ms / tFwd.ms).toFixed(2) : null,
          'extra mem': +(extraBytes / bytes).toPrecision(3),
          timer: tRead.timer,
          note,
        });
        rows.push(row('read-only (roofline)', tRead, bytes, N * 4));
        rows.push(row('forward (fused)', tFwd, bytes, N * 16)); // logp, lse (2), entropy
        rows.push(row('naive 4-pass', tNaive, 5 * bytes, bytes + N * 16, naiveNote)); // max, lse, log_softmax r+w, gather+entropy
        rows.push(row('backward (in place)', tBwd, 2 * bytes, N * 4)); // dlogp
      } catch (e) {
        if (!(e instanceof GpuError)) throw e;
        rows.push({ N, V, kernel: 'all', note: `skipped: ${e.message.split('\n')[0]}` });
      } finally {
        created.forEach((b) => b.destroy());
      }
    }
  }
  return rows;
}
