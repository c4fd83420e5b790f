// TRL: the dict GRPOTrainer._generate_and_score_completions returns (huggingface/trl,
// trl/trainer/grpo_trainer.py), saved by the user's hook with safetensors.torch.save_file under TRL's own
// key names and padded shapes (docs/import/trl.md). Facts honoured from that source:
// - prompt_ids / prompt_mask are left-padded, completion_ids / completion_mask right-padded with the pad
//   id; sampling_per_token_logps is padded with 0 and tool_mask with 1 (loss mask = completion_mask ·
//   tool_mask), so both are kept exactly as written and never folded into completion_mask;
// - each process keeps only its rows: advantages[process_slice], process_slice = rank·B … (rank+1)·B
//   over the gathered batch, so row b is global sample rank·B + b of group ⌊(rank·B + b) / G⌋ and a
//   rank's file can hold part of a group;
// - advantages are (B), or (B, T) in subclasses that return per-token advantages;
// - num_items_in_batch (dapo's normaliser) is gathered over every process: carried as run.num_items_in_batch;
//   what the trainer logged for the step (e.g. "kl") may come as a "metrics" JSON object.
// Rows are kept padded (grpo-batch/v1 allows it; the masks say what is real) so no bug is trimmed away.
import type { BatchConfig, GrpoBatch } from '../batch.ts';
import { configTable, runTable } from '../../grpo/settings/effective.ts';
import { shown } from '../shown.ts';
import { carriersIn, Dump, intOf, isPlainObject, LeafValues, row, rows, scalarAdvantages, tokenIds, turnEnds, type IdCarrier, type ImportOptions, type ImportResult } from './common.ts';

/**
 * GRPOConfig / TrainingArguments fields carried into batch.config (same names): every row of the studio's TRL
 * settings table, config and run context alike (src/grpo/settings/trl.ts), so a value the trainer set is never
 * dropped on import; the rest of args.to_dict() is counted in notes.
 */
const ROWS = [...configTable('trl'), ...runTable('trl')].filter((s) => !s.studio);
const CONFIG_FIELDS: ReadonlySet<string> = new Set(ROWS.map((s) => s.name));
/** Rows where null is a value of its own (vllm_importance_sampling_clip_max: null = no bound, not the default 3). */
const NULL_MEANS: ReadonlySet<string> = new Set(ROWS.filter((s) => s.nullable && s.default !== null).map((s) => s.name));
/**
 * Run-context rows carried into batch.run; rank, num_processes and gradient_accumulation_steps go with the config, as
 * GRPOConfig's; eos_token_id is the tokenizer's (tokenizerEos), not any EOS carrier's.
 */
const RUN_FIELDS = runTable('trl').map((s) => s.name).filter((k) => !['rank', 'num_processes', 'gradient_accumulation_steps', 'eos_token_id'].includes(k));

/**
 * Metadata objects that carry the trainer's pad / EOS ids besides the hook's top-level keys, as saved from the
 * trainer's own objects (to_dict()): GRPOTrainer pads prompt_ids and completion_ids with
 * `self._tokenizer.pad_token_id` and cuts completions at `self._tokenizer.eos_token_id`, where `_tokenizer` is
 * `processing_class` (or `processing_class.tokenizer` for a processor); its non-vLLM `generation_config` is
 * GenerationConfig(pad_token_id=…, eos_token_id=… of that tokenizer, updated by args.generation_kwargs)
 * (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577, GRPOTrainer.__init__ and _generate_and_score_completions).
 */
const ID_OBJECTS = ['processing_class', 'tokenizer', 'generation_config'];

