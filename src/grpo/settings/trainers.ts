// Each trainer's two settings tables, by trainer: its `config` (the trainer's own field names) and its run
// context (`run`: num_processes, gradient_accumulation_steps, ...). The page's trainer preset form is
// generated from these rows, and an imported batch's config fills a preset through them.
import { OPENRLHF_RUN, OPENRLHF_SETTINGS } from './openrlhf.ts';
import type { SettingsTable } from './table.ts';
import { TRL_RUN_SETTINGS, TRL_SETTINGS } from './trl.ts';
import type { TrainerId } from './types.ts';
import { VERL_RUN, VERL_SETTINGS } from './verl.ts';

export const TRAINER_TABLES: Record<TrainerId, { config: SettingsTable; run: SettingsTable }> = {
  trl: { config: TRL_SETTINGS, run: TRL_RUN_SETTINGS },
  verl: { config: VERL_SETTINGS, run: VERL_RUN },
  openrlhf: { config: OPENRLHF_SETTINGS, run: OPENRLHF_RUN },
};
