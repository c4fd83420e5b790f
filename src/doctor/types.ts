// The Doctor's vocabulary: a finding (one problem, located by sample and token span), a rule (one bug
// class, with the real debugging report that motivated it), and the report the CLI and UI render.
import type { GrpoBatch, InferredIds, ScaleRewards } from '../io/batch.ts';
import type { Finding, Severity } from '../io/findings.ts';
import type { GroupStats } from '../grpo/advantages.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { ProvenRow } from '../io/turns.ts';

export type { Finding, Severity } from '../io/findings.ts';

export interface RuleInfo {
  id: string;
  title: string;
  /** The most severe level the rule reports. */
  severity: Severity;
  /** The bug class, in one or two sentences. */
  description: string;
  /** The debugging report (shared/seeds/*.txt) or source that motivated it. */
  seed: string;
  needsTokenizer?: boolean;
  /** Needs the vocabulary size of the batch's model (its config.json, else its tokenizer). */
  needsVocabulary?: boolean;
}

/** What the Doctor knows beside the batch. The page and the CLI derive them with doctorOptions (src/doctor/tokenizer_fit.ts). */
export interface DoctorOptions {
  /** Enables retokenization-mismatch and template-mismatch, names tokens in messages, bounds the ids. Pass only one that fits the batch. */
  tokenizer?: Tokenizer;
  /** Why the tokenizer at hand was not passed (it does not fit the batch): the tokenizer rules are skipped with it. */
  tokenizer_unfit?: string;
  /** HF model_type of the policy (overrides batch.config.model_type), for position-ids-shift. */
  model_type?: string;
  /** Position ids the scorer uses (overrides batch.config.position_ids). */
  position_ids?: 'from_attention_mask' | 'arange';
  /** The vocabulary of the batch's model (else the tokenizer's), for token-out-of-vocabulary. */
  vocab_size?: number;
  /** For learned positions, the model's n_positions: the padded rows must fit (see modelLimits in src/io/validate.ts). */
  max_positions?: number;
  /**
   * Skip the rules that need the tokenizer (they decode and re-encode every row: seconds on a big batch)
   * with this reason; the caller runs the full Doctor afterwards (the page, after an import is shown).
   */
  defer_tokenizer_rules?: string;
  /** logprob-mismatch fires when mean |Δ| exceeds this (default 0.05) or max |Δ| exceeds 20× it. */
  logprob_threshold?: number;
  /**
   * Ids the importer inferred rather than read (from the dump's metadata or a tokenizer), each with what it
   * was inferred from (the reader's note). Findings that depend on an inferred id are warnings naming it,
   * never errors (src/doctor/padding.ts inferredCaveat).
   */
  inferred?: InferredIds;
}

/** What every rule sees: the batch plus facts derived once. */
export interface DoctorContext {
  batch: GrpoBatch;
  B: number;
  G: number;
  pad: number;
  eos: Set<number>;
  padIsEos: boolean;
  /** Per completion row: index of the first EOS or −1. */
  firstEos: number[];
  /** Per completion row: end (exclusive) of the real tokens: first EOS + 1, else before trailing pads. */
  realEnd: number[];
  scaleRewards: ScaleRewards;
  /** Rows of each group (group_ids, else G consecutive rows) and whether it holds all G rows. */
  groups: { rows: number[][]; complete: boolean[] };
  options: DoctorOptions;
}

export interface Rule extends RuleInfo {
  /** Returns findings, or a string saying why the rule could not run on this batch (reported as skipped). */
  check(ctx: DoctorContext): Finding[] | string;
}

export interface DoctorReport {
  findings: Finding[];
  skipped: { rule: string; reason: string }[];
  /** Reward statistics per group, when rewards are present. */
  groups?: GroupStats[];
  counts: Record<Severity, number>;
  /** Per sample, the turns the round-trip proof found (src/doctor/turns.ts provenTurns), for the grid; absent where no row was proven. */
  turns?: Record<number, ProvenRow>;
}
