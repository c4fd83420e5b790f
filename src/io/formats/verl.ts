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
// Settings (the rows of src/grpo/settings/verl.ts, in its leaf names) come from three places, mapped once here:
// - `config` as the docs' hook writes it: flat leaf names (rollout_n, loss_agg_mode, …), kept as written;
// - `config` as verl holds it, OmegaConf.to_container(config, resolve=True) of the driver's config (layout of
//   verl/trainer/config/_generated_ppo_trainer.yaml at b178a3c): NESTED below maps each path to its leaf
//   (actor_rollout_ref.actor.policy_loss.loss_mode → loss_mode, algorithm.rollout_correction.* → rollout_*,
//   actor_rollout_ref.rollout.temperature → temperature, trainer.use_legacy_worker_impl, …). A key that spells a
//   path with dots ("actor_rollout_ref.rollout.temperature": 0.7, as a flattened dict writes it) is that path, as
//   the nested form. The actor's batch sizes are the driver's normalised as verl/workers/fsdp_workers.py
//   ActorRolloutRefWorker.__init__ does (actorBatchSizes). Other nested fields are counted in notes, not carried;
// - `meta_info` (DataProto.meta_info as the dump saves it): temperature (ray_trainer.py sets it from
//   actor_rollout_ref.rollout.temperature; dp_actor.py reads it), pad / EOS ids, global_steps (→ run.global_steps,
//   the lr schedule's position).
// A leaf (or a path, nested and dotted) given at two of these places with different values is an error naming
// both. `run` (the run context of VERL_RUN) is carried as written, as the TRL reader does. A grpo-batch/v1 file of
// trainer verl whose config is in this layout is mapped by the same function (settingsOfConfig, layoutKey).
import type { BatchConfig, GrpoBatch } from '../batch.ts';
import { configTable, runTable } from '../../grpo/settings/effective.ts';
import { VERL_SETTINGS } from '../../grpo/settings/verl.ts';
import { groupFormulaOf } from '../../grpo/settings/group_formula.ts';
import { parseSettings, rowsIn } from '../../grpo/settings/table.ts';
import { SettingsError } from '../../grpo/settings/types.ts';
import { redoneCorrectionGap, type RolloutCorrectionSettings } from '../../grpo/settings/verl_rollout.ts';
import { configLeaves, Dump, flatKey, intOf, isPlainObject, LeafValues, type Tensor2D, labelsFromKeys, largestGroup, row, rows, scalarAdvantages, splitLossMask, tokenIds, toolMasks, turnEnds, type ImportOptions, type ImportResult } from './common.ts';

const MAPPED = ['prompts', 'responses', 'input_ids', 'attention_mask', 'response_mask', 'advantages', 'old_log_probs', 'ref_log_prob', 'rollout_log_probs', 'token_level_rewards'];
const KNOWN_UNMAPPED = ['position_ids', 'returns', 'token_level_scores', 'values', 'entropys', 'rm_scores', 'response_length', 'prompt_length', 'rollout_is_weights'];
const META = ['uid', 'config', 'meta_info', 'run', 'metrics', 'pad_token_id', 'eos_token_id', 'eos_token_ids', 'format'];

const A = 'actor_rollout_ref.actor.';
/** The actor's batch sizes: normalised from the driver's by actorBatchSizes, not read as written. */
const NORMALISED = new Set(['ppo_mini_batch_size', 'ppo_micro_batch_size_per_gpu']);
/** verl's nested config path → the table's leaf: each row's `path` (src/grpo/settings/verl.ts), and rollout.n (the group size). */
const NESTED: ReadonlyMap<string, string> = new Map([
  ...VERL_SETTINGS.filter((s) => s.path && !NORMALISED.has(s.name)).map((s) => [s.path!, s.name] as const),
  ['actor_rollout_ref.rollout.n', 'rollout_n'],
]);
/** Every row a verl batch's config may hold (verl's own, the studio's, the run context importers put in config). */
const ROWS = [...configTable('verl'), ...runTable('verl')];
/** Row names, some dotted themselves (optim.clip_grad, model.override_config): such a key is the row, never a path. */
const ROW_NAMES = new Set<string>(ROWS.map((s) => s.name));
/** Object rows (model.override_config, the studio's optimizer), by flat name or nested path: carried whole, not split into leaves. */
const OBJECT_ROWS = ROWS.filter((s) => s.type === 'object');
const OBJECT_NAMES = new Set<string>(OBJECT_ROWS.map((s) => s.name));
const OBJECT_PATHS = new Set<string>(OBJECT_ROWS.flatMap((s) => (s.path ? [s.path] : [])));
/** Nested paths actorBatchSizes reads (the sizes and what normalises them). */
const SIZES = [`${A}ppo_mini_batch_size`, `${A}ppo_micro_batch_size`, `${A}ppo_micro_batch_size_per_gpu`, `${A}ulysses_sequence_parallel_size`, `${A}strategy`, 'trainer.nnodes', 'trainer.n_gpus_per_node'];
/** The top-level groups of verl's config the reader reads paths under (actor_rollout_ref, algorithm, trainer). */
const ROOTS = new Set([...NESTED.keys(), ...SIZES].map((p) => p.split('.')[0]));

