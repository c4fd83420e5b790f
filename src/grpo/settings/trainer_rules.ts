// The shape of a cross-field rule: a combination of settings that each pass their own row of a trainer's
// table (type, range, allowed values) but that the trainer itself refuses at start-up or on its first step,
// or that the studio cannot reproduce from one batch. Each trainer's rules are a list beside its table
// (trl_rules.ts, verl_rules.ts, openrlhf_rules.ts); rules.ts runs them (trainerRefusal).
import { SettingsError } from './types.ts';

export interface TrainerRule<C, R> {
  /**
   * The fields the rule reads, as `config.NAME` / `run.NAME`. The first is the one the refusal is filed
   * under (the message starts with it); the message names the others.
   */
  fields: readonly string[];
  /**
   * trainer: the trainer raises (the message quotes its reason). studio: the trainer runs, but what it
   * computes needs values one batch does not hold, so the studio refuses rather than give another number.
   */
  by: 'trainer' | 'studio';
  /** The refusal's text after the field, or null when the values are fine. Reads the table's resolved values. */
  check(config: C, run: R): string | null;
  /** Where the trainer makes the check or the computation (repository path and function). */
  source: string;
  /**
   * Values that satisfy the rule where the trainer's own configs set one (verl's examples set the micro-batch
   * size its dataclass leaves null): the page offers them beside the refusal, never applies them unasked.
   */
  offer?(config: C, run: R): Record<string, unknown> | null;
}

/** A rule's refusal: a SettingsError (CLI exit 2) that also carries the fields, the source and who refuses. */
export class TrainerRefusal extends SettingsError {
  readonly fields: readonly string[];
  readonly source: string;
  readonly by: 'trainer' | 'studio';
  /** Config values that would satisfy the rule (TrainerRule.offer), or null. */
  readonly offer: Record<string, unknown> | null;
  constructor(rule: { fields: readonly string[]; source: string; by: 'trainer' | 'studio' }, text: string, offer: Record<string, unknown> | null = null) {
    super(`${rule.fields[0]}: ${text}${offer ? ` (e.g. ${Object.entries(offer).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(', ')})` : ''} [${rule.source}]`);
    this.fields = rule.fields;
    this.source = rule.source;
    this.by = rule.by;
    this.offer = offer;
  }
}
