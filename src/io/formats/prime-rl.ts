// prime-rl: the per-sequence JSONL the trainer writes with `enable_token_export = true`
// (PrimeIntellect-ai/prime-rl, src/prime_rl/trainer/rl/token_export.py; one file per step and rank,
// token_exports/step_<step>/rank_<rank>.jsonl). Facts honoured from that writer and train.py:
// - every column is aligned with token_ids (prompt + completion of one sequence, padding trimmed);
//   trainer log-probs and entropy were shifted right by one in train.py (shift_tensor_right), so
//   column t already scores token t and the completion is a plain slice of every column;
// - non-finite floats are written as null, and columns the run did not compute are all null (a line re-saved with
//   Python's json, NaN / Infinity as bare words, is read as the grpo-batch reader reads them: parsePythonJson);
// - loss_mask is 0 on the prompt and on tool / environment tokens;
// - a record carries no group id and no pad / EOS id: the batch gets num_generations 1 (no groups; said so),
//   and pad / EOS come from a tokenizer when given, else are inferred (said so in notes).
import { BatchFormatError, parsePythonJson, type GrpoBatch } from '../batch.ts';
import { completionRows, noLossSettings, scalarAdvantages, tokenIds, turnEnds, type ImportOptions, type ImportResult } from './common.ts';
import { intList, jsonLines, listAt } from './json_rows.ts';

/** Record keys of schema_version 1: mapped, or read and listed as not carried. */
const MAPPED = { trainer_logprobs: 'old_per_token_logps', inference_logprobs: 'sampling_per_token_logps', advantages: 'per_token_advantages' } as const;
const KNOWN = ['schema_version', 'step', 'rank', 'micro_step', 'micro_sequence_idx', 'export_sequence_idx', 'env_name', 'token_ids', 'position_ids', 'loss_mask', 'entropy', 'mismatch_kl', 'log_importance_ratio', 'importance_ratio', 'prob_delta', 'is_masked', 'is_masked_high', 'is_masked_low', 'rl_weights', 'ce_weights', 'ref_kl_weights', ...Object.keys(MAPPED)];

type Record_ = Record<string, unknown>;

/**
 * The first non-blank line is a JSON object with the keys token_ids and loss_mask (blank lines are skipped, as read()
 * does). Detected by its keys, not by their values: a record whose token_ids is not a list is still this export,
 * and read() names the field.
 */
export function detect(text: string): boolean {
  const start = text.search(/\S/);
  if (start < 0) return false;
  const end = text.indexOf('\n', start);
  const line = text.slice(start, end < 0 ? undefined : end);
  try {
    const r = parsePythonJson(line, 'line 1') as Record<string, unknown> | null;
    return r !== null && typeof r === 'object' && !Array.isArray(r) && 'token_ids' in r && 'loss_mask' in r;
  } catch {
    return false;
  }
}

