// What a benchmark suite is: a module exporting `run(gpu, opts): Promise<Row[]>` (registered in
// bench/run.ts). Kept apart from the runner so suites do not import it back (no cycle).
import type { AdapterReport, Gpu, GpuStats } from '../src/gpu/context.ts';

/** One result line; every suite chooses its columns. */
export type Row = Record<string, string | number | null>;
export interface BenchOptions {
  /** Small sizes only (software adapters, CI smoke runs). */
  quick: boolean;
  /** The adapter's ceilings, measured first in the same run (bench/peak.ts); null without a GPU. */
  peak?: Peak | null;
}
/** What the adapter can do at all: FMA throughput and copy bandwidth (bench/peak.ts). */
export interface Peak {
  fma_gflops: number;
  /** null: no shader-f16. */
  fma_f16_gflops: number | null;
  copy_gbps: number;
  /** Wall µs of one dispatch in a chain of dependent ones (launch and barrier, and the CPU's recording). */
  dispatch_us: number;
}
/** What `npm run bench --json FILE` writes (bench/run.ts), and what scripts/device-kit.ts merges into bench/results-<gpu>.json. */
export interface BenchFile {
  date: string;
  quick: boolean;
  adapter: AdapterReport | null;
  peak: Peak | null;
  results: Record<string, Row[]>;
}
/** A measured rate as a fraction of its ceiling (3 digits), or null when there is no ceiling. */
export const ofPeak = (rate: number | null, ceiling: number | null | undefined): number | null => (rate === null || !ceiling ? null : Number((rate / ceiling).toPrecision(3)));

/**
 * The rates of work done in `ms` (the dispatches' declared Work: src/gpu/stats.ts) beside the probe's ceilings:
 * GFLOP/s as a fraction of the FMA probe, GB/s as a fraction of the copy probe. Null where nothing was declared
 * (a kernel whose launcher counts no work) or there is no time or ceiling. Every suite's rows take these columns
 * from here, so a GEMM, an attention pass, a step stage and a decode are held to the same two probes.
 */
export function rates(work: Pick<GpuStats, 'flops' | 'bytesMoved'>, ms: number | null, peak: Peak | null | undefined): Row {
  const rate = (n: number) => (n > 0 && ms ? n / ms / 1e6 : null); // per ms → G per s
  const [gflops, gbps] = [rate(work.flops), rate(work.bytesMoved)];
  return { 'GFLOP/s': gflops, of_fma_peak: ofPeak(gflops, peak?.fma_gflops), 'GB/s': gbps, of_copy_peak: ofPeak(gbps, peak?.copy_gbps) };
}
/** CPU-only suites (bench/run.ts CPU_ONLY) get no GPU: null. */
export type Suite = { run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> };
