// NeMo-RL: the per-step training dump GRPO writes, train_data_step{N}.jsonl in the logger's log_dir
// (NVIDIA-NeMo/RL at 7ea279a, nemo_rl/algorithms/grpo.py grpo_train "Log training data" and async_grpo_train;
// the writer is nemo_rl/utils/logger.py Logger.log_batched_dict_as_jsonl). Facts honoured from those sources:
// - the driver builds log_data = {agent_ref?, content, rewards, filtered_rewards? (dynamic sampling), input_lengths,
//   token_ids, token_loss_mask, sample_loss_mask, advantages, generation_logprobs, prev_logprobs}, each .tolist()
//   of a (B, …) tensor, and the logger writes one line per sample from make_microbatch_iterator(1): every key holds
//   a list of ONE element (token_ids: [[… S ids]], rewards: [r]) plus "idx": i; an unwrapped line is read too;
// - token_ids (B, S) are the flattened message logs, right-padded with tokenizer.pad_token_id past input_lengths
//   (nemo_rl/data/llm_message_utils.py batched_message_log_to_flat_message; S rounded up to
//   make_sequence_length_divisible_by); token_loss_mask is 1 on generated assistant messages only
//   (add_grpo_token_loss_masks_and_generation_logprobs), 0 on the prompt, tool / environment turns and padding;
// - generation_logprobs and prev_logprobs are aligned with token_ids (column t scores token t; the policy prepends
//   0 for the first token, nemo_rl/models/policy/lm_policy.py get_logprobs), so the completion is a plain slice;
//   prev_logprobs are zeros when force_on_policy_ratio skips that forward;
// - advantages (B, S) = GRPOAdvantageEstimator's per-sample value expanded over every column
//   (nemo_rl/algorithms/advantage_estimator.py), with groups = rows of one unique prompt (torch.unique over
//   prompt ids, nemo_rl/algorithms/utils.py calculate_baseline_and_std_per_prompt): leave-one-out baseline and
//   Bessel std + 1e-6 by default (examples/configs/grpo_math_1B.yaml), std 0 left unscaled;
// - no pad / EOS id, no group id and no num_generations_per_prompt are written.
// Mapping: prompt = token_ids before the first trained token (a row with none: the prompt of the other rows that
// begins it, see promptEnds); completion = the rest of the row, padding included (so a mask over a pad is seen);
// groups = rows sharing that prompt; advantage = the value on the trained tokens (a row with none: the one value in
// all its columns); pad from the ids past input_lengths, EOS from a tokenizer or voted over trained spans (both said
// so in notes / inferred).
import { BatchFormatError, parsePythonJson, type BatchConfig, type GrpoBatch } from '../batch.ts';
import { completionRows, labelsFromKeys, largestGroup, noLossSettings, scalarAdvantages, tokenIds, turnEnds, type ImportOptions, type ImportResult } from './common.ts';
import { floatList, intList, jsonLines, numberAt, type Fail } from './json_rows.ts';

const PER_TOKEN = ['token_ids', 'token_loss_mask', 'advantages', 'generation_logprobs', 'prev_logprobs'];
const PER_SAMPLE = ['rewards', 'filtered_rewards', 'input_lengths', 'sample_loss_mask', 'content', 'agent_ref'];
const KNOWN = [...PER_TOKEN, ...PER_SAMPLE, 'idx'];

/** The first non-blank line is a JSON object with token_ids and token_loss_mask lists. */
export function detect(text: string): boolean {
  const start = text.search(/\S/);
  if (start < 0) return false;
  const end = text.indexOf('\n', start);
  const line = text.slice(start, end < 0 ? undefined : end);
  if (!line.includes('"token_loss_mask"')) return false;
  try {
    const r = parsePythonJson(line, 'line 1') as Record<string, unknown> | null;
    return r !== null && typeof r === 'object' && Array.isArray(r.token_ids) && Array.isArray(r.token_loss_mask);
  } catch {
    return false;
  }
}

