// `grpo-studio loss CASE` for a trainer case (tests/golden/trainers/README.md: metadata `trainer`, `config`,
// `run`): reads the inputs into a TrainerLossCase, runs TRAINER_LOSSES[trainer] on the GPU and writes every
// output the trainer forms, named as the case's F64 tensors, masks as 0/1 numbers.
import { CliError, nest } from './args.ts';
import { parsePythonJson } from '../io/batch.ts';
import { shapeOf, toF32, toI32, type SafeTensors } from '../io/safetensors.ts';
import { TRAINER_LOSSES } from '../grpo/trainers/index.ts';
import type { TrainerLossCase, TrainerLossOutputs } from '../grpo/trainers/types.ts';
import { SettingsError, TRAINERS, type TrainerId } from '../grpo/settings/types.ts';
import type { Gpu } from '../gpu/context.ts';

/** A metadata object, in Python's JSON dialect (NaN, Infinity) as every other metadata reader takes it (parsePythonJson). */
function json(st: SafeTensors, key: string, source: string): Record<string, unknown> {
  const raw = st.metadata[key];
  if (raw === undefined) return {};
  try {
    const v = parsePythonJson(raw, `metadata "${key}"`);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new CliError(`${source}: metadata "${key}" is not a JSON object (${(e as Error).message})`);
  }
}

// A case's config is what the golden harness handed the trainer's code: the case's fields over the config
// DATACLASSES' defaults (tests/golden/trainers/README.md), not over the trainer config the settings tables
// follow. The one field where the two differ: verl's RolloutCorrectionConfig.rollout_is is "sequence" in
// verl/trainer/config/algorithm.py and null in verl/trainer/config/algorithm/rollout_correction.yaml.
const CASE_DATACLASS_DEFAULTS: Partial<Record<TrainerId, Record<string, unknown>>> = { verl: { rollout_is: 'sequence' } };

/** Reads and checks a trainer loss case; every problem is a CliError naming the tensor, sample and position. */
export function readTrainerCase(st: SafeTensors, source: string): TrainerLossCase {
  const trainer = st.metadata.trainer as TrainerId;
  if (!TRAINERS.includes(trainer)) throw new CliError(`${source}: metadata "trainer" is ${JSON.stringify(trainer)}, expected one of ${TRAINERS.join(', ')}`);
  if (!st.tensors.has('logits')) throw new CliError(`${source}: missing tensor "logits"`);
  const ls = shapeOf(st, 'logits');
  if (ls.length !== 3 || ls.some((d) => d < 1)) throw new CliError(`${source}: tensor "logits" has shape ${JSON.stringify(ls)}, expected [B, T, V]`);
  const [B, T, V] = ls;
  const shaped = (name: string, shapes: number[][]) => {
    const got = shapeOf(st, name);
    if (!shapes.some((s) => s.length === got.length && s.every((d, i) => d === got[i]))) {
      throw new CliError(`${source}: tensor "${name}" has shape ${JSON.stringify(got)}, expected ${shapes.map((s) => JSON.stringify(s)).join(' or ')}`);
    }
  };
  const need = (name: string) => {
    if (!st.tensors.has(name)) throw new CliError(`${source}: missing tensor "${name}"`);
  };
  ['completion_ids', 'completion_mask', 'advantages'].forEach(need);
  shaped('completion_ids', [[B, T]]);
  shaped('completion_mask', [[B, T]]);
  shaped('advantages', trainer === 'trl' ? [[B]] : [[B, T]]);
  const optF = (name: string) => (st.tensors.has(name) ? (shaped(name, [[B, T]]), toF32(st, name)) : null);
  const optI = (name: string) => (st.tensors.has(name) ? (shaped(name, [[B, T]]), toI32(st, name)) : null);
  const c: TrainerLossCase = {
    trainer,
    config: { ...CASE_DATACLASS_DEFAULTS[trainer], ...json(st, 'config', source) },
    run: json(st, 'run', source),
    B,
    T,
    V,
    logits: toF32(st, 'logits'),
    completion_ids: toI32(st, 'completion_ids'),
    completion_mask: toI32(st, 'completion_mask'),
    tool_mask: optI('tool_mask'),
    advantages: toF32(st, 'advantages'),
    old_per_token_logps: optF('old_per_token_logps'),
    ref_per_token_logps: optF('ref_per_token_logps'),
    sampling_per_token_logps: optF('sampling_per_token_logps'),
    sequence_lengths: st.tensors.has('sequence_lengths') ? (shaped('sequence_lengths', [[B]]), toI32(st, 'sequence_lengths')) : null,
  };
  for (let i = 0; i < B * T; i++) {
    const at = `sample ${Math.floor(i / T)}, position ${i % T}`;
    if (c.completion_ids[i] < 0 || c.completion_ids[i] >= V) throw new CliError(`${source}: completion_ids at ${at} is ${c.completion_ids[i]}, outside the vocabulary [0, ${V})`);
    for (const [name, m] of [['completion_mask', c.completion_mask], ['tool_mask', c.tool_mask]] as const) {
      if (m && m[i] !== 0 && m[i] !== 1) throw new CliError(`${source}: ${name} at ${at} is ${m[i]}, expected 0 or 1`);
    }
  }
  // A row's attention covers its loss tokens: fewer tokens than its completion_mask counts is a broken case.
  for (let b = 0; b < B && c.sequence_lengths; b++) {
    let n = 0;
    for (let t = 0; t < T; t++) n += c.completion_mask[b * T + t];
    if (c.sequence_lengths[b] < n) throw new CliError(`${source}: sequence_lengths at sample ${b} is ${c.sequence_lengths[b]}, fewer than the ${n} tokens its completion_mask holds (it counts prompt + response tokens)`);
  }
  return c;
}

const PER_TOKEN = ['per_token_logps', 'per_token_entropy', 'per_token_kl', 'importance_sampling_ratio', 'per_token_loss', 'loss_mask', 'entropy_mask', 'off_policy_mask', 'effective_loss_mask'] as const;

/**
 * Runs the case's trainer objective: the JSON result (every output it forms, nested [B][T] / [B][T][V]) and
 * the names of the case's F64 tensors the objective did not form (the caller reports them).
 */
export async function runTrainerCase(gpu: Gpu, st: SafeTensors, source: string): Promise<{ out: Record<string, unknown>; missing: string[] }> {
  const c = readTrainerCase(st, source);
  let r: TrainerLossOutputs;
  try {
    r = await TRAINER_LOSSES[c.trainer](gpu, c, { backward: true });
  } catch (e) {
    if (e instanceof SettingsError) throw new CliError(`${source}: ${e.message}`);
    throw e;
  }
  const out: Record<string, unknown> = { trainer: c.trainer, loss: r.loss };
  for (const k of PER_TOKEN) if (r[k]) out[k] = nest(r[k]!, [c.B, c.T]);
  if (r.dlogits) out.dlogits = nest(r.dlogits, [c.B, c.T, c.V]);
  if (r.unknown_settings?.length) {
    out.unknown_settings = r.unknown_settings;
    console.error(`grpo-studio loss: ${source}: settings the ${c.trainer} table does not know, not used: ${r.unknown_settings.join(', ')}`);
  }
  const missing = [...st.tensors.entries()].filter(([name, t]) => t.dtype === 'F64' && !(name in out)).map(([name]) => name);
  return { out, missing };
}