/**
 * A config key in verl's own layout rather than a row's name: an object or a dotted path under one of the groups
 * the reader reads (ROOTS). src/io/formats/index.ts maps a grpo-batch/v1 file's such keys with settingsOfConfig.
 */
export function layoutKey(k: string): boolean {
  return !ROW_NAMES.has(k) && ROOTS.has(k.split('.')[0]);
}

export function detect(d: Dump): boolean {
  return d.has('responses') && d.has('prompts');
}

/**
 * A response's masks from what verl's forward attends: completion_mask = attention_mask[:, P:] (the tokens the
 * actor's forward sees, and what use_dynamic_bsz counts), tool_mask = response_mask inside it (0 on attended tokens
 * verl does not train: tool output, and a rollout cut inside a tool response, whose attended tail lies past the
 * last trained token). A trained token the forward does not attend has no place in a grpo-batch/v1 row: refused.
 */
function attendedSplit(d: Dump, loss: number[], attended: number[], b: number): { completion_mask: number[]; tool_mask?: number[] } {
  const t = loss.findIndex((m, k) => m !== 0 && attended[k] === 0);
  if (t >= 0) d.fail(`response_mask trains sample ${b}, response position ${t}, where attention_mask is 0: verl's forward does not attend it, and a grpo-batch/v1 completion_mask cannot say both`);
  return splitLossMask(loss, (k) => attended[k] !== 0);
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
  const split = attention ? lossMask.map((m, b) => attendedSplit(d, m, row(attention, b, P, P + R), b)) : lossMask.map((m) => splitLossMask(m));
  const completion_ids = rows(responses);
  const ends: number[] = [];
  completion_ids.forEach((r, b) => turnEnds(r, lossMask[b], ends));
  const metaInfo = d.metaObject('meta_info');
  // Pad: the prompts' masked-out positions (verl left-pads prompts with the tokenizer's pad, attention_mask 0 there).
  const masked: number[] = [];
  if (attention) for (let b = 0; b < B; b++) for (let t = 0; t < P; t++) if (attention.data[b * (P + R) + t] === 0) masked.push(prompts.data[b * P + t]);
  const { pad_token_id, eos_token_ids, inferred } = tokenIds(d, opts, [
    { kind: 'pad', where: 'pad_token_id', value: d.meta('pad_token_id') },
    { kind: 'pad', where: 'meta_info.pad_token_id', value: metaInfo.pad_token_id },
    { kind: 'eos', where: 'eos_token_ids', value: d.meta('eos_token_ids') },
    { kind: 'eos', where: 'eos_token_id', value: d.meta('eos_token_id') },
    { kind: 'eos', where: 'meta_info.eos_token_id', value: metaInfo.eos_token_id },
  ], { masked: attention && { mask: 'attention_mask[:, :P]', ids: masked }, turnEnds: ends }, notes);

  const leaves = verlSettings(d, d.metaObject('config'), metaInfo, notes);
  const cfg = leaves.object();
  const n = leaves.groupSize('rollout_n');
  const G = n ?? largestGroup(group_ids);
  if (n === undefined) notes.push(`no config.rollout_n: num_generations = ${G}, the largest uid group`);
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
  if (batch.tool_mask) notes.push('attended response tokens response_mask does not train (multi-turn tool output, a rollout cut inside a tool response): kept as tool_mask');
  // use_dynamic_bsz packs rows by attention_mask.sum(-1) (verl/utils/seqlen_balancing.py), which the batch carries as
  // prompt_mask ⧺ completion_mask; without attention_mask the prompts' left padding would count as tokens.
  if (cfg.use_dynamic_bsz === true && !attention) d.fail('no attention_mask, and use_dynamic_bsz packs micro-batches by attention_mask.sum(-1): without it the prompts\' left padding counts as tokens; save attention_mask with the batch');
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
  // verl adds rollout_is_weights to the batch only when algorithm.rollout_correction.rollout_is is set
  // (verl/trainer/ppo/rollout_corr_helper.py compute_rollout_correction_and_add_to_batch), and its policy loss
  // multiplies by them. The step recomputes them from old_log_probs and rollout_log_probs under that row
  // (src/grpo/settings/verl_rollout.ts); a dump carrying them with rollout_is null (left out, the table's default)
  // would be stepped without the weights verl trained on, so it is refused, naming the row.
  if (d.has('rollout_is_weights') && (cfg.rollout_is ?? null) === null) {
    d.fail(`rollout_is_weights is present, so verl weighted this batch's loss by rollout IS weights, but config rollout_is is ${cfg.rollout_is === null ? 'null' : 'left out (null, the default)'}: give algorithm.rollout_correction.rollout_is (token or sequence) and rollout_is_threshold as the run set them`);
  }
  rolloutCorrectionOfDump(d, cfg, lossMask, B, R);
  const run = d.metaObject('run');
  // The schedule position: meta_info.global_steps where the hook's batch carries it (ray_trainer.py sets it on the
  // generation batch), else run.global_steps as written; two different values are an error naming both.
  if (metaInfo.global_steps !== undefined) {
    if (run.global_steps !== undefined && run.global_steps !== metaInfo.global_steps) d.fail(`__metadata__ run.global_steps ${JSON.stringify(run.global_steps)} differs from meta_info.global_steps ${JSON.stringify(metaInfo.global_steps)}`);
    run.global_steps = metaInfo.global_steps;
  }
  if (Object.keys(run).length) batch.run = run;
  batch.metrics = d.metrics(); // e.g. verl "actor/kl_loss", OpenRLHF "kl": the Doctor's logged-kl rule
  for (const k of KNOWN_UNMAPPED) if (d.has(k)) notes.push(k === 'rollout_is_weights' ? `rollout_is_weights: not carried; the step recomputes them from old_log_probs and rollout_log_probs under rollout_is ${String(cfg.rollout_is)}, as verl does` : `${k}: read, not part of grpo-batch/v1`);
  const unknownKeys = [...d.st.tensors.keys()].filter((k) => !MAPPED.includes(k) && !KNOWN_UNMAPPED.includes(k));
  unknownKeys.push(...Object.keys(d.st.metadata).filter((k) => !META.includes(k)).map((k) => `__metadata__.${k}`));
  unknownKeys.push(...Object.keys(run).filter((k) => !runTable('verl').some((s) => s.name === k)).map((k) => `__metadata__.run.${k}`));
  batch.trainer = 'verl';
  return { batch, format: 'verl', trainer: 'verl RayPPOTrainer', unknownKeys, notes, inferred, group_keys: uid };
}

