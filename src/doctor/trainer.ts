// The trainer settings a batch carries, as the Doctor's trainer rules read them: one setting at a time, checked
// against the settings table (src/grpo/settings/) of the trainer the step resolves (trainerOfBatch, never a second
// guess from the config's names, as NeMo-RL's and slime's verl group formula would give), so a rule reads exactly
// the value and default the trainer objective would, and a bad value is named, never guessed.
import type { GrpoBatch } from '../io/batch.ts';
import { checkSetting, specOf, type SettingsTable } from '../grpo/settings/table.ts';
import { TRL_RUN_SETTINGS, TRL_SETTINGS } from '../grpo/settings/trl.ts';
import { VERL_RUN, VERL_SETTINGS } from '../grpo/settings/verl.ts';
import { OPENRLHF_RUN, OPENRLHF_SETTINGS } from '../grpo/settings/openrlhf.ts';
import type { SettingValue, TrainerId } from '../grpo/settings/types.ts';

const TABLES: Record<TrainerId, { config: SettingsTable; run: SettingsTable }> = {
  trl: { config: TRL_SETTINGS, run: TRL_RUN_SETTINGS },
  verl: { config: VERL_SETTINGS, run: VERL_RUN },
  openrlhf: { config: OPENRLHF_SETTINGS, run: OPENRLHF_RUN },
};

/** A raw run value: `run` first, then `config` (where the importers put num_processes and rank). */
export function runValue(batch: GrpoBatch, name: string): unknown {
  return batch.run?.[name] ?? batch.config?.[name];
}

/** One setting of the batch's trainer, checked against its table (throws SettingsError naming the field); absent → the table's default. */
export function settingOf<T extends SettingValue>(batch: GrpoBatch, trainer: TrainerId, name: string): T {
  const inRun = TABLES[trainer].run.some((s) => s.name === name);
  const spec = specOf(inRun ? TABLES[trainer].run : TABLES[trainer].config, name);
  const raw = inRun ? runValue(batch, name) : batch.config?.[name];
  return (raw === undefined ? spec.default : checkSetting(spec, raw, inRun && batch.run?.[name] !== undefined ? 'run' : 'config')) as T;
}