export function read(text: string, file: string, opts: ImportOptions): ImportResult {
  const fail = (msg: string): never => {
    throw new BatchFormatError(`${file}: ${msg}`);
  };
  const records = jsonLines(text, file, fail).map(({ r }) => r);
  const notes: string[] = [];
  const list = (r: Record_, key: string, b: number): unknown[] => listAt(fail, r[key], `record ${b}: ${key}`);
  // Whole numbers, exactly: token ids in [0, 2^31), loss_mask values in int32. loss_mask may be true / false (the
  // writer's .tolist() of a bool tensor); a boolean or string among token ids, or any string, is refused by position.
  const ints = (r: Record_, key: string, b: number, kind: 'ids' | 'mask') => intList(fail, list(r, key, b), `record ${b}: ${key}`, kind, b);
  const floats = (r: Record_, key: string, b: number) => list(r, key, b).map((v) => (v === null ? NaN : (v as number)));

  const tokens = records.map((r, b) => ints(r, 'token_ids', b, 'ids'));
  const loss = records.map((r, b) => ints(r, 'loss_mask', b, 'mask'));
  // Prompt = tokens before the first trained token; a loss_mask of another length keeps its length. A record with no
  // trained token (a sample the orchestrator masked out) does not say where its prompt ends: it is all prompt, its
  // completion empty, so nothing is trained, as in prime-rl, and no finding rests on a guessed split (an empty prompt,
  // a completion holding prompt tokens). Its prompt ends where the shorter of token_ids and loss_mask ends, so a
  // length mismatch stays in the completion for the Doctor to name.
  const untrained = loss.flatMap((m, b) => (m.includes(1) ? [] : [b]));
  const P = loss.map((m, b) => (m.includes(1) ? m.indexOf(1) : Math.min(m.length, tokens[b].length)));
  if (untrained.length) notes.push(`record(s) ${untrained.slice(0, 8).join(', ')}${untrained.length > 8 ? ', …' : ''}: no trained token (loss_mask all 0), so where the prompt ends is not recorded: taken as all prompt, nothing trained`);
  // prime-rl's RL loss trains loss_mask & (rl_weights != 0) and counts those tokens (trainer/rl/loss.py
  // compute_loss): rl_weights 0 marks a distillation (CE) sample's tokens and, with filter_zero_advantages, the
  // zero-advantage tokens. Those leave the loss mask here (a zero inside a completion becomes tool_mask 0, which
  // the loss leaves out the same way).
  // A null column or entry is the default (token_export.py: "None columns mean the defaults (rl 1.0 on the loss mask").
  const rl = records.map((r, b) => (r.rl_weights === undefined || r.rl_weights === null ? null : list(r, 'rl_weights', b).map((v) => (v === null ? 1 : (v as number)))));
  let [unweighted, fractional] = [0, 0];
  const completionLoss = loss.map((m, b) => m.slice(P[b]).map((v, t) => {
    const w = rl[b]?.[P[b] + t];
    if (v !== 1 || w === undefined) return v;
    if (w === 0) unweighted++;
    else if (w !== 1) fractional++;
    return w === 0 ? 0 : v;
  }));
  if (unweighted) notes.push(`rl_weights: ${unweighted} trained token(s) with rl_weight 0 (a CE / distillation sample, or a zero advantage filtered) are out of the loss mask, as prime-rl's RL loss leaves them out`);
  if (fractional) notes.push(`rl_weights: ${fractional} trained token(s) weighted other than 0 or 1: the studio's loss does not weight tokens, prime-rl's does`);
  const ce = records.filter((r) => Array.isArray(r.ce_weights) && (r.ce_weights as unknown[]).some((v) => typeof v === 'number' && v !== 0)).length;
  if (ce) notes.push(`ce_weights: ${ce} record(s) carry a cross-entropy (distillation) loss the studio does not compute`);
  const refKl = records.filter((r) => Array.isArray(r.ref_kl_weights) && (r.ref_kl_weights as unknown[]).some((v) => typeof v === 'number' && v !== 0)).length;
  if (refKl) notes.push(`ref_kl_weights: ${refKl} record(s) weight a reference-KL term the studio does not take from them`);
  const rows = completionRows(tokens, P, completionLoss);
  // EOS: voted over every assistant turn's last trained token, not only each record's last: a multi-turn export's
  // final turns are often cut by the length limit (their last token is any text), while every finished turn ends with
  // the EOS. Pad: the writer trims padding (token_export.py _trim_padding), so the rows hold none.
  const ends: number[] = [];
  rows.completion_ids.forEach((ids, b) => turnEnds(ids, loss[b].slice(P[b]), ends)); // the writer's turns, before rl_weights
  const { pad_token_id, eos_token_ids, inferred } = tokenIds({ fail }, opts, [], { unpadded: true, turnEnds: ends }, notes);
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: 1,
    pad_token_id,
    eos_token_ids,
    ...rows,
  };
  if (batch.tool_mask) notes.push(`loss_mask has zeros inside completions (tool / environment tokens${unweighted ? ', and rl_weight 0' : ''}): kept as tool_mask`);
  for (const [key, field] of Object.entries(MAPPED) as [keyof typeof MAPPED, (typeof MAPPED)[keyof typeof MAPPED]][]) {
    const cols = records.map((r, b) => (r[key] === undefined ? undefined : floats(r, key, b)));
    if (cols.every((c) => c === undefined || c.every(Number.isNaN))) continue; // not computed in this run
    batch[field] = cols.map((c, b) => (c ?? []).slice(P[b]));
  }
  if (batch.per_token_advantages) {
    batch.advantages = scalarAdvantages(batch.per_token_advantages, completionLoss);
    if (!batch.advantages) notes.push('advantages vary within completions: kept per token only');
  }
  notes.push('prime-rl records carry no group id: every sequence is its own group (num_generations = 1), so group rules see single samples');
  notes.push('trainer_logprobs → old_per_token_logps, inference_logprobs → sampling_per_token_logps (both already aligned with token_ids)');
  notes.push(noLossSettings("prime-rl's default loss (DPPO-Binary TV mask on the probability change, + kl_tau · (trainer − inference log-prob)², summed: src/prime_rl/trainer/rl/loss.py default_loss_fn) is none the studio computes"));
  const read = ['entropy', 'mismatch_kl', 'importance_ratio', 'is_masked'].filter((k) => records.some((r) => Array.isArray(r[k]) && (r[k] as unknown[]).some((v) => v !== null)));
  if (read.length) notes.push(`${read.join(', ')}: read, not part of grpo-batch/v1`);
  const steps = [...new Set(records.map((r) => r.step))];
  batch.config = { step: steps.length === 1 ? steps[0] : steps, rank: records[0].rank };
  const unknownKeys = [...new Set(records.flatMap((r) => Object.keys(r)))].filter((k) => !KNOWN.includes(k));
  return { batch, format: 'prime-rl', trainer: 'prime-rl (token export)', unknownKeys, notes, inferred };
}