export function read(text: string, file: string, opts: ImportOptions): ImportResult {
  const fail: Fail = (msg) => {
    throw new BatchFormatError(`${file}: ${msg}`);
  };
  const records = jsonLines(text, file, fail);
  const notes: string[] = [];
  // log_batched_dict_as_jsonl slices the batch one row at a time: each key holds a one-element list.
  const wrapped = Array.isArray((records[0].r.token_ids as unknown[])[0]);
  const field = ({ line, r }: (typeof records)[number], key: string): unknown => {
    const v = r[key];
    if (!wrapped || v === undefined) return v;
    if (!Array.isArray(v) || v.length !== 1) fail(`line ${line}: "${key}" holds ${Array.isArray(v) ? `${v.length} elements` : JSON.stringify(v)}, expected one (log_batched_dict_as_jsonl writes one sample per line)`);
    return v[0];
  };
  const at = (b: number, key: string) => `line ${records[b].line}: ${key}`;
  const tokens = records.map((rec, b) => intList(fail, field(rec, 'token_ids'), `${at(b, 'token_ids')} (sample ${b})`, 'ids'));
  const loss = records.map((rec, b) => intList(fail, field(rec, 'token_loss_mask'), `${at(b, 'token_loss_mask')} (sample ${b})`, 'mask'));
  // input_lengths: each row's real length; token_ids past it are the tokenizer's pad.
  const lengths = records.map((rec, b) => {
    const v = field(rec, 'input_lengths');
    if (v === undefined) return tokens[b].length;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > tokens[b].length) fail(`${at(b, 'input_lengths')} = ${JSON.stringify(v)} is not a length in [0, ${tokens[b].length}] (the row's token_ids)`);
    return v as number;
  });
  if (records.some((rec) => rec.r.input_lengths === undefined)) notes.push('no input_lengths: rows taken as unpadded (no pad to read)');
  records.forEach((rec, b) => {
    if (rec.r.idx !== undefined && rec.r.idx !== b) notes.push(`line ${rec.line}: idx ${JSON.stringify(rec.r.idx)} is not its row ${b}: rows kept in file order`);
  });

  const P = promptEnds(tokens, loss, lengths, (b) => `${at(b, 'token_loss_mask')} (sample ${b})`, fail, notes);
  const completionMasks = loss.map((m, b) => m.slice(P[b]));
  const rows = completionRows(tokens, P, completionMasks, lengths);
  const ends: number[] = [];
  rows.completion_ids.forEach((ids, b) => turnEnds(ids, completionMasks[b], ends));
  const padIds: number[] = [];
  tokens.forEach((ids, b) => {
    for (let t = lengths[b]; t < ids.length; t++) padIds.push(ids[t]);
  });
  const { pad_token_id, eos_token_ids, inferred } = tokenIds({ fail }, opts, [], padIds.length ? { masked: { mask: 'token_ids past input_lengths', ids: padIds }, turnEnds: ends } : { unpadded: true, turnEnds: ends }, notes);

  // Groups: NeMo-RL's baseline is per unique prompt (torch.unique over the prompt ids), wherever its rows sit.
  const group_ids = labelsFromKeys(rows.prompt_ids.map((p) => p.join(',')));
  const G = largestGroup(group_ids);
  notes.push(`groups by prompt ids (NeMo-RL's calculate_baseline_and_std_per_prompt): ${new Set(group_ids).size} group(s); num_generations = ${G}, the largest (the file has no num_generations_per_prompt)`);
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: G,
    pad_token_id,
    eos_token_ids,
    ...rows,
    group_ids,
  };
  if (batch.tool_mask) notes.push('token_loss_mask has zeros inside completions (tool / environment turns): kept as tool_mask');

  const whole = (key: string) => (records.every((rec) => rec.r[key] === undefined) ? undefined : records.map((rec, b) => floatList(fail, field(rec, key), `${at(b, key)} (sample ${b})`)));
  const floats = (key: string) => whole(key)?.map((row, b) => row.slice(P[b]));
  const gen = floats('generation_logprobs');
  if (gen) batch.sampling_per_token_logps = gen;
  const prev = floats('prev_logprobs');
  if (prev && prev.every((row, b) => row.every((v, t) => completionMasks[b][t] !== 1 || v === 0))) notes.push('prev_logprobs are 0 on every trained token (force_on_policy_ratio skips that forward): not carried');
  else if (prev) batch.old_per_token_logps = prev;
  if (gen || prev) notes.push('generation_logprobs → sampling_per_token_logps, prev_logprobs → old_per_token_logps (both aligned with token_ids: a plain slice)');

  const perSample = (key: string) => (records.every((rec) => rec.r[key] === undefined) ? undefined : records.map((rec, b) => numberAt(fail, field(rec, key), at(b, key))));
  const rewards = perSample('filtered_rewards') ?? perSample('rewards');
  if (perSample('filtered_rewards')) notes.push('dynamic sampling: filtered_rewards (what the advantages were computed from) → rewards; "rewards" (total_reward) read, not carried');
  let config: BatchConfig = {};
  let carryRewards = true;
  const adv = whole('advantages');
  if (adv) {
    batch.per_token_advantages = adv.map((row, b) => row.slice(P[b]));
    batch.advantages = sampleAdvantages(adv, loss, batch.per_token_advantages, completionMasks, notes);
    if (batch.advantages && rewards) ({ config, carryRewards } = estimator(rewards, batch.advantages, group_ids, notes));
  }
  if (rewards && carryRewards) batch.rewards = rewards;
  const sampleMask = (b: number): number => {
    const m = numberAt(fail, field(records[b], 'sample_loss_mask'), at(b, 'sample_loss_mask'));
    // NeMo-RL multiplies each token's mask by it: another value is a weight on the row, which a 0/1 completion_mask cannot hold.
    if (m !== 0 && m !== 1) fail(`${at(b, 'sample_loss_mask')} (sample ${b}) = ${m}: NeMo-RL weights the row's loss tokens by it (token_loss_mask × sample_mask), and grpo-batch/v1 holds 0 or 1`);
    return m;
  };
  const excluded = records.flatMap((rec, b) => (rec.r.sample_loss_mask === undefined || sampleMask(b) === 1 ? [] : [b]));
  // NeMo-RL's loss takes token_mask × sample_mask (NVIDIA-NeMo/RL nemo_rl/algorithms/loss_functions.py ClippedPGLossFn): a row with
  // sample_loss_mask 0 is no loss token at all, so its completion_mask is that product (else `step` would train on it).
  for (const b of excluded) batch.completion_mask[b] = batch.completion_mask[b].map(() => 0);
  if (excluded.length) notes.push(`sample_loss_mask is 0 on row(s) ${excluded.slice(0, 8).join(', ')}${excluded.length > 8 ? ', …' : ''}: NeMo-RL leaves them out of the loss (token_loss_mask × sample_mask): their completion_mask is 0`);
  const read = ['content', 'agent_ref'].filter((k) => records.some((rec) => rec.r[k] !== undefined));
  if (read.length) notes.push(`${read.join(', ')}: read, not part of grpo-batch/v1`);
  notes.push(noLossSettings('NeMo-RL\'s GRPO examples use reference_policy_kl_penalty 0.01 (k3, beta) with a token-level mean'));
  const step = /train_data_step(\d+)\.jsonl$/.exec(file);
  batch.config = { ...config, ...(step ? { step: Number(step[1]) } : {}) };
  const unknownKeys = [...new Set(records.flatMap((rec) => Object.keys(rec.r)))].filter((k) => !KNOWN.includes(k));
  return { batch, format: 'nemo-rl', trainer: 'NeMo-RL GRPO (train_data_step jsonl)', unknownKeys, notes, inferred };
}

