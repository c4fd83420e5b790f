// verl: the tensors of a DataProto after compute_advantage (volcengine/verl, verl/trainer/ppo/ray_trainer.py,
// RayPPOTrainer.fit; verl/trainer/ppo/core_algos.py, compute_grpo_outcome_advantage), saved by the user's
// hook with the non-tensor `uid` list in the metadata (docs/import/verl.md). Facts honoured:
// - `prompts` (B, P) is left-padded, `responses` (B, R) right-padded; attention_mask (B, P + R) covers
//   both, response_mask (B, R) is what the loss uses (0 on tool tokens in multi-turn rollouts);
// - groups are the rows sharing a uid, and _balance_batch (trainer.balance_batch, on by default) reorders
//   rows, so a group's rows are usually not adjacent: groups come from uid, never from row order;
// - GRPO's reward is token_level_rewards.sum(-1); advantages (B, R) = the scalar (r − mean) / (std + 1e-6)
//   (or r − mean when algorithm.norm_adv_by_std_in_grpo is false) times response_mask; a uid with one
//   row gets mean 0, std 1.
import type { BatchConfig, GrpoBatch } from '../batch.ts';
import { Dump, intOf, type Tensor2D, labelsFromKeys, largestGroup, row, rows, scalarAdvantages, splitLossMask, tokenIds, toolMasks, type ImportOptions, type ImportResult } from './common.ts';

const MAPPED = ['prompts', 'responses', 'input_ids', 'attention_mask', 'response_mask', 'advantages', 'old_log_probs', 'ref_log_prob', 'rollout_log_probs', 'token_level_rewards'];
const KNOWN_UNMAPPED = ['position_ids', 'returns', 'token_level_scores', 'values', 'entropys', 'rm_scores', 'response_length', 'prompt_length'];
const META = ['uid', 'config', 'metrics', 'pad_token_id', 'eos_token_id', 'eos_token_ids', 'format'];

export function detect(d: Dump): boolean {
  return d.has('responses') && d.has('prompts');
}

