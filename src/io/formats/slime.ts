// slime: the rollout dump of `--save-debug-rollout-data PATH` (or `--dump-details DIR`, which sets it to
// DIR/rollout_data/{rollout_id}.pt) — THUDM/slime at 624b824, slime/ray/rollout.py RolloutManager.generate calls
// save_debug_rollout_data (slime/observability/rollout_data_utils.py), which writes
// torch.save({"rollout_id": rollout_id, "samples": [sample.to_dict() for sample in data]}, path): a pickle, which
// this TypeScript side does not unpickle. What is read is the same dict as JSON, written by the one line in
// docs/import/slime.md (tensors and arrays as lists, NaN / Infinity as Python's json writes them).
// Facts honoured from slime/utils/types.py Sample and RolloutManager._convert_samples_to_train_data:
// - `tokens` is prompt + response, unpadded; the response is the last `response_length` tokens;
// - `loss_mask` covers the response only (length response_length; 0 on tool / environment tokens of a multi-turn
//   rollout; None = all 1; `remove_sample` = all 0); `rollout_log_probs` are the inference engine's log-probs of the
//   response tokens, one per response token;
// - `group_index` names the prompt a sample belongs to; `reward` is a float, or a dict read through --reward-key;
// - advantages are not in the dump: slime computes them at train time ((r − group mean) / (std + 1e-6), Bessel
//   std, with its default --rewards-normalization and GRPO std normalization, _post_process_rewards), the
//   formula the studio calls verl's. Its groups are not group_index: when the sample count is
//   n_samples_per_prompt × rollout_batch_size it normalises consecutive blocks of n_samples_per_prompt, otherwise
//   the whole batch as one group (a rollout split into several training samples sharing a `rollout_id`, or
//   groups of unequal size). The dump carries neither argument: slimeGroups reads them from the samples;
// - no pad / EOS id is written and there is no padding.
import { BatchFormatError, parsePythonJson, type GrpoBatch } from '../batch.ts';
import { shown } from '../shown.ts';
import { completionRows, intOf, labelsFromKeys, noLossSettings, tokenIds, turnEnds, type ImportOptions, type ImportResult } from './common.ts';
import { floatList, intList, type Fail } from './json_rows.ts';

/** Sample.to_dict() keys (every dataclass field, status / spec_info / prefix_cache_info as dicts). */
const MAPPED = ['group_index', 'index', 'tokens', 'response_length', 'loss_mask', 'rollout_log_probs', 'reward', 'remove_sample'];
const KNOWN_UNMAPPED = ['rollout_id', 'prompt', 'multimodal_inputs', 'multimodal_train_inputs', 'multimodal_train_input_id', 'apply_chat_template_kwargs', 'response', 'label', 'weight_versions', 'rollout_top_p_token_ids', 'rollout_top_p_token_offsets', 'rollout_routed_experts', 'teacher_log_probs', 'status', 'metadata', 'generate_function_path', 'custom_rm_path', 'train_metadata', 'session_id', 'non_generation_time', 'spec_info', 'prefix_cache_info'];

/**
 * A JSON object with the dump's keys: "samples" beside "rollout_id" (the dict save_debug_rollout_data writes), or
 * beside Sample dicts' "tokens" and "response_length". Detected by its keys, not by their values: a file that is
 * clearly this dump is read here even when "samples" is empty or not a list, and read() names what is wrong.
 */
