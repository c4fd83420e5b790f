// What a benchmark suite is: a module exporting `run(gpu, opts): Promise<Row[]>` (registered in
// bench/run.ts). Kept apart from the runner so suites do not import it back (no cycle).
import type { Gpu } from '../src/gpu/context.ts';

/** One result line; every suite chooses its columns. */
export type Row = Record<string, string | number | null>;
export interface BenchOptions {
  /** Small sizes only (software adapters, CI smoke runs). */
  quick: boolean;
}
/** CPU-only suites (bench/run.ts CPU_ONLY) get no GPU: null. */
export type Suite = { run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> };
