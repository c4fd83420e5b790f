// One batch, one answer: a grpo-batch/v1 file of trainer verl whose config is in verl's own layout (nested, or its
// paths dotted) reads as the verl reader reads that config from a dump, by the reader's own function; keys outside
// that layout stay as written. OpenRLHF's args nested as the trainer holds them read as its reader reads them from a
// dump, the same way, rather than silently ignored (a step at temperature 1 with no KL term instead of the file's).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BatchFormatError, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { nest } from '../helpers/dump_parts.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';

const fixture = (name: string) => new Uint8Array(readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures/formats', name)));
const json = (b: GrpoBatch) => new TextEncoder().encode(serializeBatch(b));

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(BatchFormatError);
    return (e as Error).message;
  }
  throw new Error('not refused');
}

describe('grpo-batch/v1 of trainer verl with a config in verl\'s layout', () => {
  const A = 'actor_rollout_ref.actor.';
  // The driver's config: batch sizes the actor normalises (fsdp_workers.py), a loss setting, the temperature.
  const PATHS = { 'actor_rollout_ref.rollout.n': 3, 'actor_rollout_ref.rollout.temperature': 0.7, [`${A}loss_agg_mode`]: 'seq-mean-token-mean', [`${A}ppo_mini_batch_size`]: 6, [`${A}ppo_micro_batch_size_per_gpu`]: 2, [`${A}strategy`]: 'fsdp', 'trainer.nnodes': 1, 'trainer.n_gpus_per_node': 2, 'algorithm.norm_adv_by_std_in_grpo': false };
  const dumped = readAnyBatch(editSafetensors(fixture('verl-interleaved.safetensors'), { config: JSON.stringify(nest(PATHS)) }), 'verl.safetensors');
  /** The dump's batch saved as grpo-batch/v1 with the same driver config as written, beside the studio rows the reader adds. */
  const saved = (config: Record<string, unknown>) => json({ ...dumped.batch, config: { ...config, advantage_estimator: 'verl', scale_rewards: 'none' } });

  it('nested, as in the dump: the same settings as the verl reader gives (batch sizes normalised alike)', () => {
    const r = readAnyBatch(saved(nest(PATHS)), 'nested.json');
    expect(r.batch.config).toEqual(dumped.batch.config);
    // ppo_mini_batch_size × rollout.n // data-parallel size, by hand: 6 × 3 // 2.
    expect(r.batch.config?.ppo_mini_batch_size).toBe(9);
    expect(effectiveSettings('verl', [fileLayer(r.batch, 'nested.json')]).config.temperature).toBe(0.7);
  });

  it('dotted paths: the same as nested', () => {
    expect(readAnyBatch(saved(PATHS), 'dotted.json').batch.config).toEqual(dumped.batch.config);
  });

  it('keys outside verl\'s layout and rows are kept as written', () => {
    const r = readAnyBatch(saved({ ...nest(PATHS), chat_template_kwargs: { enable_thinking: false }, model: 'tiny' }), 'extra.json');
    expect(r.batch.config).toEqual({ ...dumped.batch.config, chat_template_kwargs: { enable_thinking: false }, model: 'tiny' });
  });

  it('a row given flat and in verl\'s layout with different values: one line naming both', () => {
    const m = refusal(() => readAnyBatch(saved({ ...nest(PATHS), temperature: 0.9 }), 'clash.json'));
    expect(m).toMatch(/^clash\.json: config\.temperature = 0\.9 and config\.actor_rollout_ref\.rollout\.temperature = 0\.7 both set temperature and disagree$/);
  });

  it('the group size flat (rollout_n) and in the layout (rollout.n) that disagree: refused, not one silently kept', () => {
    // The file's num_generations (3, the layout's) against the flat 4: the first disagreement named.
    expect(refusal(() => readAnyBatch(saved({ ...nest(PATHS), rollout_n: 4 }), 'n.json'))).toMatch(/^n\.json: num_generations = 3 and config\.rollout_n = 4 both set num_generations and disagree$/);
  });

  it('a config in leaf names only is read as written (no layout to map)', () => {
    const r = readAnyBatch(json(dumped.batch), 'flat.json');
    expect(r.batch.config).toEqual(dumped.batch.config);
  });
});

