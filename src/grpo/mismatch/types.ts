// The train–inference mismatch explorer's shapes: what the sampler (vLLM, SGLang, the studio's own sampler)
// and the trainer said of the same sampled tokens, and what the analysis makes of it. One report type for
// the CLI (`grpo-studio mismatch`), the page's explorer and the offline report, so all three show the same
// numbers. Conventions, as the trainers write them:
//   log_ratio d = trainer − sampler = log π_train(x) − log π_sampler(x)   (TRL's vLLM IS ratio is exp(d);
//                 verl's rollout log-ratio old − rollout; OpenRLHF's exp(old − rollout))
//   k1 = −d,  k2 = d² / 2,  k3 = exp(d) − 1 − d   (verl rollout_corr_helper.py's rejection statistics:
//                 estimators of KL(π_sampler ‖ π_train) from tokens the sampler drew)
// Per-sequence values are means over the row's compared tokens (verl's seq_mean_*), plus the sum of d
// (the sequence IS log-weight TRL's sequence_* modes and verl's rollout_is = sequence use).

/** Which log-probs a side holds: the field of the batch, or a recompute with the loaded model. */
export type SideSource =
  | 'sampling_per_token_logps' // the sampler's (vLLM / SGLang / the studio's generate)
  | 'old_per_token_logps' // the trainer's, as dumped
  | 'recomputed' // the trainer's, recomputed with the loaded model (and its LoRA adapter, when loaded)
  | 'recomputed_base'; // recomputed with the adapter disabled (the base model)

/** One side's per-token log-probs of the sampled tokens, ragged like completion_ids. (B, C_i) */
export interface LogpSide {
  source: SideSource;
  logps: ArrayLike<number>[];
}

/** Everything the analysis reads. Row b's tokens are compared where loss_mask is 1 and both sides are finite. */
export interface MismatchInput {
  completion_ids: ArrayLike<number>[]; // (B, C_i)
  /** completion_mask × tool_mask: tool output was not sampled, so it is not compared. (B, C_i) */
  loss_mask: ArrayLike<number>[];
  /** 0 on tool-response tokens (turn boundaries of a multi-turn row); absent: single-turn rows. (B, C_i) */
  tool_mask?: ArrayLike<number>[];
  eos_token_ids: readonly number[];
  /** Token ids the tokenizer marks special (template tokens), beside EOS. */
  special_ids?: ReadonlySet<number>;
  sampler: LogpSide;
  trainer: LogpSide;
  /** The trainer side recomputed without the LoRA adapter: the adapter-missing diagnosis compares against it. */
  base?: LogpSide;
  /** Decodes one token id for the top-token list (the CLI's tokenizer, the page's vocabulary); absent: ids only. */
  tokenText?: (id: number) => string;
}

export interface MismatchOptions {
  /** Mean |d| of a row above which it counts as mismatched (the Doctor's logprob_threshold; default 0.05). */
  tolerance?: number;
  /** How many tokens the top list holds (default 20). */
  top?: number;
  /** Histogram bins (default 41). */
  bins?: number;
}

/** Exact quantiles (sorted order statistics) and moments of a set of values. */
export interface Summary {
  n: number;
  mean: number;
  mean_abs: number;
  std: number;
  min: number;
  max: number;
  /** p1, p5, p25, p50, p75, p95, p99 */
  q: Record<'p1' | 'p5' | 'p25' | 'p50' | 'p75' | 'p95' | 'p99', number>;
}

/** Equal-width bins over [lo, hi]; values outside are counted in under / over. */
export interface Histogram {
  lo: number;
  hi: number;
  counts: number[];
  under: number;
  over: number;
}

export interface Distribution {
  summary: Summary;
  histogram: Histogram;
}

export type Statistic = 'log_ratio' | 'k1' | 'k2' | 'k3';

/** One row's comparison. */
export interface RowMismatch {
  sample: number;
  tokens: number; // compared tokens
  mean: number; // mean d
  mean_abs: number;
  max_abs: number;
  sum: number; // Σ d: the sequence IS log-weight
  k3: number; // mean k3
}

/** A token where the two sides disagree most. */
export interface TopToken {
  sample: number;
  position: number; // index into the row's completion
  id: number;
  text?: string;
  /** Up to 4 tokens before and 2 after, the token itself in ⟦ ⟧ (only with tokenText). */
  context?: string;
  sampler_logp: number;
  trainer_logp: number;
  log_ratio: number;
  turn: number; // 1-based assistant turn (tool responses separate turns)
}

/** A token class of the breakdown: which tokens carry the mismatch. */
export interface ClassRow {
  id: string; // 'first' | 'special' | 'after_tool' | 'low_prob' | 'pos_<lo>_<hi>'
  label: string;
  tokens: number;
  mean: number;
  mean_abs: number;
  max_abs: number;
  /** Share of the batch's Σ|d| these tokens hold. */
  share: number;
}

/** Mismatch against the sampler's probability exp(sampler), in fixed bins. */
export interface ProbabilityBin {
  lo: number;
  hi: number;
  tokens: number;
  mean: number;
  mean_abs: number;
}

/** One row a diagnosis names, with what it found there. */
export interface DiagnosisRow {
  sample: number;
  /** Where the pattern sits in the row (the first divergent token, …), when it has a place. */
  position?: number;
  turn?: number;
  /** The row's number behind the diagnosis (offset, shift gain, …), named by the diagnosis' `value` text. */
  value: number;
}

/** A diagnosis that fired: the cause named, its evidence in numbers, the rows it explains. */
export interface Diagnosis {
  id: DiagnosisId;
  title: string;
  /** One line of evidence with the numbers (the docs give the formula behind it). */
  evidence: string;
  /** What to check or change in the trainer / sampler setup. */
  fix: string;
  rows: DiagnosisRow[];
}

export type DiagnosisId = 'adapter-missing-on-sampler' | 'off-by-one' | 'divergence' | 'sampler-renormalised' | 'temperature-one-side' | 'stale-policy';

export interface MismatchReport {
  sampler: SideSource;
  trainer: SideSource;
  rows: number;
  /** Compared tokens (loss mask 1, both sides finite). */
  tokens: number;
  /** Loss tokens skipped because a side is NaN / ±inf there. */
  nonfinite: number;
  tolerance: number;
  token: Record<Statistic, Distribution>;
  /** Per-row means of each statistic, plus log_ratio_sum (Σ d per row). */
  sequence: Record<Statistic | 'log_ratio_sum', Distribution>;
  per_row: RowMismatch[];
  top: TopToken[];
  classes: ClassRow[];
  by_probability: ProbabilityBin[];
  diagnoses: Diagnosis[];
  /** With a base side: mean |d| of the sampler against the trainer with and without the adapter. */
  adapter?: { with_adapter_mean_abs: number; base_mean_abs: number };
}
