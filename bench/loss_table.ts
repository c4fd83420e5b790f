// Benchmark suite `loss_table`: the page's loss table (src/grpo/trainers/from_logps.ts lossTable: every loss
// type of the trainer on the same scored log-probs; TRL 8 columns, verl 32, OpenRLHF 2) for each trainer,
// with the settings of one of its golden cases (tests/golden/trainers) on synthetic log-probs of B × T
// tokens. Per trainer: wall ms of the second run (the first compiles pipelines), and its GPU work: submits,
// readbacks, dispatches, KiB read back. Every column shares one submit and one readback (a SubmitGroup).
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { statsSince, type Gpu } from '../src/gpu/context.ts';
import { readTrainerCase } from '../src/cli/trainer_case.ts';
import { lossTable } from '../src/grpo/trainers/from_logps.ts';
import type { ScoredLogps, TrainerInputs } from '../src/grpo/trainers/types.ts';
import { parseSafeTensors } from '../src/io/safetensors.ts';
import type { BenchOptions, Row } from './types.ts';

const GOLDEN = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/golden/trainers');
/** The golden case whose config and run each trainer's table takes. */
const CASES = { trl: 'case_03', verl: 'case_02', openrlhf: 'case_00' } as const;

/** The case's settings over B × T synthetic tokens: every token in the mask, log-probs in [−3, −0.1], advantages ±. */
function inputsOf(trainer: keyof typeof CASES, B: number, T: number): { x: TrainerInputs; scored: ScoredLogps } {
  const file = resolve(GOLDEN, trainer, `${CASES[trainer]}.safetensors`);
  const c = readTrainerCase(parseSafeTensors(new Uint8Array(readFileSync(file)), file), file);
  const N = B * T;
  const logp = (salt: number) => Float32Array.from({ length: N }, (_, i) => -0.1 - (((i * 7919 + salt) % 1000) / 1000) * 2.9);
  // The token counts the run context carries, at this size.
  const run = trainer === 'trl' ? { ...c.run, num_items_in_batch: N } : trainer === 'openrlhf' ? { ...c.run, loss_batch_info: { batch_num_tokens: N, dp_size: 1, global_batch_size: B } } : c.run;
  const perSeq = trainer === 'trl';
  const x: TrainerInputs = {
    trainer, config: trainer === 'trl' ? { ...c.config, max_completion_length: T } : c.config, run, B, T,
    completion_ids: Int32Array.from({ length: N }, (_, i) => 3 + (i % 1000)),
    completion_mask: new Int32Array(N).fill(1),
    tool_mask: null,
    advantages: Float32Array.from({ length: perSeq ? B : N }, (_, i) => (Math.floor(perSeq ? i : i / T) % 2 ? -0.7 : 0.7)),
    old_per_token_logps: logp(1),
    ref_per_token_logps: logp(2),
    sampling_per_token_logps: null,
    sequence_lengths: null,
  };
  return { x, scored: { per_token_logps: logp(3), per_token_entropy: Float32Array.from({ length: N }, (_, i) => 0.5 + (i % 7) / 7), temperature: 1 } };
}

export async function run(gpu: Gpu | null, opts: BenchOptions): Promise<Row[]> {
  if (!gpu) throw new Error('loss_table needs a GPU adapter');
  const shapes = opts.quick ? [[8, 128]] : [[8, 512], [64, 512]];
  const rows: Row[] = [];
  for (const [B, T] of shapes) {
    for (const trainer of Object.keys(CASES) as (keyof typeof CASES)[]) {
      const { x, scored } = inputsOf(trainer, B, T);
      await lossTable(gpu, x, scored); // warmup: pipelines
      const before = { ...gpu.stats };
      const t0 = performance.now();
      const cells = await lossTable(gpu, x, scored);
      const ms = performance.now() - t0;
      const w = statsSince(gpu.stats, before);
      rows.push({
        trainer, B, T, columns: cells.length, computed: cells.filter((c) => c.loss !== null).length, ms,
        submits: w.submits, readbacks: w.readbacks, dispatches: w.dispatches, 'read KiB': w.bytesRead / 1024,
      });
    }
  }
  return rows;
}