/** Keys of the dict this reader maps, and keys it knows but does not carry (listed in notes). */
const MAPPED = ['prompt_ids', 'prompt_mask', 'completion_ids', 'completion_mask', 'advantages', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps', 'tool_mask'];
/** 0-d tensors carried into the config. */
const SCALARS = ['num_items_in_batch'];
const KNOWN_UNMAPPED = ['importance_sampling_ratio', 'pixel_values', 'image_grid_thw', 'pixel_attention_mask', 'image_sizes', 'token_type_ids', 'mm_token_type_ids', 'spatial_shapes', 'image_position_ids', 'num_images', 'num_tiles', 'max_left_pad'];
const META = ['config', 'run', 'metrics', 'rank', 'num_processes', 'gradient_accumulation_steps', ...RUN_FIELDS, 'pad_token_id', 'eos_token_id', 'eos_token_ids', ...ID_OBJECTS, 'state', 'rewards', 'rewards_per_func', 'reward_weights', 'prompts', 'completions', 'format'];

export function detect(d: Dump): boolean {
  return d.has('completion_ids') && d.has('completion_mask') && d.has('prompt_ids');
}

export function read(d: Dump, opts: ImportOptions): ImportResult {
  const notes: string[] = [];
  const prompt_ids = d.ints('prompt_ids');
  const completion_ids = d.ints('completion_ids');
  const B = completion_ids.rows;
  d.sameRows([...MAPPED, 'importance_sampling_ratio'], B, 'completion_ids');
  const cfg = d.metaObject('config');
  const G = groupSize(d, cfg);
  if (G === undefined) d.fail('__metadata__ config has no num_generations: groups cannot be formed (save self.args.to_dict() as "config")');
  // Run context: top-level keys (the hook's), or a "run" object as in tests/golden/trainers.
  const run = d.metaObject('run');
  const placed = processPlace(d, cfg, run);
  const rank = processInt(d, placed, 'rank') ?? 0;
  const numProcesses = processInt(d, placed, 'num_processes') ?? 1;
  if (rank < 0 || rank >= numProcesses) d.fail(`__metadata__ rank = ${rank} is not in [0, num_processes = ${numProcesses})`);

  const completion_mask = rows(d.ints('completion_mask'));
  const tool_mask = d.has('tool_mask') ? rows(d.ints('tool_mask')) : undefined;
  const ids = rows(completion_ids);
  const prompt_mask = d.has('prompt_mask') ? rows(d.ints('prompt_mask')) : undefined;
  const prompts = rows(prompt_ids);
  const ends: number[] = [];
  ids.forEach((r, b) => turnEnds(r, tool_mask ? completion_mask[b].map((m, t) => m * (tool_mask[b][t] ?? 1)) : completion_mask[b], ends));
  const { pad_token_id, eos_token_ids, inferred } = tokenIds(d, opts, trlIdCarriers(d, cfg), {
    masked: prompt_mask && { mask: 'prompt_mask', ids: prompts.flatMap((r, b) => r.filter((_, t) => prompt_mask[b][t] === 0)) },
    turnEnds: ends,
  }, notes);

  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: G,
    pad_token_id,
    eos_token_ids,
    prompt_ids: prompts,
    completion_ids: ids,
    completion_mask,
    prompt_mask,
    tool_mask,
    // process_slice: row b of rank r is global sample r·B + b.
    group_ids: Array.from({ length: B }, (_, b) => Math.floor((rank * B + b) / G)),
  };
  for (const key of ['old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps'] as const) if (d.has(key)) batch[key] = rows(d.floats(key));
  if (d.has('advantages')) {
    const rank2 = d.shape('advantages').length === 2;
    const A = d.floats('advantages', rank2 ? 2 : 1);
    if (rank2) {
      batch.per_token_advantages = rows(A);
      const loss = completion_mask.map((m, b) => (tool_mask ? m.map((x, t) => x * (tool_mask[b][t] ?? 1)) : m));
      batch.advantages = scalarAdvantages(batch.per_token_advantages, loss);
      notes.push(batch.advantages ? 'advantages are (B, T) and constant over each completion: also given per sample' : 'advantages are (B, T) and vary within completions: kept per token only');
    } else batch.advantages = row(A, 0, 0, A.rows * A.cols);
  }
  perSampleMeta(d, batch, B, rank, numProcesses);
  batch.config = trlConfig(cfg, rank, numProcesses, accumulationSteps(d, placed, cfg, notes));
  // The run context, every row of the table's (inputs["num_items_in_batch"], dapo's normaliser gathered over every
  // process, first as the dict's 0-d tensor; TrainerState; the adaptive entropy's last world entropy): the hook's
  // top-level keys or its "run" object, as written (the validator names a bad one, nothing is dropped).
  // TrainerState (global_step, max_steps): the hook's keys, or the trainer's `state` object as saved (TrainerState's
  // fields, e.g. dataclasses.asdict(self.state)); the rest of it is not used.
  // A key given at several places must hold one value there (LeafValues): a clash is refused, naming both.
  const state = d.metaObject('state');
  const runValues = new LeafValues(d);
  for (const k of RUN_FIELDS) {
    if (k === 'num_items_in_batch' && d.has(k)) runValues.set(k, `the 0-d tensor ${k}`, d.scalar(k));
    for (const [where, v] of [[k, d.meta(k)], [`run.${k}`, run[k]], [`state.${k}`, state[k]]] as const) if (v !== undefined && v !== null) runValues.set(k, where, v);
  }
  if (runValues.values.size) batch.run = runValues.object();
  countOfItems(d, batch.run?.num_items_in_batch);
  const eos = tokenizerEos(d, run);
  if (eos !== undefined) batch.run = { ...batch.run, eos_token_id: eos };
  batch.metrics = d.metrics();
  const dropped = Object.keys(cfg).filter((k) => !CONFIG_FIELDS.has(k)).length;
  if (dropped > 0) notes.push(`${dropped} other GRPOConfig field(s) in the metadata are not used by the studio`);
  if (numProcesses > 1) notes.push(`rank ${rank} of ${numProcesses}: rows are global samples ${rank * B}…${rank * B + B - 1}; groups cut by the slice are kept as partial groups (convert all ranks together to check them)`);
  for (const k of KNOWN_UNMAPPED) if (d.has(k)) notes.push(`${k}: read, not part of grpo-batch/v1`);
  const unknownKeys = [...d.st.tensors.keys()].filter((k) => !MAPPED.includes(k) && !KNOWN_UNMAPPED.includes(k) && !SCALARS.includes(k));
  unknownKeys.push(...Object.keys(d.st.metadata).filter((k) => !META.includes(k)).map((k) => `__metadata__.${k}`));
  unknownKeys.push(...Object.keys(run).filter((k) => !runTable('trl').some((s) => s.name === k)).map((k) => `__metadata__.run.${k}`));
  const stateRest = Object.keys(state).filter((k) => !RUN_FIELDS.includes(k));
  if (stateRest.length) notes.push(`state: ${stateRest.length} other TrainerState field(s) not used (${stateRest.slice(0, 4).join(', ')}${stateRest.length > 4 ? ', …' : ''})`);
  return { batch, format: 'trl', trainer: 'TRL GRPOTrainer', unknownKeys, notes, inferred };
}