export function read(d: Dump, opts: ImportOptions): ImportResult {
  const notes: string[] = [];
  const prompts = d.ints('prompts');
  const responses = d.ints('responses');
  const B = responses.rows;
  const P = prompts.cols;
  const R = responses.cols;
  d.sameRows([...MAPPED, ...KNOWN_UNMAPPED], B, 'responses');
  const uid = d.meta('uid');
  if (!Array.isArray(uid)) d.fail('__metadata__ has no "uid" list: verl reorders rows (_balance_batch), so groups cannot be inferred from row order');
  if (uid.length !== B) d.fail(`__metadata__ "uid" has ${uid.length} entries, responses has ${B} rows`);
  const group_ids = labelsFromKeys(uid);
  const named = [...new Map(group_ids.map((g, b) => [g, uid[b]])).entries()];
  notes.push(`groups by uid (rows need not be adjacent): ${named.slice(0, 6).map(([g, u]) => `${g} = ${u}`).join(', ')}${named.length > 6 ? `, … (${named.length})` : ''}`);

  if (d.has('input_ids')) sameAsConcat(d, prompts, responses);
  const attention = d.has('attention_mask') ? d.ints('attention_mask') : undefined;
  if (attention && attention.cols !== P + R) d.fail(`attention_mask has ${attention.cols} columns, prompts + responses have ${P} + ${R} = ${P + R}`);
  const lossMask = d.has('response_mask') ? rows(d.ints('response_mask')) : attention ? Array.from({ length: B }, (_, b) => row(attention, b, P, P + R)) : d.fail('needs response_mask or attention_mask');
  if (!d.has('response_mask')) notes.push('no response_mask: using attention_mask[:, P:], as verl compute_response_mask does');
  const split = lossMask.map(splitLossMask);
  const completion_ids = rows(responses);
  const lastTrained = completion_ids.map((r, b) => r[lossMask[b].lastIndexOf(1)]).filter((x) => x !== undefined);
  const { pad_token_id, eos_token_ids } = tokenIds(opts, { pad: d.meta('pad_token_id'), eos: d.meta('eos_token_ids') ?? d.meta('eos_token_id') }, lastTrained, notes);

  const cfg = d.metaObject('config');
  const G = intOf(cfg.rollout_n) ?? largestGroup(group_ids);
  if (intOf(cfg.rollout_n) === undefined) notes.push(`no config.rollout_n: num_generations = ${G}, the largest uid group`);
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: G,
    pad_token_id,
    eos_token_ids,
    prompt_ids: rows(prompts),
    prompt_mask: attention ? Array.from({ length: B }, (_, b) => row(attention, b, 0, P)) : undefined,
    completion_ids,
    completion_mask: split.map((s) => s.completion_mask),
    tool_mask: toolMasks(split),
    group_ids,
  };
  if (batch.tool_mask) notes.push('response_mask has zeros inside responses (multi-turn tool tokens): kept as tool_mask');
  for (const [key, field] of [['old_log_probs', 'old_per_token_logps'], ['ref_log_prob', 'ref_per_token_logps'], ['rollout_log_probs', 'sampling_per_token_logps']] as const) {
    if (d.has(key)) batch[field] = rows(d.floats(key));
  }
  if (d.has('token_level_rewards')) {
    const r = d.floats('token_level_rewards');
    batch.rewards = Array.from({ length: B }, (_, b) => row(r, b).reduce((a, x) => a + x, 0));
  }
  if (d.has('advantages')) {
    batch.per_token_advantages = rows(d.floats('advantages'));
    batch.advantages = scalarAdvantages(batch.per_token_advantages, lossMask);
    if (!batch.advantages) notes.push('advantages vary within responses (not a GRPO outcome advantage): kept per token only');
  }
  batch.config = verlConfig(cfg);
  batch.metrics = d.metrics(); // e.g. verl "actor/kl_loss", OpenRLHF "kl": the Doctor's logged-kl rule
  for (const k of KNOWN_UNMAPPED) if (d.has(k)) notes.push(`${k}: read, not part of grpo-batch/v1`);
  const unknownKeys = [...d.st.tensors.keys()].filter((k) => !MAPPED.includes(k) && !KNOWN_UNMAPPED.includes(k));
  unknownKeys.push(...Object.keys(d.st.metadata).filter((k) => !META.includes(k)).map((k) => `__metadata__.${k}`));
  batch.trainer = 'verl';
  return { batch, format: 'verl', trainer: 'verl RayPPOTrainer', unknownKeys, notes };
}

/** verl's settings in the studio's names; the hook's own keys are kept alongside. */
function verlConfig(cfg: Record<string, unknown>): BatchConfig {
  const out: BatchConfig = { ...cfg, advantage_estimator: 'verl' };
  // norm_adv_by_std_in_grpo: false → A = r − mean, no std scaling.
  out.scale_rewards = cfg.norm_adv_by_std_in_grpo === false ? 'none' : 'group';
  if (typeof cfg.temperature === 'number') out.temperature = cfg.temperature;
  return out;
}

/** The model read input_ids; the batch is built from prompts ⧺ responses: they must be the same tokens. */
function sameAsConcat(d: Dump, prompts: Tensor2D<Int32Array>, responses: Tensor2D<Int32Array>): void {
  const ids = d.ints('input_ids');
  const P = prompts.cols;
  const L = P + responses.cols;
  if (ids.cols !== L) d.fail(`input_ids has ${ids.cols} columns, prompts + responses have ${P} + ${responses.cols} = ${L}`);
  for (let b = 0; b < ids.rows; b++) {
    for (let t = 0; t < L; t++) {
      const want = t < P ? prompts.data[b * P + t] : responses.data[b * responses.cols + t - P];
      if (ids.data[b * L + t] !== want) d.fail(`input_ids[${b}][${t}] = ${ids.data[b * L + t]}, but prompts ⧺ responses has ${want} there`);
    }
  }
}