export function detect(text: string): boolean {
  return /^\s*\{/.test(text) && /"samples"\s*:/.test(text) && (/"rollout_id"\s*:/.test(text) || (text.includes('"response_length"') && text.includes('"tokens"')));
}

type Rec = Record<string, unknown>;

export function read(text: string, file: string, opts: ImportOptions): ImportResult {
  const fail: Fail = (msg) => {
    throw new BatchFormatError(`${file}: ${msg}`);
  };
  let top: unknown;
  try {
    top = parsePythonJson(text, file);
  } catch (e) {
    if (e instanceof BatchFormatError) throw e;
    fail(`not valid JSON (${(e as Error).message.split('\n')[0]})`);
  }
  if (top === null || typeof top !== 'object' || Array.isArray(top)) fail('top level must be the dump\'s dict {"rollout_id", "samples"}');
  const dump = top as Rec;
  if (!Array.isArray(dump.samples) || dump.samples.length === 0) fail(`"samples" must be a non-empty list of Sample dicts, got ${Array.isArray(dump.samples) ? 'an empty list' : dump.samples === null ? 'null' : typeof dump.samples}`);
  const samples = dump.samples as unknown[];
  samples.forEach((s, b) => {
    if (s === null || typeof s !== 'object' || Array.isArray(s)) fail(`samples[${b}] is not a Sample dict`);
  });
  const recs = samples as Rec[];
  const notes: string[] = [];
  const at = (b: number, key: string) => `samples[${b}].${key} (sample ${b})`;

  const tokens = recs.map((r, b) => intList(fail, r.tokens, at(b, 'tokens'), 'ids'));
  const R = recs.map((r, b) => {
    const n = r.response_length;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > tokens[b].length) fail(`${at(b, 'response_length')} = ${JSON.stringify(n)} is not a length in [0, ${tokens[b].length}] (its tokens)`);
    return n as number;
  });
  const P = tokens.map((ids, b) => ids.length - R[b]);
  // loss_mask: over the response, None = all 1, remove_sample = all 0 (as _convert_samples_to_train_data does); any
  // other length is kept as read (slime asserts it equals response_length: the Doctor's mask-length-mismatch).
  const removed: number[] = [];
  const loss = recs.map((r, b) => {
    if (r.remove_sample === true) {
      removed.push(b);
      return new Array<number>(R[b]).fill(0);
    }
    return r.loss_mask === null || r.loss_mask === undefined ? new Array<number>(R[b]).fill(1) : intList(fail, r.loss_mask, at(b, 'loss_mask'), 'mask');
  });
  if (removed.length) notes.push(`remove_sample on sample(s) ${removed.join(', ')}: loss_mask all 0, as slime trains them`);
  if (recs.some((r) => r.loss_mask === null || r.loss_mask === undefined)) notes.push('loss_mask None on some samples: all 1 over the response, as slime fills it');
  const rows = completionRows(tokens, P, loss);
  const ends: number[] = [];
  rows.completion_ids.forEach((ids, b) => turnEnds(ids, loss[b], ends));
  const { pad_token_id, eos_token_ids, inferred } = tokenIds({ fail }, opts, [], { unpadded: true, turnEnds: ends }, notes);

  // Sample.group_index is an int (a numeric string as intOf reads one elsewhere): anything else would fall into a
  // group of its own, and the groups slime normalises over would silently change.
  const bad = recs.findIndex((r) => intOf(r.group_index) === undefined);
  if (bad >= 0) fail(`${at(bad, 'group_index')} is ${recs[bad].group_index === undefined ? 'absent' : shown(recs[bad].group_index)}, not an integer: slime's samples name their prompt by it, from which n_samples_per_prompt is read`);
  const { group_ids, G } = slimeGroups(recs, notes);
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: G,
    pad_token_id,
    eos_token_ids,
    ...rows,
    group_ids,
  };
  if (batch.tool_mask) notes.push('loss_mask has zeros inside responses (tool / environment tokens): kept as tool_mask');
  if (recs.some((r) => r.rollout_log_probs !== null && r.rollout_log_probs !== undefined)) {
    batch.sampling_per_token_logps = recs.map((r, b) => (r.rollout_log_probs === null || r.rollout_log_probs === undefined ? new Array<number>(R[b]).fill(NaN) : floatList(fail, r.rollout_log_probs, at(b, 'rollout_log_probs'))));
    notes.push('rollout_log_probs → sampling_per_token_logps (one per response token); the dump holds no trainer log-probs');
  }
  // Rewards: a float each; a dict (several reward keys) is read through --reward-key, which the dump does not carry.
  const dicts = recs.findIndex((r) => r.reward !== null && typeof r.reward === 'object');
  if (dicts >= 0) notes.push(`${at(dicts, 'reward')} is a dict (${Object.keys(recs[dicts].reward as object).join(', ')}): slime picks one by --reward-key, which the dump does not carry; rewards not carried`);
  else if (recs.some((r) => r.reward !== null && r.reward !== undefined)) {
    batch.rewards = recs.map((r, b) => {
      if (r.reward === null || r.reward === undefined) return NaN;
      if (typeof r.reward !== 'number') fail(`${at(b, 'reward')} = ${JSON.stringify(r.reward)} is not a number`);
      return r.reward as number;
    });
  }
  notes.push('no advantages in the dump: slime computes them at train time, (r − group mean) / (std + 1e-6) by default (recomputed here with verl\'s ε)');
  batch.config = { advantage_estimator: 'verl', scale_rewards: 'group', ...(typeof dump.rollout_id === 'number' ? { step: dump.rollout_id } : {}) };
  notes.push(noLossSettings(slimeLossNote(recs, loss)));
  const read = KNOWN_UNMAPPED.filter((k) => recs.some((r) => r[k] !== undefined && r[k] !== null));
  if (read.length) notes.push(`${read.slice(0, 8).join(', ')}${read.length > 8 ? `, … (${read.length})` : ''}: read, not part of grpo-batch/v1`);
  const unknownKeys = [
    ...Object.keys(dump).filter((k) => k !== 'rollout_id' && k !== 'samples'),
    ...new Set(recs.flatMap((r) => Object.keys(r)).filter((k) => !MAPPED.includes(k) && !KNOWN_UNMAPPED.includes(k)).map((k) => `samples[].${k}`)),
  ];
  return { batch, format: 'slime', trainer: 'slime (rollout dump)', unknownKeys, notes, inferred };
}

