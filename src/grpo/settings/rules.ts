// Whether a trainer would refuse a config + run, and why: each trainer's cross-field rules (trl_rules.ts,
// verl_rules.ts, openrlhf_rules.ts), run on the values its table resolves, the trainer's own refusals before
// the ones the studio adds. The trainer objectives call it once their config is read, so `grpo-studio loss`,
// `grpo-studio step` and the page refuse alike, with the trainer's reason and the fields named.
import { defaultsOf } from './table.ts';
import { TRAINER_TABLES } from './trainers.ts';
import { TRL_RULES } from './trl_rules.ts';
import { VERL_RULES } from './verl_rules.ts';
import { OPENRLHF_RULES } from './openrlhf_rules.ts';
import { TrainerRefusal, type TrainerRule } from './trainer_rules.ts';
import type { TrainerId } from './types.ts';

// Each list reads its own trainer's resolved config and run; indexed by trainer they are one shape.
type AnyRule = TrainerRule<Record<string, unknown>, Record<string, unknown>>;
const RULES = { trl: TRL_RULES, verl: VERL_RULES, openrlhf: OPENRLHF_RULES } as unknown as Record<TrainerId, readonly AnyRule[]>;

/** The rules of one trainer, the trainer's own refusals first. */
function trainerRules(trainer: TrainerId): readonly AnyRule[] {
  return [...RULES[trainer].filter((r) => r.by === 'trainer'), ...RULES[trainer].filter((r) => r.by === 'studio')];
}

/**
 * The first rule `config` and `run` break, as a SettingsError naming its fields, or null. They are the values
 * the trainer's table resolves (parseTrlConfig / resolveSettings); a field left out takes the table's default.
 */
export function trainerRefusal(trainer: TrainerId, config: Record<string, unknown>, run: Record<string, unknown>): TrainerRefusal | null {
  const tables = TRAINER_TABLES[trainer];
  const c = { ...defaultsOf<Record<string, unknown>>(tables.config), ...config };
  const r = { ...defaultsOf<Record<string, unknown>>(tables.run), ...run };
  for (const rule of trainerRules(trainer)) {
    const text = rule.check(c, r);
    if (text !== null) return new TrainerRefusal(rule, text, rule.offer?.(c, r) ?? null);
  }
  return null;
}