/**
 * The table's leaves of a grpo-batch/v1 config in verl's layout (layoutKey): what a dump's `config` gives (verlSettings),
 * without meta_info, which such a file does not have. `d` names the file in errors.
 */
export function settingsOfConfig(d: Dump, cfg: Record<string, unknown>, notes: string[]): Record<string, unknown> {
  return verlSettings(d, cfg, {}, notes).object();
}

/**
 * The table's leaves from the dump's `config` (rows by name, kept as written; verl's nested config and its dotted
 * paths through NESTED) and `meta_info`, each with where it was read; a leaf, or a path, two places give
 * differently is an error naming both (LeafValues).
 */
function verlSettings(d: Dump, cfg: Record<string, unknown>, metaInfo: Record<string, unknown>, notes: string[]): LeafValues {
  const leaves = new LeafValues(d);
  // Paths of verl's nested layout: an object's leaves and a dotted key spelling the same path are one value.
  const paths = new LeafValues(d);
  for (const [k, v] of Object.entries(cfg)) {
    if (OBJECT_NAMES.has(k) || (ROW_NAMES.has(k) && !isPlainObject(v)) || (!k.includes('.') && !isPlainObject(v))) leaves.set(k, flatKey(k), v);
    else if (isPlainObject(v) && !OBJECT_PATHS.has(k)) for (const [p, x] of configLeaves(d, v, (path) => OBJECT_PATHS.has(path), `${k}.`)) paths.set(p, `config.${p}`, x);
    else paths.set(k, flatKey(k), v);
  }
  const nested = new Map([...paths.values].map(([p, { value }]) => [p, value]));
  const whereOf = (p: string) => paths.values.get(p)?.where ?? `config.${p}`;
  // OptimizerConfig.__post_init__: a deprecated optim.grad_clip that is set replaces optim.clip_grad (with a warning).
  const oldClip = nested.get(`${A}optim.grad_clip`);
  if (oldClip !== undefined && oldClip !== null) {
    nested.delete(`${A}optim.grad_clip`);
    nested.set(`${A}optim.clip_grad`, oldClip);
    notes.push(`config.${A}optim.grad_clip (deprecated) is set: read as optim.clip_grad, as verl's OptimizerConfig does`);
  } else nested.delete(`${A}optim.grad_clip`);
  const unread: string[] = [];
  for (const [p, v] of nested) {
    if (typeof v === 'string' && v.startsWith('${') && (NESTED.has(p) || SIZES.includes(p))) d.fail(`__metadata__ config.${p} = ${JSON.stringify(v)} is an unresolved interpolation: save OmegaConf.to_container(config, resolve=True)`);
    // build_optimizer passes override_optimizer_config's kwargs to the optimizer (eps, …): none is reproduced.
    if (p.startsWith(`${A}optim.override_optimizer_config.`)) d.fail(`__metadata__ config.${p}: override_optimizer_config is not reproduced by the studio (the actor's AdamW takes lr, betas, weight_decay and eps 1e-8 only)`);
    const leaf = NESTED.get(p);
    if (leaf !== undefined) leaves.set(leaf, whereOf(p), v);
    else if (!SIZES.includes(p)) unread.push(p);
  }
  actorBatchSizes(d, nested, leaves, notes);
  if (metaInfo.temperature !== undefined) leaves.set('temperature', 'meta_info.temperature', metaInfo.temperature);
  const otherInfo = Object.keys(metaInfo).filter((k) => !['temperature', 'pad_token_id', 'eos_token_id', 'global_steps'].includes(k));
  if (otherInfo.length) notes.push(`meta_info: ${otherInfo.join(', ')} read, not used`);
  if (unread.length) notes.push(`config: ${unread.length} nested field(s) the studio does not read, not carried (${unread.slice(0, 4).join(', ')}${unread.length > 4 ? ', …' : ''})`);
  return leaves;
}

