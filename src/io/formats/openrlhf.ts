// OpenRLHF: the tensors of an Experience (OpenRLHF/OpenRLHF, openrlhf/trainer/ppo_utils/experience.py and
// experience_maker.py), saved by the user's hook with `index` and n_samples_per_prompt in the metadata
// (docs/import/openrlhf.md). Facts honoured:
// - `sequences` (B, T) is prompt + response; action_mask marks the action tokens of sequences[:, 1:]
//   (samples_generator.py builds it over the observation and keeps [1:]), and the actor scores them
//   with log_probs[:, -A:] (openrlhf/models/actor.py), so a narrower action_mask (A < T − 1, older
//   versions) is aligned to the END of sequences[:, 1:]; a wider one cannot be aligned (error);
// - action_log_probs / base_action_log_probs are multiplied by action_mask (0 off the actions);
// - `index` is each row's sample position in the rollout batch; its group is index // n_samples_per_prompt.
// Row b's prompt is every token before its first action, its completion the rest (right padding
// included), so each row's completion_mask is action_mask from the first action on, same length.
// Settings (the rows of src/grpo/settings/openrlhf.ts, named by train_ppo_ray.py's argparse dests such as
// `actor.eps_clip`): `config` is the args, flat (vars(args) before hierarchize: {"actor.eps_clip": 0.2}) or
// nested as the trainer holds them (openrlhf/utils/config.py hierarchize splits each dest on "."; a dump of
// args gives {"actor": {"eps_clip": 0.2}}). Nested paths are joined back with "." (exactly hierarchize's
// inverse) and the table's rows carried; other nested args are counted in notes. n_samples_per_prompt is the
// metadata's, else args.rollout.n_samples_per_prompt (nested or flat), else the older flat name. A value given
// at two of these places with different values is an error naming both. `run` (OPENRLHF_RUN) is carried as
// written, as the TRL reader does. Args under the names before ed62d0e2 also set the row openrlhf_code to
// before-ed62d0e2 (that code's loss differs: src/grpo/trainers/openrlhf.ts), so a converted batch keeps the fact.
import type { GrpoBatch } from '../batch.ts';
import { shown } from '../shown.ts';
import { groupFormulaOf } from '../../grpo/settings/group_formula.ts';
import { configTable, runTable } from '../../grpo/settings/effective.ts';
import { withCurrentNames } from '../../grpo/settings/table.ts';
import { TRAINER_TABLES } from '../../grpo/settings/trainers.ts';
import { BEFORE_ED62D0E2 } from '../../grpo/settings/openrlhf.ts';
import { configLeaves, Dump, flatKey, intOf, isPlainObject, LeafValues, row, splitLossMask, tokenIds, toolMasks, scalarAdvantages, turnEnds, type ImportOptions, type ImportResult } from './common.ts';

const MAPPED = ['sequences', 'attention_mask', 'action_mask', 'action_log_probs', 'base_action_log_probs', 'rollout_log_probs', 'advantages', 'rewards'];
const KNOWN_UNMAPPED = ['returns', 'values', 'kl', 'scores', 'response_length', 'truncated', 'total_length'];
const PER_ACTION = { action_log_probs: 'old_per_token_logps', base_action_log_probs: 'ref_per_token_logps', rollout_log_probs: 'sampling_per_token_logps', advantages: 'per_token_advantages' } as const;
const META = ['index', 'n_samples_per_prompt', 'config', 'run', 'metrics', 'pad_token_id', 'eos_token_id', 'eos_token_ids', 'prompts', 'format'];

export function detect(d: Dump): boolean {
  return d.has('sequences') && d.has('action_mask');
}

