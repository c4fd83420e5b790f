// Launcher for shaders/sample_forward.wgsl: one decode step's logits processing and sampling on the GPU
// (penalties → min_new_tokens → temperature → top-k → top-p → min-p → inverse CDF at uniform(seed, row,
// step)), writing each row's token id and log-prob into slot `step` of (steps, B) buffers so a whole
// generation's draws are read back at once. Its reference is the CPU sampler, src/model/sampler.ts
// sample_step (same settings, same RNG stream; that module validates the settings before they get here).
import { isCpuAdapter, workgroupCap, type Gpu, type Recorder } from '../gpu/context.ts';
import { checkSize } from './windows.ts';

// Threads per row (one workgroup each): about 8 tokens per thread (a small vocabulary's row pays fewer
// barriers: software adapters run them as fibers), at most ROW_THREADS and the workgroupCap. A decode step has
// only B rows, so on a GPU 256 threads a row left the adapter nearly idle: 16 rows are 16 workgroups, and each
// pass over a 151,936-token row took about 0.8 ms on an H100 (21 ms per step with top-k and top-p, 3.4 ms
// without), a thread walking 594 tokens one dependent load after another. Up to 1,024 there, within the
// device's workgroup limits: the kernel's workgroup arrays take WG_BYTES per thread and WG_FIXED_BYTES besides
// (as Dawn counts them: each variable rounded up to 16 bytes). At least MIN_WG: the 16 radix bins are cleared one
// per thread. SwiftShader, whose coroutines switch at every barrier, takes its workgroupCap of 16 at any
// vocabulary: 8 rows took 0.64 ms at 16 threads, 2.49 at 64 and 6.69 at 256 for V = 328 (4.7, 10.8, 48.7 with
// top-k and top-p), and 48 / 52 / 52 ms for V = 151,936 (510 / 523 / 563).
const ROW_THREADS = { gpu: 1024, cpu: 256 };
const WG_BYTES = 28; // red (common/reduce.wgsl), red_u, red4, cdf
const WG_FIXED_BYTES = 96; // hist (64), pick (8 → 16), pick_before (4 → 16)
const MIN_WG = 16;

/** The most threads a row's workgroup can have on this device: a power of two within its limits. */
function maxWg(gpu: Gpu): number {
  const l = gpu.limits;
  const most = Math.min(l.maxComputeInvocationsPerWorkgroup, l.maxComputeWorkgroupSizeX, Math.floor((l.maxComputeWorkgroupStorageSize - WG_FIXED_BYTES) / WG_BYTES));
  return 2 ** Math.floor(Math.log2(most));
}

const defaultWg = (gpu: Gpu, V: number) =>
  Math.min(ROW_THREADS[isCpuAdapter(gpu.adapter) ? 'cpu' : 'gpu'], workgroupCap(gpu.adapter), maxWg(gpu), Math.max(32, 2 ** Math.ceil(Math.log2(Math.ceil(V / 8)))));

/** The sampler's settings as the kernel takes them (src/model/sampler.ts SamplingSettings, resolved). */
export interface SampleParams {
  greedy: boolean;
  temperature: number;
  top_k: number; // 0: off
  top_p: number; // 1: off
  min_p: number; // 0: off
  repetition_penalty: number;
  presence_penalty: number;
  frequency_penalty: number;
}

/** Row ids, error codes: what sample_forward writes instead of a token. */
export const SAMPLE_BAD_LOGIT = -1; // a NaN or +inf logit in the row
export const SAMPLE_NOTHING_LEFT = -2; // every token removed (min_new_tokens masking the only finite ones)

/** True when the settings read the counts buffer (and add each sampled token to it). */
export const usesCounts = (s: SampleParams): boolean => s.repetition_penalty !== 1 || s.presence_penalty !== 0 || s.frequency_penalty !== 0;

export function sample_forward(
  rec: Recorder,
  args: {
    logits: GPUBuffer; // (B, V) f32 last-position logits
    /** (B, V) u32 tokens seen per row within the penalty scope, updated in place; null when usesCounts is false. */
    counts: GPUBuffer | null;
    eos: GPUBuffer; // (max(1, n_eos)) u32 EOS ids
    n_eos: number;
    /** True while fewer than min_new_tokens tokens have been generated: EOS ids are removed. */
    eos_masked: boolean;
    ids: GPUBuffer; // (steps, B) i32, slot `step` written
    logps: GPUBuffer; // (steps, B) f32, slot `step` written
    B: number;
    V: number;
    seed: number; // integer in [0, 2^53)
    step: number; // tokens generated so far: the RNG counter and the output slot
    params: SampleParams;
    wg?: number; // threads per row, a power of two (default: by V and the adapter class, within the device's limits)
  },
): void {
  const kernel = 'sample_forward';
  const { B, V, params: s } = args;
  const WG = args.wg ?? defaultWg(rec.gpu, V);
  if (!(WG >= MIN_WG && (WG & (WG - 1)) === 0)) throw new Error(`${kernel}: workgroup size ${WG} must be a power of two from ${MIN_WG}`);
  if (WG > maxWg(rec.gpu)) throw new Error(`${kernel}: workgroup size ${WG} is over this device's ${maxWg(rec.gpu)} (its workgroup invocation and storage limits)`);
  const penalties = usesCounts(s);
  if (penalties && !args.counts) throw new Error(`${kernel}: penalties need the counts buffer`);
  checkSize(kernel, 'logits', args.logits, B * V);
  if (args.counts) checkSize(kernel, 'counts', args.counts, B * V);
  checkSize(kernel, 'eos', args.eos, Math.max(1, args.n_eos));
  checkSize(kernel, 'ids', args.ids, (args.step + 1) * B);
  checkSize(kernel, 'logps', args.logps, (args.step + 1) * B);
  rec.dispatch({
    kernel,
    shader: 'sample_forward',
    constants: { WG, TOP_K: !s.greedy && s.top_k > 0, TOP_P: !s.greedy && s.top_p < 1, PENALTIES: penalties },
    // Without penalties the counts are never read; a fresh scratch word stands in for the binding.
    bindings: { logits: args.logits, counts: args.counts ?? rec.scratch('sample.counts', 16), eos: args.eos, ids: args.ids, logps: args.logps },
    params: [
      ['V', 'u32', V],
      ['B', 'u32', B],
      ['out_base', 'u32', args.step * B],
      ['seed_lo', 'u32', args.seed >>> 0],
      ['seed_hi', 'u32', Math.floor(args.seed / 4294967296) >>> 0],
      ['step', 'u32', args.step],
      ['greedy', 'u32', s.greedy ? 1 : 0],
      ['eos_masked', 'u32', args.eos_masked ? 1 : 0],
      ['n_eos', 'u32', args.n_eos],
      ['repetition', 'f32', s.repetition_penalty],
      ['presence', 'f32', s.presence_penalty],
      ['frequency', 'f32', s.frequency_penalty],
      ['temperature', 'f32', s.temperature],
      ['top_k', 'u32', s.top_k],
      ['top_p', 'f32', s.top_p],
      ['min_p', 'f32', s.min_p],
      ['key_digits', 'u32', 8],
    ],
    workgroups: [B],
    work: { bytes: 4 * B * V * (penalties ? 2 : 1) + 8 * B }, // the rows' logits (and token counts) read once; an id and its log-prob written per row
  });
}
