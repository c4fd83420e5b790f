// `grpo-studio advantages CASE.safetensors [--out RESULT.json]`: an advantage case
// (tests/golden/trainers/README.md, kind = advantages): TRL's advantage block on `rewards_per_func` (B, F)
// (NaN = a reward function returned None), or verl's estimator on `token_level_rewards` / `response_mask` /
// `index`; writes `advantages` (and verl's `returns`) as nested lists. CPU float64: no GPU needed. Tensors and
// metadata are read as the batch importers read a dump (src/io/formats/common.ts Dump: whole numbers exactly in any
// dtype that holds them, `config` / `run` in Python's JSON dialect), every refusal one line naming the file.
import { checkOutPath, CliError, flag, nest, parseArgs, readInput, writeResult } from './args.ts';
import { parseSafeTensors, shapeOf } from '../io/safetensors.ts';
import { Dump } from '../io/formats/common.ts';
import { trlAdvantages, verlAdvantages, type VerlAdvantageConfig } from '../grpo/advantages.ts';
import { parseTrlConfig, parseTrlRun } from '../grpo/settings/trl.ts';
import { VERL_ADVANTAGE_SETTINGS } from '../grpo/settings/verl_advantages.ts';
import { VERL_SETTINGS } from '../grpo/settings/verl.ts';
import { parseSettings } from '../grpo/settings/table.ts';
import { SettingsError } from '../grpo/settings/types.ts';

function tensor({ st, file: source }: Dump, name: string, rank: number): number[] {
  if (!st.tensors.has(name)) throw new CliError(`${source}: missing tensor "${name}"`);
  const s = shapeOf(st, name);
  if (s.length !== rank || s.some((d) => d < 1)) throw new CliError(`${source}: tensor "${name}" has shape ${JSON.stringify(s)}, expected rank ${rank}`);
  return s;
}

/** A float64 copy of a floating tensor (F64 as stored). */
const f64 = (d: Dump, name: string): Float64Array => Float64Array.from(d.floatData(name));

function trl(d: Dump): Record<string, unknown> {
  const source = d.file;
  const [B, F] = tensor(d, 'rewards_per_func', 2);
  // As a TRL loss case: args.to_dict() holds TrainingArguments TRL's table has no row for, so keys it does not know
  // are listed (stderr and the result), not refused.
  const config = parseTrlConfig(d.metaObject('config'));
  const parsedRun = parseTrlRun(d.metaObject('run'));
  const [c, run] = [config.values, parsedRun.values];
  const unknown = [...config.unknown.map((k) => `config.${k}`), ...parsedRun.unknown.map((k) => `run.${k}`)];
  if (unknown.length) console.error(`grpo-studio advantages: ${source}: settings the trl table does not know, not used: ${unknown.join(', ')}`);
  if (B % c.num_generations !== 0) throw new CliError(`${source}: rewards_per_func has ${B} rows, not a multiple of config.num_generations = ${c.num_generations}`);
  if (B % run.num_processes !== 0) throw new CliError(`${source}: rewards_per_func has ${B} rows, not a multiple of run.num_processes = ${run.num_processes}`);
  // TRL keeps one process's slice of the gathered advantages: a list of ranks (a merged batch's) names no slice.
  const { rank } = run;
  if (Array.isArray(rank)) throw new CliError(`${source}: run.rank = ${JSON.stringify(rank)}: an advantage case is one process's slice, give its rank`);
  if (rank >= run.num_processes) throw new CliError(`${source}: run.rank = ${rank} but run.num_processes = ${run.num_processes}`);
  if (c.reward_weights && c.reward_weights.length !== F) throw new CliError(`${source}: config.reward_weights has ${c.reward_weights.length} weights for ${F} reward functions`);
  const A = trlAdvantages(f64(d, 'rewards_per_func'), B, F, c, { num_processes: run.num_processes, rank });
  return { advantages: Array.from(A), ...(unknown.length ? { unknown_settings: unknown } : {}) };
}

function verl(d: Dump): Record<string, unknown> {
  const source = d.file;
  const [B, T] = tensor(d, 'token_level_rewards', 2);
  const ms = tensor(d, 'response_mask', 2);
  if (ms[0] !== B || ms[1] !== T) throw new CliError(`${source}: tensor "response_mask" has shape ${JSON.stringify(ms)}, expected ${JSON.stringify([B, T])}`);
  const parsed = parseSettings<VerlAdvantageConfig>(VERL_ADVANTAGE_SETTINGS, d.metaObject('config'), 'config', { required: ['adv_estimator'] });
  // As a verl loss case, a key no verl row has is refused (a nested `algorithm` object, a dotted path, a misspelt
  // norm_adv_by_std_in_grpo would otherwise leave the default in force); verl rows that do not shape advantages
  // (a whole config's loss_agg_mode) are not read.
  const stray = parsed.unknown.find((k) => !VERL_SETTINGS.some((s) => s.name === k));
  if (stray !== undefined) throw new CliError(`${source}: config.${stray}: not a verl setting the studio knows (a verl advantage case takes the leaf names, e.g. "norm_adv_by_std_in_grpo", not nested objects or dotted paths)`);
  const c = parsed.values;
  const mask = d.wholeData('response_mask', 'mask');
  mask.forEach((m, i) => {
    if (m !== 0 && m !== 1) throw new CliError(`${source}: response_mask at sample ${Math.floor(i / T)}, position ${i % T} is ${m}, expected 0 or 1`);
  });
  let index: Int32Array = new Int32Array(B);
  if (c.adv_estimator !== 'reinforce_plus_plus') {
    const is = tensor(d, 'index', 1);
    if (is[0] !== B) throw new CliError(`${source}: tensor "index" has shape ${JSON.stringify(is)}, expected [${B}]`);
    index = d.wholeData('index', 'mask'); // group labels: any int32, the masks' range (ids must be ≥ 0)
  }
  try {
    const r = verlAdvantages(f64(d, 'token_level_rewards'), mask, index, B, T, c);
    return { advantages: nest(r.advantages, [B, T]), returns: nest(r.returns, [B, T]) };
  } catch (e) {
    if (e instanceof RangeError) throw new CliError(`${source}: ${e.message}`);
    throw e;
  }
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['out'] });
  checkOutPath(flag(args, 'out'));
  if (args.positional.length !== 1) throw new CliError('usage: grpo-studio advantages CASE.safetensors [--out RESULT.json]');
  const path = args.positional[0];
  const d = new Dump(parseSafeTensors(readInput(path), path), path);
  const trainer = d.st.metadata.trainer;
  try {
    if (trainer === 'trl') return await writeResult(flag(args, 'out'), trl(d), 'advantages');
    if (trainer === 'verl') return await writeResult(flag(args, 'out'), verl(d), 'advantages');
    throw new CliError(`${path}: metadata "trainer" is ${JSON.stringify(trainer)}, expected trl or verl`);
  } catch (e) {
    if (e instanceof SettingsError) throw new CliError(`${path}: ${e.message}`);
    throw e;
  }
}