export function read(d: Dump, opts: ImportOptions): ImportResult {
  const notes: string[] = [];
  const seq = d.ints('sequences');
  const B = seq.rows;
  const T = seq.cols;
  d.sameRows([...MAPPED, ...KNOWN_UNMAPPED], B, 'sequences');
  const action = d.ints('action_mask');
  const A = action.cols;
  if (A > T - 1) d.fail(`action_mask has ${A} columns, sequences[:, 1:] has ${T - 1}`);
  const offset = T - 1 - A; // action column j scores sequences[:, offset + 1 + j]
  if (offset > 0) notes.push(`action_mask has ${A} columns for sequences[:, 1:] of ${T - 1}: aligned to its end, as the actor's log_probs[:, -A:]`);
  const attention = d.has('attention_mask') ? d.ints('attention_mask') : undefined;
  if (attention && attention.cols !== T) d.fail(`attention_mask has ${attention.cols} columns, sequences has ${T}`);
  if (!attention) notes.push('no attention_mask: every prompt token is taken as real');

  const cfg = openrlhfSettings(d, d.metaObject('config'), notes);
  const n = samplesPerPrompt(d, d.metaObject('config'));
  const index = d.meta('index');
  if (n === undefined) d.fail('__metadata__ has no n_samples_per_prompt (nor config.rollout.n_samples_per_prompt, args as the trainer holds them): groups (index // n_samples_per_prompt) cannot be formed');
  if (!Array.isArray(index) || index.length !== B) d.fail(`__metadata__ "index" must list ${B} sample positions (one per row), got ${Array.isArray(index) ? index.length : typeof index}`);
  const bad = index.findIndex((i) => !Number.isInteger(i) || i < 0);
  if (bad >= 0) d.fail(`__metadata__ index[${bad}] = ${JSON.stringify(index[bad])} is not a sample position`);

  // Column of the first action per row (A when a row has none: its completion is empty).
  const first = Array.from({ length: B }, (_, b) => {
    const j = row(action, b).indexOf(1);
    return j < 0 ? A : j;
  });
  const empty = first.filter((j) => j === A).length;
  if (empty) notes.push(`${empty} row(s) have no action token: empty completions`);
  // Tokens the actor attends but does not train (an agent's environment feedback, also one that ends the row) are
  // tool tokens: attention_mask over the same sequence positions says which are real; without it, the interior zeros.
  const split = first.map((j, b) => splitLossMask(row(action, b, j), attention && ((t) => attention.data[b * T + offset + 1 + j + t] !== 0)));
  const completion_ids = first.map((j, b) => row(seq, b, offset + 1 + j));
  const ends: number[] = [];
  first.forEach((j, b) => turnEnds(completion_ids[b], row(action, b, j), ends));
  // Pad: the sequences' masked-out positions (attention_mask 0: OpenRLHF left-pads prompts and right-pads responses with the pad id).
  const masked: number[] = [];
  if (attention) for (let i = 0; i < B * T; i++) if (attention.data[i] === 0) masked.push(seq.data[i]);
  const { pad_token_id, eos_token_ids, inferred } = tokenIds(d, opts, [
    { kind: 'pad', where: 'pad_token_id', value: d.meta('pad_token_id') },
    { kind: 'eos', where: 'eos_token_ids', value: d.meta('eos_token_ids') },
    { kind: 'eos', where: 'eos_token_id', value: d.meta('eos_token_id') },
  ], { masked: attention && { mask: 'attention_mask', ids: masked }, turnEnds: ends }, notes);
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: n,
    pad_token_id,
    eos_token_ids,
    prompt_ids: first.map((j, b) => row(seq, b, 0, offset + 1 + j)),
    prompt_mask: attention && first.map((j, b) => row(attention, b, 0, offset + 1 + j)),
    completion_ids,
    completion_mask: split.map((s) => s.completion_mask),
    tool_mask: toolMasks(split),
    group_ids: (index as number[]).map((i) => Math.floor(i / n)),
  };
  if (batch.tool_mask) notes.push('action_mask has zeros inside responses (multi-turn observations): kept as tool_mask');
  for (const [key, field] of Object.entries(PER_ACTION) as [keyof typeof PER_ACTION, (typeof PER_ACTION)[keyof typeof PER_ACTION]][]) {
    if (!d.has(key)) continue;
    const t = d.floats(key);
    if (t.cols !== A) d.fail(`${key} has ${t.cols} columns, action_mask has ${A}`);
    batch[field] = first.map((j, b) => row(t, b, j));
  }
  if (batch.per_token_advantages) {
    batch.advantages = scalarAdvantages(batch.per_token_advantages, first.map((j, b) => row(action, b, j)));
    if (!batch.advantages) notes.push('advantages vary within responses (GAE or shaped rewards): kept per token only');
  }
  if (d.has('rewards')) batch.rewards = row(d.floats('rewards', 1), 0, 0, B);
  batch.config = { ...cfg, ...groupFormulaOf('openrlhf', cfg) };
  const run = d.metaObject('run');
  if (Object.keys(run).length) batch.run = run;
  // The schedule's position is the run's, not the batch's: left out, the step is the run's first update, whose lr
  // OpenRLHF's default warmup makes 0 (src/grpo/trainers/openrlhf_optimizer.ts).
  if (run.actor_optimizer_steps === undefined) notes.push("no run.actor_optimizer_steps: stepped as the actor's first update (under OpenRLHF's default warmup its lr is 0); give the actor's optimizer steps before this batch, and run.max_steps, for the run's rate");
  batch.metrics = d.metrics(); // e.g. verl "actor/kl_loss", OpenRLHF "kl": the Doctor's logged-kl rule
  for (const k of KNOWN_UNMAPPED) if (d.has(k)) notes.push(`${k}: read, not part of grpo-batch/v1`);
  const unknownKeys = [...d.st.tensors.keys()].filter((k) => !MAPPED.includes(k) && !KNOWN_UNMAPPED.includes(k));
  unknownKeys.push(...Object.keys(d.st.metadata).filter((k) => !META.includes(k)).map((k) => `__metadata__.${k}`));
  unknownKeys.push(...Object.keys(run).filter((k) => !runTable('openrlhf').some((s) => s.name === k)).map((k) => `__metadata__.run.${k}`));
  batch.trainer = 'openrlhf';
  return { batch, format: 'openrlhf', trainer: 'OpenRLHF PPO (Experience)', unknownKeys, notes, positions: index as number[], inferred };
}