/**
 * What slime's loss reducer divides by (slime/backends/megatron_utils/loss.py loss_function, cp_utils.py
 * get_sum_of_sample_mean; slime/ray/rollout.py _convert_samples_to_train_data rollout_mask_sums), said beside the
 * studio's TRL default: without --calculate-per-token-loss each sample's masked token sum over its rollout's trained
 * tokens (every sample of a rollout_id together), summed and divided by the step's sample count — TRL's loss_type
 * grpo when each rollout is one sample, no TRL loss type when a rollout is split into several; with it, the token sum
 * over Σ max(trained tokens, 1) per sample — TRL's dapo unless a sample trains nothing (slime still counts it once).
 */
function slimeLossNote(recs: Rec[], loss: number[][]): string {
  const ids = recs.map((r) => r.rollout_id).filter((x) => x !== null && x !== undefined).map((x) => JSON.stringify(x));
  const split = new Set(ids).size < ids.length;
  const empty = loss.filter((m) => !m.some((v) => v !== 0)).length;
  const perSample = split
    ? "slime without --calculate-per-token-loss divides each sample's tokens by its whole rollout's trained tokens (a rollout here is split into samples sharing its rollout_id), then by the sample count: no TRL loss_type is that mean"
    : "slime without --calculate-per-token-loss averages each sample's tokens, then over samples (TRL loss_type grpo is that mean)";
  const perToken = empty
    ? `with it, the token sum over Σ max(trained tokens, 1) per sample: TRL's dapo counts no token for the ${empty} sample(s) that train none, slime counts 1 each`
    : "with it, the token sum over all trained tokens (TRL loss_type dapo)";
  return `${perSample}; ${perToken}`;
}

/**
 * The groups slime's _post_process_rewards normalises (slime/ray/rollout.py): consecutive blocks of
 * n_samples_per_prompt when the batch holds n_samples_per_prompt × rollout_batch_size samples, else the whole batch
 * as one group. Neither argument is in the dump; read from the samples: one training sample per rollout (each
 * `rollout_id` once; None falls back to a sample's own, as _convert_samples_to_train_data does) in groups of equal
 * size n is a batch of n × (its group count) samples — blocks of n; a rollout split into several samples, or groups
 * of unequal size, cannot be (the missing rollouts of a short group, the extra samples of a split one): one group.
 */
function slimeGroups(recs: Rec[], notes: string[]): { group_ids: number[]; G: number } {
  const B = recs.length;
  const byPrompt = labelsFromKeys(recs.map((r) => intOf(r.group_index))); // "1" and 1 are one prompt, as read()'s check takes them
  const sizes = new Map<number, number>();
  for (const g of byPrompt) sizes.set(g, (sizes.get(g) ?? 0) + 1);
  const n = Math.max(...sizes.values());
  const ids = recs.map((r) => r.rollout_id).filter((x) => x !== null && x !== undefined);
  const split = new Set(ids.map((x) => JSON.stringify(x))).size < ids.length;
  if (!split && [...sizes.values()].every((k) => k === n)) {
    const blocks = byPrompt.map((_, i) => Math.floor(i / n));
    const same = byPrompt.every((g, i) => byPrompt[blocks[i] * n] === g);
    notes.push(same
      ? `groups: ${sizes.size} of ${n} consecutive samples, one prompt (group_index) each; n_samples_per_prompt = ${n} and rollout_batch_size = ${sizes.size} read from them (the dump has neither)`
      : `groups: slime normalises consecutive blocks of ${n} samples (n_samples_per_prompt, read from the ${sizes.size} equal group_index groups), and these samples are not in group_index order: a block mixes prompts, as slime trains it`);
    return { group_ids: blocks, G: n };
  }
  notes.push(`groups: one over the whole batch of ${B}, as slime normalises it when the sample count is not n_samples_per_prompt × rollout_batch_size (${split ? 'a rollout split into several samples sharing its rollout_id' : `group_index groups of unequal size, ${[...new Set(sizes.values())].sort((a, b) => a - b).join(' / ')}`}; _post_process_rewards)`);
  return { group_ids: new Array<number>(B).fill(0), G: B };
}