describe('grpo-batch/v1 of trainer openrlhf with nested args', () => {
  const base = readAnyBatch(fixture('openrlhf-experience.safetensors'), 'openrlhf.safetensors').batch;
  const ARGS = { 'rollout.temperature': 0.7, 'actor.eps_clip': 0.1, 'algo.kl.use_loss': true, 'algo.kl.init_coef': 0.05 };
  const saved = (config: Record<string, unknown>) => json({ ...base, trainer: 'openrlhf', config });

  it('flat by argparse dest: read as the rows', () => {
    const s = effectiveSettings('openrlhf', [fileLayer(readAnyBatch(saved(ARGS), 'flat.json').batch, 'flat.json')]);
    expect(s.config['rollout.temperature']).toBe(0.7);
    expect(s.config['algo.kl.init_coef']).toBe(0.05);
  });

  it('nested as hierarchize holds them: the same settings as flat, and as the OpenRLHF reader gives from a dump of them', () => {
    const settings = (b: Uint8Array, name: string) => effectiveSettings('openrlhf', [fileLayer(readAnyBatch(b, name).batch, name)]).config;
    const flat = settings(saved(ARGS), 'flat.json');
    expect(settings(saved(nest(ARGS)), 'nested.json')).toEqual(flat);
    const dump = editSafetensors(fixture('openrlhf-experience.safetensors'), { config: JSON.stringify(nest(ARGS)) });
    const fromDump = settings(dump, 'dump.safetensors');
    for (const k of Object.keys(ARGS)) expect(flat[k], k).toEqual(fromDump[k]);
  });

  it("a flat dest and its nested path that disagree are refused in one line naming both; the studio's advantage_estimator stays the studio's", () => {
    const m = refusal(() => readAnyBatch(saved({ ...nest(ARGS), 'rollout.temperature': 0.9 }), 'both.json'));
    expect(m).toMatch(/rollout\.temperature/);
    expect(m).toMatch(/0\.7/);
    expect(m).toMatch(/0\.9/);
    expect(m).not.toContain('\n');
    const r = readAnyBatch(saved({ ...nest(ARGS), advantage_estimator: 'openrlhf' }), 'est.json').batch.config!;
    expect(r.advantage_estimator).toBe('openrlhf');
    expect(r['algo.advantage.estimator']).toBeUndefined();
  });

  it('an object under a key that is no group of OpenRLHF args (chat_template_kwargs, which the Doctor reads) stays as written, not "not read"', () => {
    const kwargs = { enable_thinking: false };
    const r = readAnyBatch(saved({ ...nest(ARGS), chat_template_kwargs: kwargs, model_type: 'gpt2' }), 'kw.json');
    expect(r.batch.config?.chat_template_kwargs).toEqual(kwargs);
    expect(r.batch.config?.['rollout.temperature']).toBe(0.7);
    expect(r.unknownKeys).toEqual([]);
    expect(r.notes.join('\n')).not.toMatch(/chat_template_kwargs/);
  });

  it('an object row (loss_batch_info, a run row put in config) is not taken for nested args', () => {
    const info = { dp_size: 1, batch_num_tokens: 10, global_batch_size: 4 };
    expect(readAnyBatch(saved({ ...ARGS, loss_batch_info: info }), 'row.json').batch.config?.loss_batch_info).toEqual(info);
  });
});

describe("a grpo-batch/v1 config's group size in its trainer's names is the file's num_generations", () => {
  const clean = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures/batches/clean.json'), 'utf8')) as GrpoBatch;
  const G = clean.num_generations;
  const file = (trainer: string | undefined, config: Record<string, unknown>) => new TextEncoder().encode(JSON.stringify({ ...clean, ...(trainer ? { trainer } : {}), config }));
  it.each([
    [undefined, { num_generations: 2 * G }, `num_generations = ${G} and config.num_generations = ${2 * G}`],
    ['verl', { rollout_n: 2 * G }, `num_generations = ${G} and config.rollout_n = ${2 * G}`],
    ['verl', { actor_rollout_ref: { rollout: { n: 2 * G } } }, `num_generations = ${G} and config.actor_rollout_ref.rollout.n = ${2 * G}`],
    ['openrlhf', { 'rollout.n_samples_per_prompt': 2 * G }, `num_generations = ${G} and config["rollout.n_samples_per_prompt"] = ${2 * G}`],
    ['openrlhf', { rollout: { n_samples_per_prompt: 2 * G } }, `num_generations = ${G} and config.rollout.n_samples_per_prompt = ${2 * G}`],
  ] as const)('%s %o: refused naming both', (trainer, config, both) => {
    expect(refusal(() => readAnyBatch(file(trainer, config), 'g.json'))).toBe(`g.json: ${both} both set num_generations and disagree`);
  });

  it('the same size (a numeric string too) reads', () => {
    expect(readAnyBatch(file(undefined, { num_generations: G }), 'g.json').batch.num_generations).toBe(G);
    expect(readAnyBatch(file('verl', { rollout_n: String(G) }), 'g.json').batch.num_generations).toBe(G);
    expect(readAnyBatch(file('openrlhf', { rollout: { n_samples_per_prompt: G } }), 'g.json').batch.num_generations).toBe(G);
  });
});