/** The table's rows (config and run) by name: a nested path that joins to one is carried, an object row kept whole. */
const ROWS = new Map([...configTable('openrlhf'), ...runTable('openrlhf')].map((s) => [s.name, s]));
/** OpenRLHF's own rows (config and run), whose former names a dump's flat args may use. */
const OWN_ROWS = [...TRAINER_TABLES.openrlhf.config, ...TRAINER_TABLES.openrlhf.run];
/** n_samples_per_prompt's names (samplesPerPrompt reads them), not table rows: neither carried nor listed as unread. */
export const GROUP_KEYS: ReadonlySet<string> = new Set(['n_samples_per_prompt', 'rollout.n_samples_per_prompt']);

/**
 * The args' flat keys (a table row's name, or its name before ed62d0e2 read as the row), the others as written
 * and listed in a note; the nested args' table rows under their dest names (LeafValues: agree or fail).
 */
export function openrlhfSettings(d: Dump, cfg: Record<string, unknown>, notes: string[]): Record<string, unknown> {
  const leaves = new LeafValues(d);
  const unread: string[] = [];
  const unknownFlat: string[] = [];
  const isFlat = (k: string, v: unknown) => !isPlainObject(v) || ROWS.get(k)?.type === 'object';
  let flat: ReturnType<typeof withCurrentNames>;
  try {
    // OpenRLHF's own rows: its former `advantage_estimator` is the studio's row name too, but in the args it is theirs.
    flat = withCurrentNames(OWN_ROWS, Object.fromEntries(Object.entries(cfg).filter(([k, v]) => isFlat(k, v))));
  } catch (e) {
    return d.fail(`__metadata__ ${(e as Error).message}`);
  }
  const formerOf = new Map(flat.renamed.map(([was, now]) => [now, was]));
  for (const [k, v] of Object.entries(flat.values)) {
    const was = formerOf.get(k);
    leaves.set(k, was ? `${flatKey(was)} (the name before OpenRLHF ed62d0e2)` : flatKey(k), v);
    if (!ROWS.has(k) && !GROUP_KEYS.has(k)) unknownFlat.push(k);
  }
  for (const [k, v] of Object.entries(cfg)) {
    if (!isPlainObject(v) || isFlat(k, v)) continue; // isPlainObject narrows v for configLeaves
    for (const [p, x] of configLeaves(d, v, (path) => ROWS.get(path)?.type === 'object', `${k}.`)) {
      if (ROWS.has(p)) leaves.set(p, `config.${p}`, x);
      else if (!GROUP_KEYS.has(p)) unread.push(p);
    }
  }
  // The code that wrote these names computed some terms otherwise (src/grpo/settings/openrlhf.ts openrlhf_code): kept
  // as a row, so a converted batch, written with today's names, still says which code wrote it.
  const nestedToday = [...leaves.values.keys()].filter((k) => !formerOf.has(k) && todaysNames({ [k]: true }).length > 0);
  const code = codeOfNames(flat.renamed, [...new Set([...todaysNames(cfg), ...nestedToday])], cfg.openrlhf_code, (m) => d.fail(`__metadata__ ${m}`));
  if (code && cfg.openrlhf_code === undefined) leaves.set('openrlhf_code', `${flatKey(flat.renamed[0][0])} (a name before OpenRLHF ed62d0e2)`, code);
  if (unread.length) notes.push(`config: ${unread.length} nested arg(s) the studio does not read, not carried (${unread.slice(0, 4).join(', ')}${unread.length > 4 ? ', …' : ''})`);
  if (flat.renamed.length) notes.push(`config: ${flat.renamed.length} arg(s) under OpenRLHF's names before ed62d0e2, read as today's (${flat.renamed.map(([was, now]) => `${was} → ${now}`).join(', ')}); openrlhf_code before-ed62d0e2: that code's loss (every term the micro-batch's masked_mean, no ±20 ratio clamp)`);
  if (unknownFlat.length) notes.push(`config: ${unknownFlat.length} flat arg(s) no row of the studio's OpenRLHF table reads, kept as written (${unknownFlat.slice(0, 6).join(', ')}${unknownFlat.length > 6 ? ', …' : ''})`);
  return leaves.object();
}


