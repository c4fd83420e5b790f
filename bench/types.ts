// What a benchmark suite is: a module exporting `run(gpu, opts): Promise<Row[]>` (registered in
// bench/run.ts). Kept apart from the runner so suites do not import it back (no cycle).
import type { Gpu } from '../src/gpu/context.ts';

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
}
/** A measured rate as a fraction of its ceiling (3 digits), or null when there is no ceiling. */
export const ofPeak = (rate: number | null, ceiling: number | null | undefined): number | null => (rate === null || !ceiling ? null : Number((rate / ceiling).toPrecision(3)));
/** CPU-only suites (bench/run.ts CPU_ONLY) get no GPU: null. */
export type Suite = { run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> };
