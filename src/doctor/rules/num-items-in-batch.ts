// num-items-in-batch: TRL's dapo (and cispo, vespo) divide Σ L·M by num_items_in_batch / num_processes,
// where num_items_in_batch is the loss-mask tokens (completion_mask × tool_mask) of the whole generation
// batch gathered over every process (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577:
// `accelerator.gather(...).sum()` in `_generate_and_score_completions`, the divisor in `_compute_loss`).
// On one rank's slice without it the normaliser is unknowable — any loss shown would silently differ
// from the trainer's unless every rank happened to hold as many tokens. With every rank's rows present it
// can be rebuilt: said as info, with the value.
import { msg } from '../util.ts';
import { TRL_SETTINGS } from '../../grpo/settings/trl.ts';
import { specOf } from '../../grpo/settings/table.ts';
import { trainerOfBatch } from '../../grpo/settings/effective.ts';
import { runValue } from '../trainer.ts';
import type { Rule } from '../types.ts';

const ID = 'num-items-in-batch';
/** TRL loss types normalised by the gathered token count (the rest are per micro-batch). */
const GLOBAL = ['dapo', 'cispo', 'vespo'];

export const numItemsInBatch: Rule = {
  id: ID,
  title: 'dapo normaliser over several processes without num_items_in_batch',
  severity: 'error',
  description: 'A TRL dapo / cispo / vespo batch from a run over several processes lacks num_items_in_batch (loss-mask tokens gathered over every rank): the loss divisor num_items_in_batch / num_processes cannot be reproduced from one rank’s rows.',
  seed: 'TRL loss_type="dapo" (default): normaliser gathered over ranks',
  check(ctx) {
    const { batch } = ctx;
    if (trainerOfBatch(batch) !== 'trl') return [];
    const lossType = (batch.config?.loss_type as string | undefined) ?? (specOf(TRL_SETTINGS, 'loss_type').default as string);
    if (!GLOBAL.includes(lossType)) return [];
    if (typeof runValue(batch, 'num_items_in_batch') === 'number') return [];
    const rank = runValue(batch, 'rank');
    const ranks = Array.isArray(rank) ? new Set(rank).size : 1;
    const np = runValue(batch, 'num_processes');
    const P = typeof np === 'number' && Number.isInteger(np) && np >= 1 ? np : ranks;
    if (P <= 1) return [];
    let items = 0;
    batch.completion_mask.forEach((row, b) => row.forEach((m, t) => (items += m === 1 && batch.tool_mask?.[b]?.[t] !== 0 ? 1 : 0)));
    if (ranks >= P) {
      return [{
        rule: ID, severity: 'info', field: 'num_items_in_batch',
        message: msg`loss_type ${lossType} over ${P} processes: num_items_in_batch is not given, but all ${P} ranks' rows are here: Σ completion_mask × tool_mask = ${items}, so TRL divides by ${items} / ${P} = ${items / P}`,
        hint: `Set run.num_items_in_batch = ${items} (if these rows are the whole generation batch) so the loss is normalised as TRL does.`,
      }];
    }
    return [{
      rule: ID, severity: 'error', field: 'num_items_in_batch',
      message: msg`loss_type ${lossType} over ${P} processes divides by num_items_in_batch / ${P}, gathered over every rank; this batch holds ${ranks === 1 ? 'one rank' : `${ranks} of ${P} ranks`} (${items} loss-mask tokens) and no num_items_in_batch: the trainer's loss normaliser cannot be reproduced`,
      hint: 'Export inputs["num_items_in_batch"] with the batch (run.num_items_in_batch), or convert every rank’s file together.',
    }];
  },
};