/**
 * The process settings, from every place a dump may give them: the hook's top-level keys, its "run" object, and the
 * config (args.to_dict() rows of the studio's TRL table). Numbers and numeric strings compare as integers, so rank
 * "0" and 0 are one value; two places that disagree are a refusal naming both (LeafValues), never one silently kept
 * — a wrong rank would move every row to another sample of the gathered batch, and groups with it.
 */
function processPlace(d: Dump, cfg: Record<string, unknown>, run: Record<string, unknown>): LeafValues {
  const placed = new LeafValues(d);
  for (const k of ['rank', 'num_processes', 'gradient_accumulation_steps']) {
    // The config's gradient_accumulation_steps is the args' nominal value, not a place of the run's current one (accumulationSteps).
    const places: [string, unknown][] = [[k, d.meta(k)], [`run.${k}`, run[k]], ...(k === 'gradient_accumulation_steps' ? [] : [[`config.${k}`, cfg[k]] as [string, unknown]])];
    for (const [where, v] of places) if (v !== undefined && v !== null) placed.set(k, where, intOf(v) ?? v);
  }
  return placed;
}

/**
 * The accumulation steps the loss divides by: TRL's current_gradient_accumulation_steps, which the hook writes (top
 * level or run), else the args' (config). On the last, partial accumulation of an epoch transformers sets the current
 * one to the remainder while args.to_dict() keeps the nominal: a current value up to the nominal is read (said in a
 * note where they differ); one above it is no run's, refused naming both.
 */
