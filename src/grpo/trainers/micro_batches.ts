// One TRL optimizer step over a local generation batch, as GRPOTrainer feeds it (huggingface/trl
// trl/trainer/grpo_trainer.py at f2cd577, `_prepare_inputs`): the generation batch is shuffled
// (`shuffle_sequence_dict`), split into steps_per_generation micro-batches (`split_tensor_dict`), and each
// micro-batch runs `_compute_loss` with the same `num_items_in_batch` — counted once over the whole generation
// batch in `_generate_and_score_completions` — and the current gradient_accumulation_steps. The gradients
// accumulate: each row belongs to one micro-batch, so the step's dlogits are the micro-batches' rows put back.
import type { Gpu } from '../../gpu/context.ts';
import { heldRanks, parseTrlRun } from '../settings/trl.ts';
import { SettingsError } from '../settings/types.ts';
import { trlLoss } from './trl.ts';
import type { TrainerLossCase, TrainerLossOutputs } from './types.ts';

export interface MicroBatch {
  /** Rows of the generation batch in this micro-batch, in micro-batch order. */
  rows: number[];
  outputs: TrainerLossOutputs;
}

export interface GenerationStep {
  micro: MicroBatch[];
  /** Σ of the micro-batches' losses: what the accumulated gradient is the gradient of. */
  loss: number;
  dlogits: Float32Array | null; // (B, T, V) in generation-batch row order
}

/** The rows of `c` in `rows`' order, as a micro-batch case. */
function take(c: TrainerLossCase, rows: number[], run: Record<string, unknown>): TrainerLossCase {
  const { T, V } = c;
  const perRow = <A extends Float32Array | Int32Array>(a: A, width: number): A => {
    const out = new (a.constructor as { new (n: number): A })(rows.length * width);
    rows.forEach((r, k) => out.set(a.subarray(r * width, (r + 1) * width), k * width));
    return out;
  };
  const opt = <A extends Float32Array | Int32Array>(a: A | null) => (a ? perRow(a, T) : null);
  return {
    ...c,
    run,
    B: rows.length,
    logits: perRow(c.logits, T * V),
    completion_ids: perRow(c.completion_ids, T),
    completion_mask: perRow(c.completion_mask, T),
    tool_mask: opt(c.tool_mask),
    advantages: perRow(c.advantages, c.advantages.length === c.B ? 1 : T),
    old_per_token_logps: opt(c.old_per_token_logps),
    ref_per_token_logps: opt(c.ref_per_token_logps),
    sampling_per_token_logps: opt(c.sampling_per_token_logps),
    sequence_lengths: c.sequence_lengths && perRow(c.sequence_lengths, 1),
  };
}

/**
 * Runs TRL's objective on each micro-batch of the generation batch `c`. `order` is the shuffle (a permutation
 * of the rows; default: as given); steps_per_generation must divide B. num_items_in_batch is the run's when
 * given (it spans all processes), else this generation batch's Σ completion_mask × tool_mask (one process).
 */
export async function trlGenerationStep(gpu: Gpu, c: TrainerLossCase, opts: { steps_per_generation: number; order?: number[]; backward: boolean }): Promise<GenerationStep> {
  const { B, T, V } = c;
  const S = opts.steps_per_generation;
  if (!(Number.isInteger(S) && S >= 1 && B % S === 0)) throw new SettingsError(`run.steps_per_generation: ${S} must be a positive integer dividing the generation batch (${B} rows)`);
  const order = opts.order ?? Array.from({ length: B }, (_, i) => i);
  if (order.length !== B || new Set(order).size !== B || order.some((r) => !(Number.isInteger(r) && r >= 0 && r < B))) throw new SettingsError(`order: expected a permutation of the ${B} rows`);
  let items = 0;
  for (let i = 0; i < B * T; i++) items += c.completion_mask[i] * (c.tool_mask ? c.tool_mask[i] : 1);
  const run = { ...c.run, num_items_in_batch: c.run.num_items_in_batch ?? items };
  const parsed = parseTrlRun(c.run).values;
  if (heldRanks(parsed) < parsed.num_processes && c.run.num_items_in_batch === undefined) {
    throw new SettingsError('run.num_items_in_batch: needed with num_processes > 1 unless every rank\'s rows are here (the generation batch over every process)');
  }
  const per = B / S;
  const micro: MicroBatch[] = [];
  const dlogits = opts.backward ? new Float32Array(B * T * V) : null;
  for (let k = 0; k < S; k++) {
    const rows = order.slice(k * per, (k + 1) * per);
    const outputs = await trlLoss(gpu, take(c, rows, run), { backward: opts.backward });
    if (dlogits && outputs.dlogits) rows.forEach((r, j) => dlogits.set(outputs.dlogits!.subarray(j * T * V, (j + 1) * T * V), r * T * V));
    micro.push({ rows, outputs });
  }
  return { micro, loss: micro.reduce((a, m) => a + m.outputs.loss, 0), dlogits };
}
