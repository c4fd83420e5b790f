// The batch the page's Export writes: the batch on screen with the update's results folded in (its rewards and
// advantages are the assembled batch's; the log-probs the loss used and the trainer's effective loss mask come
// from later stages) and the settings they were computed with, exactly, so `grpo-studio` replays the same update
// from the file (src/cli/args.ts stepSettingsOfFile reads back the StepConfig the page ran), and the ids the
// import's reader inferred (inferred_ids), so the file's Doctor says what the page's did. Pure, so a test reads
// the exported file in the CLI without a browser.
import type { GrpoBatch } from '../io/batch.ts';
import { rowOf } from '../grpo/settings/effective.ts';
import { TRAINERS, type Scope } from '../grpo/settings/types.ts';
import type { StudioState } from './index.ts';
import { fromFile } from './derived.ts';

/** Scopes of rows that describe how the batch was made (its model, positions, rendering, sampling), not a computation on it. */
const DESCRIPTIVE: ReadonlySet<Scope> = new Set(['batch', 'sampling']);

/**
 * What a batch's config says of the batch rather than of a trainer's computation: keys no trainer's table has (the
 * model's name) and those every trainer that has them describes the batch with (model_type, position_ids,
 * chat_template_kwargs; not temperature, which verl's loss reads). The Doctor reads them; they stay the batch's
 * whatever trainer the update ran under (a resolution under another trainer carries only the settings that mean
 * the same there), below the settings the update ran with.
 */
const batchFacts = (config: GrpoBatch['config']): Record<string, unknown> =>
  Object.fromEntries(Object.entries(config ?? {}).filter(([k]) => TRAINERS.every((t) => [rowOf(t, 'config', k), rowOf(t, 'run', k)].every((row) => !row || DESCRIPTIVE.has(row.scope)))));

export function exportedBatch(s: Pick<StudioState, 'batch' | 'run' | 'runSettings' | 'imported' | 'batchOrigin' | 'stepFrom'>): GrpoBatch | null {
  const { batch, run } = s;
  if (!batch) return null;
  const out = { ...batch };
  // The ids its reader inferred stay marked as such, so the file's Doctor verdicts are the import's (not errors).
  const inferred = fromFile(s) ? s.imported?.inferred : undefined;
  if (inferred && Object.keys(inferred).length) out.inferred_ids = inferred;
  const C = run.assemble?.padded.C ?? 0;
  const rows = (a: Float32Array | null | undefined) => a && batch.completion_ids.map((ids, b) => Array.from(a.subarray(b * C, b * C + ids.length)));
  out.old_per_token_logps = rows(run.loss?.old_per_token_logps) ?? batch.old_per_token_logps;
  out.ref_per_token_logps = rows(run.reference_forward?.ref_per_token_logps) ?? batch.ref_per_token_logps;
  // The settings the results were computed with, exactly (the trainer's names, no derived shapes), so the file
  // replays the same update in the CLI or on another page: its trainer, config and run context.
  const ran = run.loss ? s.runSettings?.settings : undefined;
  if (ran) {
    out.trainer = ran.trainer === 'trl' ? undefined : ran.trainer;
    out.config = { ...batchFacts(batch.config), ...ran.config };
    out.run = Object.keys(ran.run).length ? { ...ran.run } : undefined;
    // The studio's own rollout: the tokenizer's EOS its TRL truncation counted, so the CLI counts the same one.
    const eos = run.assemble?.padded.tokenizer_eos_token_id;
    if (ran.trainer === 'trl' && eos !== undefined && out.run?.eos_token_id === undefined) out.run = { ...out.run, eos_token_id: eos };
  }
  // The trainer preset's effective loss mask (0/1), so a reader sees which tokens the trainer's loss kept.
  out.effective_loss_mask = rows(run.loss?.trainer?.terms?.effective_loss_mask) ?? batch.effective_loss_mask;
  return out;
}
