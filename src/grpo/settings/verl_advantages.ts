// The verl advantage settings `grpo-studio advantages` reads: rows of the verl table (verl.ts, `algorithm.*`)
// with adv_estimator narrowed to the estimators the studio implements (src/grpo/advantages.ts verlAdvantages)
// and required, since verl's default (gae) is not one of them.
import { specOf, type SettingsTable } from './table.ts';
import { VERL_SETTINGS } from './verl.ts';

export const VERL_ADV_ESTIMATORS = ['grpo', 'rloo', 'reinforce_plus_plus'] as const;

export const VERL_ADVANTAGE_SETTINGS: SettingsTable = [
  { ...specOf(VERL_SETTINGS, 'adv_estimator'), type: 'enum', values: VERL_ADV_ESTIMATORS, studio: true },
  specOf(VERL_SETTINGS, 'norm_adv_by_std_in_grpo'),
  specOf(VERL_SETTINGS, 'gamma'),
];
