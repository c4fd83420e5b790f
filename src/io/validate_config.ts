// The batch `config` and `run` checked field by field before anything reads them, against the batch trainer's
// settings tables (src/grpo/settings/effective.ts configTable / runTable: the trainer's rows and the studio's)
// — the same rows, bounds and allowed values the step, the page's forms and the CLI use, so a field has one
// rule everywhere. A wrong type or a value out of range (`scale_rewards: "median"`, `temperature: "1.0"`) is an
// error naming the field, never a silent default or a string coerced into arithmetic. Keys no table names
// are kept and not checked (exporters add their own); the importers list them.
import { rowOf } from '../grpo/settings/effective.ts';
import { checkSetting } from '../grpo/settings/table.ts';
import { shown } from './shown.ts';
import type { TrainerId } from '../grpo/settings/types.ts';

/** [field, one-line message] for every config / run value that cannot be used; [] for usable (or absent) ones. */
export function validateConfig(config: Record<string, unknown> | undefined, trainer: TrainerId = 'trl', run?: Record<string, unknown>): [string, string][] {
  const out: [string, string][] = [];
  for (const [where, values] of [['config', config], ['run', run]] as const) {
    for (const [key, v] of Object.entries(values ?? {})) {
      // A run-context key in config (the importers put rank / num_processes there) is checked as its run row.
      const spec = rowOf(trainer, where, key) ?? (where === 'config' ? rowOf(trainer, 'run', key) : undefined);
      if (!spec || v === undefined) continue;
      // GRPOConfig.__post_init__ reads the legacy booleans of scale_rewards (true = group, false = none).
      if (spec.name === 'scale_rewards' && typeof v === 'boolean') continue;
      try {
        checkSetting(spec, v, where);
      } catch (e) {
        out.push([`${where}.${key}`, `${where}.${key} = ${shown(v)}: ${(e as Error).message.replace(/^[^:]*: /, '').replace(/, got .*$/s, '')}`]);
      }
    }
  }
  return out;
}