/**
 * Each row's prompt length: the ids before its first trained token, NeMo-RL's initial prompt messages (the first
 * generated assistant message follows them; grpo.py extract_initial_prompt_messages → prompt_ids_for_adv). A row
 * with no trained token (nemo_rl/experience/rollouts.py appends a generation of zero tokens as it comes) has no such
 * boundary, yet NeMo-RL groups it with its prompt all the same. Its prompt is read from the other rows: any row of
 * its group with a trained token has the prompt, a prefix of this row's ids (before input_lengths), so
 * - one distinct prompt of the other rows begins it: that is its prompt (its group);
 * - two or more begin it (one prompt extends another): undeterminable, refused in one line;
 * - none begins it: all of its group, if any, are such rows too; its prompt is taken as its whole ids (what it is
 *   after an empty generation), so identical rows are one group. Two such rows that differ yet share their first id
 *   could be one prompt's or two: refused in one line.
 */
function promptEnds(tokens: number[][], loss: number[][], lengths: number[], where: (b: number) => string, fail: Fail, notes: string[]): number[] {
  const P = loss.map((m) => m.indexOf(1));
  const byPrompt = new Map<string, number>(); // one row per distinct prompt of the rows with a trained token
  P.forEach((p, b) => {
    if (p >= 0 && !byPrompt.has(tokens[b].slice(0, p).join(','))) byPrompt.set(tokens[b].slice(0, p).join(','), b);
  });
  const prompts = [...byPrompt.values()];
  const joined: number[] = [];
  const alone: number[] = [];
  P.forEach((p, b) => {
    if (p >= 0) return;
    const begins = prompts.filter((c) => P[c] <= lengths[b] && tokens[c].slice(0, P[c]).every((id, t) => tokens[b][t] === id));
    if (begins.length > 1) fail(`${where(b)} has no trained token, and its ids begin with the prompts of samples ${begins.slice(0, 4).join(', ')} (${begins.slice(0, 4).map((c) => `${P[c]} ids`).join(', ')}): which is its prompt, so its group (NeMo-RL's calculate_baseline_and_std_per_prompt), cannot be told`);
    if (begins.length === 1) {
      P[b] = P[begins[0]];
      joined.push(b);
    } else {
      P[b] = lengths[b];
      alone.push(b);
    }
  });
  const firstOf = new Map<number, number>(); // first id → the first such row
  for (const b of alone) {
    const c = firstOf.get(tokens[b][0]);
    if (c === undefined) firstOf.set(tokens[b][0], b);
    else if (tokens[c].slice(0, lengths[c]).join(',') !== tokens[b].slice(0, lengths[b]).join(',')) {
      fail(`${where(b)} has no trained token, nor has sample ${c}, and no other row's prompt begins either: they share id ${tokens[b][0]} at position 0 but differ after, so whether they are one prompt's (one group) cannot be told`);
    }
  }
  const list = (rows: number[]) => `${rows.slice(0, 8).join(', ')}${rows.length > 8 ? ', …' : ''}`;
  if (joined.length) notes.push(`sample(s) ${list(joined)}: no trained token; grouped with the rows whose prompt ids begin theirs (NeMo-RL groups by the prompt, trained or not)`);
  if (alone.length) notes.push(`sample(s) ${list(alone)}: no trained token, and no other row's prompt begins theirs: each row's ids are its prompt (an empty generation), identical rows one group`);
  return P;
}