/**
 * The actor's batch sizes as dp_actor.py reads them (the table's ppo_mini_batch_size, ppo_micro_batch_size_per_gpu)
 * from the driver's nested config, normalised as verl/workers/fsdp_workers.py ActorRolloutRefWorker.__init__
 * does: ppo_mini_batch_size × rollout.n // (world // ulysses_sequence_parallel_size), world = trainer.nnodes ×
 * trainer.n_gpus_per_node (main_ppo.py's global pool); the deprecated global ppo_micro_batch_size // the same
 * becomes the per-GPU size. Megatron (another data-parallel size) or a config without those fields: the driver's
 * value is not the actor's, so it is not carried, and the notes say why.
 */
function actorBatchSizes(d: Dump, nested: Map<string, unknown>, leaves: LeafValues, notes: string[]): void {
  const [mini, micro, perGpu] = [nested.get(`${A}ppo_mini_batch_size`), nested.get(`${A}ppo_micro_batch_size`), nested.get(`${A}ppo_micro_batch_size_per_gpu`)];
  const deprecated = micro !== undefined && micro !== null;
  // With the deprecated global size, verl writes its per-GPU share over the (null) per-GPU field.
  if (perGpu !== undefined && !deprecated) leaves.set('ppo_micro_batch_size_per_gpu', `config.${A}ppo_micro_batch_size_per_gpu`, perGpu);
  if (mini === undefined && !deprecated) return;
  // verl/workers/config/actor.py refuses both only without use_dynamic_bsz (whose micro-batches ignore either).
  if (deprecated && perGpu !== undefined && perGpu !== null && nested.get(`${A}use_dynamic_bsz`) !== true) {
    d.fail(`__metadata__ config.${A}ppo_micro_batch_size and ppo_micro_batch_size_per_gpu are both set: verl refuses it ("[actor] You have set both 'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'", verl/workers/config/actor.py)`);
  }
  const n = intOf(nested.get('actor_rollout_ref.rollout.n'));
  const world = (intOf(nested.get('trainer.nnodes')) ?? NaN) * (intOf(nested.get('trainer.n_gpus_per_node')) ?? NaN);
  const sp = intOf(nested.get(`${A}ulysses_sequence_parallel_size`) ?? 1) ?? NaN;
  const strategy = nested.get(`${A}strategy`);
  const dp = Math.floor(world / sp);
  const why = strategy !== 'fsdp' && strategy !== 'fsdp2' ? `strategy ${JSON.stringify(strategy)} is not fsdp / fsdp2`
    : !(dp >= 1) ? 'the config has no trainer.nnodes × trainer.n_gpus_per_node ÷ ulysses_sequence_parallel_size ≥ 1'
    : mini !== undefined && n === undefined ? 'the config has no actor_rollout_ref.rollout.n' : '';
  if (why) {
    notes.push(`config.${A}ppo_mini_batch_size / ppo_micro_batch_size not carried: the actor normalises them by rollout.n and its data-parallel size (fsdp_workers.py), and ${why}`);
    return;
  }
  // The ranks the driver's batch is chunked over: a step on one of its mini-batches (run.mini_batch_index) takes each rank's.
  leaves.set('data_parallel_size', `trainer.nnodes × trainer.n_gpus_per_node // ulysses_sequence_parallel_size`, dp);
  if (mini !== undefined) {
    const m = intOf(mini);
    const v = m === undefined ? mini : Math.floor((m * n!) / dp);
    leaves.set('ppo_mini_batch_size', `config.${A}ppo_mini_batch_size × rollout.n // data-parallel ${dp}`, v);
    if (m !== undefined) notes.push(`ppo_mini_batch_size = ${m} × rollout.n ${n} // (${world} GPUs // sp ${sp}) = ${v}: the actor's, as fsdp_workers.py normalises it`);
  }
  if (deprecated) {
    const m = intOf(micro);
    leaves.set('ppo_micro_batch_size_per_gpu', `config.${A}ppo_micro_batch_size // data-parallel ${dp}`, m === undefined ? micro : Math.floor(m / dp));
  }
}

