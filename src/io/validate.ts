// The one validator of a parsed grpo-batch/v1, called before any number is computed by every CLI verb
// (doctor, score, step), the worker and the page: element types, value ranges (masks ∈ {0,1}, ids in
// [0, 2^31) as in every container and inside the vocabulary, pad/EOS ids valid, rows within the model's
// positions), config values, and — for a computation that consumes them — finiteness where the trainer
// would produce NaN. Every problem is a finding naming field, sample and position; nothing throws, nothing
// is padded or cut. The Doctor lists the findings (exit 1); a computation stops on the first error with
// `assertComputable` (InputError, exit 2).
// Per-token length mismatches belong to the Doctor's mask-length-mismatch rule, non-finite values of a
// batch only inspected to its nonfinite rule; linear in the batch size, no spread of big arrays.
import type { Finding } from './findings.ts';
import { validateConfig } from './validate_config.ts';
import { PER_SAMPLE_FIELDS, PER_TOKEN_FIELDS, type GrpoBatch } from './batch.ts';
import { isTokenId, TOKEN_ID_RANGE } from './safetensors.ts';
import { shown } from './shown.ts';

export { validateConfig } from './validate_config.ts';

const HINT = 'Fix the exporter so the batch follows grpo-batch/v1 (docs/trl-export.md).';

/** What the batch will be used for, and what is known of the model that will read it. */
export interface ValidateOptions {
  /** Token ids, pad_token_id and eos_token_ids must lie in [0, vocab_size). */
  vocab_size?: number;
  /** The model's positions (GPT-2 n_positions, max_position_embeddings): the padded prompt + completion must fit. */
  max_positions?: number;
  /**
   * "inspect" (the Doctor: report only), "score" (log-probs of the ids), "step" (a GRPO update: also the
   * advantages or rewards and every per-token log-prob it reads must be finite).
   */
  purpose?: 'inspect' | 'score' | 'step';
}

/** A batch a computation cannot use, in one line naming field, sample and position. CLI: exit 2. */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InputError';
  }
}

/** Index of the first element failing `bad` (a loop, not findIndex over a copy: rows may hold 400k tokens). */
function firstBad<T>(row: readonly T[], bad: (x: T) => boolean): number {
  for (let i = 0; i < row.length; i++) if (bad(row[i])) return i;
  return -1;
}

/** A token id (the rule every container shares: isTokenId) inside the vocabulary when one is known. */
const isId = (id: unknown, V: number | undefined) => isTokenId(id) && (V === undefined || id < V);