/**
 * The code that wrote an OpenRLHF config, read from its names (a dump's args: openrlhfSettings; a grpo-batch/v1
 * config: markedFormerNames): `renamed`, the args under their names before ed62d0e2 ([former, today's]);
 * `todays`, args of a renamed row under today's name (a name that code did not have). Former names only: that
 * code (openrlhf_code before-ed62d0e2). Both kinds: no one code wrote them, and the two codes' losses differ, so
 * refused (`fail`) unless the config's own openrlhf_code says which; a given openrlhf_code that former names
 * contradict is refused too. Undefined where the names say nothing.
 */
export function codeOfNames(renamed: readonly [string, string][], todays: readonly string[], given: unknown, fail: (message: string) => never): string | undefined {
  if (renamed.length === 0) return undefined;
  const [former, now] = renamed[0];
  if (given !== undefined) {
    if (given !== BEFORE_ED62D0E2) fail(`config.openrlhf_code = ${shown(given)} and config.${former} (OpenRLHF's name before ed62d0e2) disagree on the code that wrote the batch`);
    return BEFORE_ED62D0E2;
  }
  if (todays.length) fail(`config.${former} is OpenRLHF's name before ed62d0e2 (today's ${now}) and config.${todays[0]} is today's name only: no one OpenRLHF wrote both, and their losses differ (openrlhf_code: ${BEFORE_ED62D0E2} takes every term's micro-batch masked_mean and no ±20 ratio clamp); give the args under one code's names, or config.openrlhf_code`);
  return BEFORE_ED62D0E2;
}

/** Args of `config` (flat keys) that are a renamed row under today's name: names OpenRLHF before ed62d0e2 did not have. */
const todaysNames = (config: Record<string, unknown>): string[] => Object.keys(config).filter((k) => OWN_ROWS.some((r) => r.formerly !== undefined && r.name === k));

/**
 * A grpo-batch/v1 config whose former names were read as today's (`renamed`; `original`, the config as written):
 * marked with the code its names say (codeOfNames), as a dump's is (openrlhfSettings).
 */
export function markedFormerNames(config: Record<string, unknown>, original: Record<string, unknown>, renamed: readonly [string, string][], fail: (message: string) => never): Record<string, unknown> {
  const code = codeOfNames(renamed, todaysNames(original), original.openrlhf_code, fail);
  return code ? { ...config, openrlhf_code: code } : config;
}

/** n_samples_per_prompt: the metadata's, args.rollout.n_samples_per_prompt (nested or flat), or the older flat name; all given must agree (LeafValues.groupSize). */
function samplesPerPrompt(d: Dump, cfg: Record<string, unknown>): number | undefined {
  const n = new LeafValues(d);
  const nested = isPlainObject(cfg.rollout) ? cfg.rollout.n_samples_per_prompt : undefined;
  const given: [string, unknown][] = [['n_samples_per_prompt', d.meta('n_samples_per_prompt')], [flatKey('rollout.n_samples_per_prompt'), cfg['rollout.n_samples_per_prompt']], ['config.rollout.n_samples_per_prompt', nested], [flatKey('n_samples_per_prompt'), cfg.n_samples_per_prompt]];
  for (const [where, v] of given) if (v !== undefined) n.set('n_samples_per_prompt', where, intOf(v) ?? v);
  return n.groupSize('n_samples_per_prompt');
}