function accumulationSteps(d: Dump, placed: LeafValues, cfg: Record<string, unknown>, notes: string[]): unknown {
  const current = placed.values.get('gradient_accumulation_steps');
  const nominal = cfg.gradient_accumulation_steps === null ? undefined : cfg.gradient_accumulation_steps;
  if (!current) return nominal;
  const [c, n] = [intOf(current.value), intOf(nominal)];
  if (c !== undefined && n !== undefined && c > n) d.fail(`__metadata__ ${current.where} = ${c} is above config.gradient_accumulation_steps = ${n}: the current accumulation is at most the args' (the last of an epoch: the remainder)`);
  if (c !== undefined && n !== undefined && c < n) notes.push(`gradient_accumulation_steps: ${current.where} = ${c}, the args' ${n}: the epoch's last, partial accumulation; its loss divides by ${c}`);
  return current.value;
}

/** num_generations from the args (config) or the hook's top-level key: both given must agree; a bad one is refused by place. */
function groupSize(d: Dump, cfg: Record<string, unknown>): number | undefined {
  const placed = new LeafValues(d);
  for (const [where, v] of [['config.num_generations', cfg.num_generations], ['num_generations', d.meta('num_generations')]] as const) if (v !== undefined && v !== null) placed.set('num_generations', where, intOf(v) ?? v);
  return placed.groupSize('num_generations');
}

/** rank / num_processes as an integer, or undefined when no place gives one; anything else is refused by place, not read as the default. */
function processInt(d: Dump, placed: LeafValues, key: 'rank' | 'num_processes'): number | undefined {
  const at = placed.values.get(key);
  if (at !== undefined && intOf(at.value) === undefined) d.fail(`__metadata__ ${at.where} = ${shown(at.value)} is not an integer`);
  return intOf(at?.value);
}

/**
 * Where a TRL dump carries pad / EOS, first found first: the hook's top-level keys; the tokenizer saved as the
 * trainer holds it (`processing_class`, a processor's `processing_class.tokenizer`, or `tokenizer`); the
 * `generation_config` GRPOTrainer builds from it; args.to_dict()'s `generation_kwargs` (which update that
 * generation config). Later ones that disagree are named in the notes.
 */
function trlIdCarriers(d: Dump, cfg: Record<string, unknown>): IdCarrier[] {
  const pc = d.meta('processing_class');
  return [
    { kind: 'pad', where: 'pad_token_id', value: d.meta('pad_token_id') },
    { kind: 'eos', where: 'eos_token_ids', value: d.meta('eos_token_ids') },
    { kind: 'eos', where: 'eos_token_id', value: d.meta('eos_token_id') },
    ...(isPlainObject(pc) ? carriersIn('processing_class.tokenizer', pc.tokenizer) : []),
    ...ID_OBJECTS.flatMap((k) => carriersIn(k, d.meta(k))),
    ...carriersIn('config.generation_kwargs', cfg.generation_kwargs),
  ];
}

/**
 * The tokenizer's own EOS (GRPOTrainer's self._tokenizer.eos_token_id, the one mask_truncated_completions counts),
 * first found first: the run's `eos_token_id`; the hook's top-level `eos_token_id` (docs/import/trl.md and
 * python/grpo_studio_dump write the tokenizer's there); the tokenizer saved as the trainer holds it. Not
 * generation_config's, which may list further stop ids. A list or a non-integer is not one EOS: left to the
 * batch's eos_token_ids (tokenIds reads the same carriers).
 */