/**
 * One advantage per row, or undefined (kept per token only) when a row's trained tokens vary (message-level
 * penalties overwrite assistant spans: grpo.py _apply_message_level_advantage_penalties). A row with trained tokens
 * takes their value, what the loss trains on. A row with none takes the value GRPOAdvantageEstimator wrote in every
 * column (advantage_estimator.py `advantages.expand(mask.shape)`), the prompt included, which must be one value:
 * the loss never reads it, but it is the row's share of its group's baseline and std.
 */
function sampleAdvantages(whole: number[][], loss: number[][], perToken: number[][], completionMasks: number[][], notes: string[]): number[] | undefined {
  const out = scalarAdvantages(perToken, completionMasks);
  if (!out) {
    notes.push('advantages vary within completions (message-level penalties): kept per token only');
    return undefined;
  }
  for (let b = 0; b < whole.length; b++) {
    if (loss[b].includes(1)) continue;
    const t = whole[b].findIndex((v) => v !== whole[b][0]);
    if (t < 0) out[b] = whole[b][0];
    else {
      notes.push(`sample ${b} has no trained token and its advantages are not one value (${whole[b][0]} at position 0, ${whole[b][t]} at ${t}; NeMo-RL's GRPO writes the sample's value in every column): kept per token only`);
      return undefined;
    }
  }
  return out;
}

/** float32 as the trainer computes; the Doctor's advantage-mismatch tolerances. */
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-4 + 1e-3 * Math.abs(b);

/**
 * NeMo-RL's GRPO advantage for every row (calculate_baseline_and_std_per_prompt with valid_mask = 1, then
 * GRPOAdvantageEstimator): baseline = group mean, or the mean of the other rows with leave_one_out; std = the
 * Bessel std of the same rows, (E[x²] − E[x]²)·k/(k − 1) (nan → 0: one other row, k = 1); a group of one row gets
 * baseline = its reward; normalize divides by std + 1e-6 where std > 0. The std is taken in two passes, and is
 * exactly 0 where the rows are equal — the formula's value. NeMo-RL's float32 one-pass form leaves 0 there or a
 * cancellation residue (√ of a few ulps: ~1e-4 for rewards 0.9 or 0.55) that it then divides by (equalOthers).
 */
export function nemoAdvantages(rewards: readonly number[], groups: readonly number[], leaveOneOut: boolean, normalize: boolean): number[] {
  const rows = new Map<number, number[]>();
  groups.forEach((g, b) => rows.set(g, [...(rows.get(g) ?? []), b]));
  const out = new Array<number>(rewards.length).fill(0);
  for (const idx of rows.values()) {
    if (idx.length <= 1) continue; // baseline = reward: advantage 0
    for (const b of idx) {
      const xs = (leaveOneOut ? idx.filter((j) => j !== b) : idx).map((j) => rewards[j]); // (k)
      const k = xs.length;
      const base = xs.reduce((s, x) => s + x, 0) / k;
      const equal = xs.every((x) => x === xs[0]);
      const std = k < 2 || equal ? 0 : Math.sqrt(xs.reduce((s, x) => s + (x - base) ** 2, 0) / (k - 1));
      const a = rewards[b] - base;
      out[b] = normalize && std > 0 ? a / (std + 1e-6) : a;
    }
  }
  return out;
}

