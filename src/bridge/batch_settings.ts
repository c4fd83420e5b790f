// A batch with the settings an update runs with written into it: its `trainer`, `config` and `run` are those
// settings, exactly (the trainer's names, no derived shapes), over what its own config says of the batch itself.
// One function for every reader of "this batch under these settings": the worker hands an imported batch to the
// step so (src/worker/runner.ts), so the step's advantage checks and the Doctor on the page judge the batch with
// the settings the update ran with; the page's Export writes the same (src/store/export_batch.ts), so
// `grpo-studio` on the exported file resolves the same settings (stepSettingsOfFile) and its Doctor says what the
// page's said. Here, in the page ↔ worker contract, because both ends need it and it reads only the settings tables.
import type { GrpoBatch } from '../io/batch.ts';
import { rowOf, type EffectiveSettings } from '../grpo/settings/effective.ts';
import { TRAINERS, type Scope } from '../grpo/settings/types.ts';

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

/**
 * `batch` with `settings` as its trainer, config and run. `tokenizer_eos_token_id`: the studio's own rollout's
 * tokenizer EOS (PaddedBatch.tokenizer_eos_token_id), which TRL's truncation counted (under
 * mask_truncated_completions), so a reader counts the same one. Idempotent: a batch that already holds these settings comes back with the same ones.
 */
export function withSettings(batch: GrpoBatch, settings: EffectiveSettings, tokenizer_eos_token_id?: number): GrpoBatch {
  const out: GrpoBatch = { ...batch, trainer: settings.trainer === 'trl' ? undefined : settings.trainer, config: { ...batchFacts(batch.config), ...settings.config } };
  const run = Object.keys(settings.run).length ? { ...settings.run } : undefined;
  // Only where a setting reads it (TRL's mask_truncated_completions): an id no row uses would make the file's run
  // context differ from the default and the replay take TRL's objective where the update took the studio loss.
  const counted = settings.trainer === 'trl' && settings.config.mask_truncated_completions === true && tokenizer_eos_token_id !== undefined && run?.eos_token_id === undefined;
  out.run = counted ? { ...run, eos_token_id: tokenizer_eos_token_id } : run;
  return out;
}