function tokenizerEos(d: Dump, run: Record<string, unknown>): unknown {
  const pc = d.meta('processing_class');
  const tok = (o: unknown) => (isPlainObject(o) ? o.eos_token_id : undefined);
  const carriers = [d.meta('eos_token_id'), isPlainObject(pc) ? tok(pc.tokenizer) : undefined, tok(pc), tok(d.meta('tokenizer'))];
  // The run's value as written (the validator names a bad one); a carrier only where it is one integer id.
  return run.eos_token_id !== undefined ? run.eos_token_id : carriers.map((v) => intOf(v)).find((v) => v !== undefined && v >= 0);
}

/**
 * num_items_in_batch is the divisor of dapo / cispo / vespo: a value that is no finite number (NaN or ±Inf from
 * the 0-d tensor, a "NaN" / "Infinity" string in the metadata) is refused here, naming the file and where it was
 * read, so nothing downstream can mistake it for "not given" and divide by this rank's own token count instead.
 * (Its range, ≥ 0 with 0 divided as 1 as TRL clamps it, is the settings row's: checked by the validator as for any row.)
 */
function countOfItems(d: Dump, v: unknown): void {
  if (v === undefined || v === null || (typeof v === 'number' && Number.isFinite(v))) return;
  const where = d.has('num_items_in_batch') ? `the 0-d tensor num_items_in_batch (dtype ${d.st.tensors.get('num_items_in_batch')!.dtype})` : d.meta('num_items_in_batch') !== undefined ? '__metadata__ num_items_in_batch' : '__metadata__ run.num_items_in_batch';
  d.fail(`${where} = ${typeof v === 'number' ? String(v) : JSON.stringify(v)}: not a token count (TRL divides the dapo / cispo / vespo loss by it); re-export inputs["num_items_in_batch"] as a finite number`);
}

/** Per-sample lists the hook may put in the metadata: this rank's B rows, or the gathered batch (sliced). */
function perSampleMeta(d: Dump, batch: GrpoBatch, B: number, rank: number, numProcesses: number): void {
  const take = <T>(key: string): T[] | undefined => {
    const v = d.metaList(key);
    if (v === undefined) return undefined;
    if (v.length === B) return v as T[];
    if (v.length === B * numProcesses) return v.slice(rank * B, (rank + 1) * B) as T[];
    d.fail(`__metadata__ "${key}" has ${v.length} entries, expected ${B} (this rank) or ${B * numProcesses} (all ranks)`);
  };
  const nan = (x: unknown) => (x === null ? NaN : (x as number));
  batch.rewards = take<number | null>('rewards')?.map(nan);
  batch.rewards_per_func = take<(number | null)[]>('rewards_per_func')?.map((r) => (Array.isArray(r) ? r.map(nan) : d.fail('__metadata__ "rewards_per_func" rows must be lists')));
  batch.reward_weights = d.metaList('reward_weights') as number[] | undefined;
  batch.prompt_texts = take<string>('prompts');
  batch.completion_texts = take<string>('completions');
}

/** GRPOConfig's rows as written, with the process settings where processPlace found them (the validator names a bad one). */
function trlConfig(cfg: Record<string, unknown>, rank: number, numProcesses: number, gas: unknown): BatchConfig {
  const out: BatchConfig = { advantage_estimator: 'trl' };
  for (const [k, v] of Object.entries(cfg)) if (CONFIG_FIELDS.has(k) && v !== undefined && (v !== null || NULL_MEANS.has(k))) (out as Record<string, unknown>)[k] = v;
  if (gas !== undefined) out.gradient_accumulation_steps = gas as number;
  out.rank = rank;
  out.num_processes = numProcesses;
  return out;
}