/**
 * The rollout correction the dump was saved after, and its bypass mode. The dump is saved after verl's rollout
 * correction (decoupled mode: compute_rollout_correction_and_add_to_batch in ray_trainer.py fit, before
 * compute_advantage): response_mask is after its rejection sampling, rollout_is_weights are what the loss multiplied by. The step redoes both from old_log_probs and rollout_log_probs over that mask
 * (src/grpo/settings/verl_rollout.ts); where the redo is not verl's (redoneCorrectionGap) the dump is refused,
 * naming the sample, the position and the settings that would give the dump's weights. Bypass mode corrects in
 * the loss, against the current policy: the driver adds no weights, so a dump carrying them was not that run's.
 */
function rolloutCorrectionOfDump(d: Dump, cfg: Record<string, unknown>, lossMask: number[][], B: number, R: number): void {
  const weights = d.has('rollout_is_weights') ? d.floats('rollout_is_weights') : null;
  if (weights && weights.cols !== R) d.fail(`rollout_is_weights has ${weights.cols} columns, responses has ${R}`);
  // apply_bypass_mode writes loss_mode "bypass_mode" into the driver's policy_loss config (rollout_corr_helper.py), so
  // a config saved after it has lost the loss_mode the actor workers were started with and ran (below).
  if (cfg.loss_mode === 'bypass_mode') d.fail(`config loss_mode = "bypass_mode" is what apply_bypass_mode writes into the driver's config (rollout_corr_helper.py, in ray_trainer.py fit after init_workers); the actor workers ran the loss_mode they were started with (verl issue #4912), which this config no longer holds: set loss_mode in the dump's __metadata__ config to the run's actor.policy_loss.loss_mode (vanilla by default)`);
  let rc: RolloutCorrectionSettings & { bypass_mode: boolean; loss_mode: string; loss_type: string };
  try {
    rc = parseSettings<typeof rc>(VERL_SETTINGS, rowsIn(VERL_SETTINGS, cfg), 'config').values;
  } catch (e) {
    if (e instanceof SettingsError) return; // the step refuses the setting itself, naming it
    throw e;
  }
  // apply_bypass_mode (rollout_corr_helper.py) sets loss_mode = "bypass_mode" in the driver's config, inside fit(),
  // after init_workers has built the actors: Ray processes with their own copy of the config, whose update_policy
  // (dp_actor.py) reads its own loss_mode (verl issue #4912). The dump's old_log_probs are already the rollout's;
  // where the bypass loss differs from the configured loss_mode against them without correction (reinforce, a
  // rejection, another loss_mode), which one the run's actors computed is not in the dump: refused, never guessed.
  const differs = [rc.loss_type === 'reinforce' && 'loss_type reinforce', rc.rollout_rs !== null && `rollout_rs ${rc.rollout_rs}`, rc.loss_mode !== 'vanilla' && `loss_mode ${rc.loss_mode}`].filter(Boolean);
  if (rc.bypass_mode && differs.length) d.fail(`config bypass_mode is true with ${differs.join(', ')}: at verl b178a3c apply_bypass_mode sets loss_mode = bypass_mode on the driver's config only (ray_trainer.py fit, after init_workers), and the actor workers run their own loss_mode ${rc.loss_mode} against rollout_log_probs without the rollout correction (dp_actor.py update_policy; verl issue #4912), so the dump does not say which loss the run took; to step what the workers ran, set algorithm.rollout_correction.bypass_mode false in the dump's __metadata__ config (its old_log_probs are already its rollout_log_probs)`);
  if (weights && rc.bypass_mode) d.fail('rollout_is_weights is present, but config bypass_mode is true: verl computes no weights before the actor in bypass mode (ray_trainer.py fit), so the dump is not that run\'s; give the run\'s algorithm.rollout_correction');
  if (!d.has('rollout_log_probs')) {
    if (weights) d.fail('rollout_is_weights is present but rollout_log_probs is not: the step recomputes the weights from old_log_probs and rollout_log_probs, so save rollout_log_probs with the batch');
    return;
  }
  if (rc.bypass_mode || (rc.rollout_is === null && rc.rollout_rs === null) || !d.has('old_log_probs')) return;
  // verl adds the weights whenever rollout_is is set here: without them, a redo over the rejected mask is checked
  // only where it cannot differ (token weights, unnormalised; sequence weights beside sequence rejection only).
  const tokenRejection = (rc.rollout_rs ?? '').split(',').some((o) => o.trim().startsWith('token'));
  if (!weights && rc.rollout_is !== null && rc.rollout_rs !== null && (rc.rollout_is_batch_normalize || (rc.rollout_is === 'sequence' && tokenRejection))) {
    d.fail(`rollout_is_weights is missing, and rollout_is = ${rc.rollout_is}${rc.rollout_is_batch_normalize ? ' with rollout_is_batch_normalize' : ''} beside rollout_rs = ${rc.rollout_rs}: verl took those weights over the response_mask before its rejection, which the dump no longer holds, so they cannot be redone; save rollout_is_weights with the batch (verl adds them whenever rollout_is is set)`);
  }
  const old = d.floats('old_log_probs');
  const rollout = d.floats('rollout_log_probs');
  if (old.cols !== R || rollout.cols !== R) return; // the validator names the length
  const M = Float64Array.from(lossMask.flat());
  if (!M.some((m) => m !== 0)) return;
  const lr = Float64Array.from(old.data, (o, i) => o - rollout.data[i]);
  const gap = redoneCorrectionGap(lr, M, B, R, rc, weights?.data ?? null);
  if (!gap) return;
  const at = `sample ${gap.b}, response position ${gap.t}`;
  if (gap.kind === 'rejected') d.fail(`response_mask keeps ${at}, which rollout_rs = ${rc.rollout_rs} (rollout_rs_threshold ${rc.rollout_rs_threshold}) rejects when redone over it: the dump's response_mask is after verl's rejection, decided over the mask before it, which the studio cannot redo here (sequence statistics beside token options), or the settings are not the run's`);
  const how = (s: Partial<RolloutCorrectionSettings>) => `rollout_is = ${s.rollout_is}, rollout_is_threshold ${s.rollout_is_threshold}, rollout_is_batch_normalize ${s.rollout_is_batch_normalize}`;
  d.fail(`rollout_is_weights at ${at} is ${gap.dumped}, but ${how(rc)} over old_log_probs − rollout_log_probs give ${gap.redone}: ${gap.matches ? `the dump's weights are those of ${how(gap.matches)}; give the run's algorithm.rollout_correction` : rc.rollout_rs !== null ? `verl weighed over the response_mask before its rejection sampling (rollout_rs = ${rc.rollout_rs}), which the dump no longer holds, or the settings are not the run's` : 'no rollout_is, threshold or normalisation gives them: the settings or the log-probs are not the run\'s'}`);
}

/** verl's settings in the studio's names; the hook's own keys are kept alongside. */
function verlConfig(cfg: Record<string, unknown>): BatchConfig {
  // verl's group formula (norm_adv_by_std_in_grpo: false → A = r − mean); advantage_estimator 'verl' also marks the batch as verl's.
  const out: BatchConfig = { ...cfg, ...groupFormulaOf('verl', cfg) };
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