/** Rows whose leave-one-out rows (two or more) all hold one reward: NeMo-RL's float32 std there is 0 or cancellation noise. */
export function equalOthers(rewards: readonly number[], groups: readonly number[]): boolean[] {
  return rewards.map((_, b) => {
    const xs = rewards.filter((__, j) => j !== b && groups[j] === groups[b]);
    return xs.length >= 2 && xs.every((x) => x === xs[0]);
  });
}

/**
 * Which of NeMo-RL's GRPO settings (use_leave_one_out_baseline × normalize_rewards; the file carries neither) the
 * advantages follow. Without leave-one-out they are verl's formula (Bessel std + 1e-6): rewards and advantages are
 * carried and the Doctor recomputes them. With leave-one-out, which the Doctor does not recompute, the reader checks
 * them here and carries the advantages without the rewards (else advantage-mismatch would be a false error); the note
 * says so. Matching none: both carried, for the Doctor to report (the note names other estimators and clipping,
 * which the file does not tell apart from a wrong row).
 */
function estimator(rewards: number[], advantages: number[], groups: number[], notes: string[]): { config: BatchConfig; carryRewards: boolean } {
  // Leave-one-out, normalised, over equal other rewards: NeMo-RL divides r − baseline by its float32 cancellation
  // residue (or by nothing, when that is 0), so the advantage is r − baseline or larger, of its sign.
  const noisy = equalOthers(rewards, groups);
  const amplified = (a: number, ref: number) => ref !== 0 && Math.sign(a) === Math.sign(ref) && Math.abs(a) >= Math.abs(ref) * (1 - 1e-3);
  const fits = (loo: boolean, norm: boolean) => {
    const ref = nemoAdvantages(rewards, groups, loo, norm);
    return advantages.every((a, b) => close(a, ref[b]) || (loo && norm && noisy[b] && amplified(a, ref[b])));
  };
  for (const norm of [true, false]) {
    if (fits(false, norm)) {
      notes.push(`advantages follow NeMo-RL GRPO with use_leave_one_out_baseline = false, normalize_rewards = ${norm} ((r − mean)${norm ? ' / (std + 1e-6)' : ''}, verl's formula)`);
      return { config: { advantage_estimator: 'verl', scale_rewards: norm ? 'group' : 'none' }, carryRewards: true };
    }
  }
  for (const norm of [true, false]) {
    if (fits(true, norm)) {
      const ref = nemoAdvantages(rewards, groups, true, norm);
      const blown = advantages.map((_, b) => b).filter((b) => norm && noisy[b] && !close(advantages[b], ref[b]));
      if (blown.length) notes.push(`row(s) ${blown.slice(0, 6).join(', ')}${blown.length > 6 ? ', …' : ''}: the other rewards of the group are all equal, so NeMo-RL's std is 0 in exact arithmetic, yet the advantage is ${advantages[blown[0]]} where r − baseline is ${ref[blown[0]]}: NeMo-RL's float32 (E[x²] − E[x]²) left a cancellation residue and divided by it (calculate_baseline_and_std_per_prompt) — the trainer trained on that value`);
      notes.push(`rewards not carried: the advantages follow NeMo-RL's leave-one-out baseline (use_leave_one_out_baseline = true, normalize_rewards = ${norm}; nemo_rl/algorithms/utils.py calculate_baseline_and_std_per_prompt), checked by the reader on all ${advantages.length} rows; the Doctor's advantage-mismatch recomputes (r − mean) / (std + ε) only, so carrying the rewards would raise a false error`);
      return { config: { advantage_estimator: 'verl', scale_rewards: norm ? 'group' : 'none' }, carryRewards: false };
    }
  }
  // NeMo-RL writes this file for other estimators too (adv_estimator gdpo or reinforce_plus_plus, clipped
  // advantages) and the file does not name them: a wrong row and another formula look alike here, so the Doctor
  // reports them and the note names the possibility.
  notes.push('advantages follow no NeMo-RL GRPO setting (leave-one-out on / off × normalize_rewards on / off) from these rewards: carried as read for the Doctor to compare with (r − mean) / (std + 1e-6) — if the run used another adv_estimator (gdpo, reinforce_plus_plus) or clipped advantages, its findings are that, not a bug');
  return { config: { advantage_estimator: 'verl', scale_rewards: 'group' }, carryRewards: true };
}