export function validateBatch(batch: GrpoBatch, opts: ValidateOptions = {}): Finding[] {
  const out: Finding[] = [];
  const err = (field: string, message: string, sample?: number, pos?: number) =>
    out.push({ rule: 'schema', severity: 'error', field, sample, span: pos === undefined ? undefined : [pos, pos + 1], message, hint: HINT });
  const B = batch.completion_ids.length;
  const G = batch.num_generations;
  const V = opts.vocab_size;
  const notId = `is not ${V !== undefined && V <= TOKEN_ID_RANGE.max + 1 ? `a token id in [0, ${V})` : TOKEN_ID_RANGE.what}`;

  if (B === 0) err('completion_ids', 'the batch has no samples');
  if (!batch.group_ids && B % G !== 0) err('num_generations', `${B} samples is not a multiple of num_generations = ${G}: groups cannot be formed (give group_ids for a slice)`);
  const sizes = new Map<number, number>();
  batch.group_ids?.forEach((g, i) => {
    if (!Number.isInteger(g)) err('group_ids', `group_ids[${i}] = ${shown(g)} is not an integer label`, i);
    else if (sizes.set(g, (sizes.get(g) ?? 0) + 1).get(g) === G + 1) err('group_ids', `group ${g} has more than num_generations = ${G} rows (sample ${i} is row ${G + 1})`, i);
  });
  if (batch.prompt_ids.length !== B) err('prompt_ids', `prompt_ids has ${batch.prompt_ids.length} rows, completion_ids has ${B}`);
  if (batch.eos_token_ids.length === 0) err('eos_token_ids', 'eos_token_ids is empty: completion masks cannot be checked');
  batch.eos_token_ids.forEach((id, i) => {
    if (!isId(id, V)) err('eos_token_ids', `eos_token_ids[${i}] = ${shown(id)} ${notId}`);
  });
  if (!isId(batch.pad_token_id, V)) err('pad_token_id', `pad_token_id = ${shown(batch.pad_token_id)} ${notId}`);

  for (const field of ['prompt_ids', 'completion_ids'] as const) {
    batch[field].forEach((row, b) => {
      const t = firstBad(row, (id) => !isId(id, V));
      if (t >= 0) err(field, `${field}[${b}][${t}] = ${shown(row[t])} ${notId}`, b, t);
    });
  }
  if (opts.max_positions !== undefined) checkPositions(batch, opts.max_positions, err);

  const rowCount = (field: string, rows: unknown[] | undefined, expected: number[], what: string) => {
    if (rows && !expected.includes(rows.length)) err(field, `${field} has ${rows.length} entries, expected ${expected.join(' or ')} (${what})`);
  };
  for (const f of PER_TOKEN_FIELDS) rowCount(f, batch[f], [B], 'one row per sample');
  rowCount('prompt_mask', batch.prompt_mask, [batch.prompt_ids.length], 'one row per prompt_ids row');
  for (const f of PER_SAMPLE_FIELDS) rowCount(f, batch[f], [B], 'one per sample');
  rowCount('messages', batch.messages, [B, B / G].filter(Number.isInteger), 'one conversation per sample or per prompt');

  for (const f of ['completion_mask', 'tool_mask', 'prompt_mask', 'effective_loss_mask'] as const) {
    batch[f]?.forEach((row, b) => {
      const t = firstBad(row, (m) => m !== 0 && m !== 1);
      if (t >= 0) err(f, `${f}[${b}][${t}] = ${shown(row[t])}: masks hold 0 or 1`, b, t);
    });
  }
  const numeric = (field: string, values: unknown[], sample?: number) => {
    const t = firstBad(values, (v) => typeof v !== 'number');
    // A flat per-sample field (rewards, advantages) names its sample; reward_weights index functions, not samples.
    const at = sample ?? (field === 'reward_weights' ? undefined : t);
    if (t >= 0) err(field, `${field}${sample === undefined ? '' : `[${sample}]`}[${t}] = ${JSON.stringify(values[t])} is not a number`, at, sample === undefined ? undefined : t);
  };
  for (const f of ['rewards', 'advantages', 'reward_weights'] as const) if (batch[f]) numeric(f, batch[f]!);
  for (const f of ['rewards_per_func', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps', 'per_token_advantages'] as const) {
    batch[f]?.forEach((row, b) => numeric(f, row, b));
  }
  if (batch.rewards_per_func) {
    const F = batch.reward_weights?.length ?? batch.rewards_per_func[0]?.length ?? 0;
    batch.rewards_per_func.forEach((row, b) => {
      if (row.length !== F) err('rewards_per_func', `rewards_per_func[${b}] has ${row.length} reward functions, expected ${F}${batch.reward_weights ? ' (length of reward_weights)' : ''}`, b);
    });
  }
  batch.messages?.forEach((conv, i) => {
    if (!Array.isArray(conv) || conv.some((m) => !m || typeof m.role !== 'string' || (typeof m.content !== 'string' && m.content !== undefined && !Array.isArray(m.content)))) {
      err('messages', `messages[${i}] is not a list of {role, content} messages`, i);
    }
  });
  for (const [key, v] of Object.entries(batch.metrics ?? {})) if (typeof v !== 'number') err(`metrics.${key}`, `metrics.${key} = ${JSON.stringify(v)} is not a number`);
  for (const [field, message] of validateConfig(batch.config, batch.trainer ?? 'trl', batch.run)) err(field, message);
  if (opts.purpose === 'step') checkStepInputs(batch, err);
  return out;
}

/** The padded sequence (widest prompt + widest completion) must fit the model's position table. */
function checkPositions(batch: GrpoBatch, maxPositions: number, err: (field: string, message: string, sample?: number, pos?: number) => void): void {
  let P = 0;
  let C = 0;
  let cAt = 0;
  for (const row of batch.prompt_ids) P = Math.max(P, row.length);
  batch.completion_ids.forEach((row, b) => {
    if (row.length > C) [C, cAt] = [row.length, b];
  });
  if (P + C > maxPositions) {
    const at = Math.max(0, maxPositions - P);
    err('completion_ids', `prompt width ${P} + completion width ${C} = ${P + C} tokens exceeds the model's ${maxPositions} positions (n_positions / max_position_embeddings); sample ${cAt} reaches position ${maxPositions} at completion token ${at}`, cAt, at);
  }
}

/**
 * What a GRPO update reads must be finite: a NaN advantage or log-prob makes the trainer's loss NaN
 * (even under mask 0: NaN · 0 = NaN), so the step stops instead of printing a number TRL would not.
 */
function checkStepInputs(batch: GrpoBatch, err: (field: string, message: string, sample?: number, pos?: number) => void): void {
  const finite = (field: string, values: readonly number[] | undefined) => {
    const t = values ? firstBad(values, (v) => typeof v === 'number' && !Number.isFinite(v)) : -1;
    if (t >= 0) err(field, `${field}[${t}] = ${values![t]} is not finite: the loss would be NaN`, t);
  };
  finite('advantages', batch.advantages);
  if (!batch.advantages && !batch.per_token_advantages) finite('rewards', batch.rewards);
  for (const f of ['old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps', 'per_token_advantages'] as const) {
    batch[f]?.some((row, b) => {
      const t = firstBad(row, (v) => typeof v === 'number' && !Number.isFinite(v));
      if (t < 0) return false;
      const m = batch.completion_mask[b]?.[t];
      err(f, `${f}[${b}][${t}] = ${row[t]} (completion_mask ${m ?? 'missing'}) is not finite: the loss would be NaN`, b, t);
      return true;
    });
  }
}

/** What a model imposes on a batch: its vocabulary, and positions only when they are a learned table (GPT-2; RoPE extrapolates as in HF). */
export function modelLimits(cfg: { vocab_size: number; max_position_embeddings: number; rope_theta: number | null }): Pick<ValidateOptions, 'vocab_size' | 'max_positions'> {
  return { vocab_size: cfg.vocab_size, max_positions: cfg.rope_theta === null ? cfg.max_position_embeddings : undefined };
}

/**
 * Stops a computation on a batch it cannot use: throws InputError with the first error finding
 * (`source: field[sample][position] = value ...`). Call it before any number is computed, and again
 * once the model is known (vocab_size, max_positions).
 */
export function assertComputable(batch: GrpoBatch, opts: ValidateOptions, source = 'batch'): void {
  const errors = validateBatch(batch, opts).filter((f) => f.severity === 'error');
  // The first error stops the computation; the count tells the user the Doctor has the rest.
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more error${errors.length > 2 ? 's' : ''}: run the Doctor for all)` : '';
  if (errors.length) throw new InputError(`${source}: ${errors[0].message}${more}`);
}
