// The Python package python/ (grpo_studio_dump), run by tests/python/dump_package.py (Debian's python3 with
// torch, the package imported from the source tree) on objects shaped like each trainer's — TRL's dict and
// trainer, a verl DataProto with an OmegaConf config and meta_info, OpenRLHF Experience dataclasses with
// nested or flat args, NeMo-RL's grpo_train train_data (dump_nemo_rl: the trainer's own train_data_step{N}.jsonl,
// checked byte for byte against its writer in dump_package.py) — in three modes: torch + safetensors.torch.save_file (tests/python/shim), torch with the
// bundled writer, and no torch / numpy / safetensors at all (GRPO_STUDIO_DUMP_PURE=1, plain lists). Each dump
// is read back with importBatch: ids, masks, advantages and log-probs equal the synthetic tensors exactly,
// the trainer's settings arrive, nothing is unknown, and the Doctor finds no error on these clean dumps.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { diagnose } from '../../src/doctor/index.ts';
import { doctorOptions } from '../../src/doctor/tokenizer_fit.ts';
import { importBatch, type ImportResult } from '../../src/io/formats/index.ts';
import { python } from '../helpers/python.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const MODES = ['safetensors', 'torch', 'pure'] as const;
type Mode = (typeof MODES)[number];

interface Dumped {
  files: string[];
  expect: Record<string, unknown[]>;
}
interface Run {
  dir: string;
  mode: Mode;
  writer: string;
  pyproject: { toml: Record<string, Record<string, unknown>>; backend: Record<string, unknown>; version: string; wheel: string; wheel_files: string[]; metadata: string[] };
  trl: Dumped;
  verl: Dumped;
  openrlhf: Dumped;
  nemo_rl: Dumped;
}

const runs = new Map<Mode, Run>();
function dump(mode: Mode): Run {
  if (runs.has(mode)) return runs.get(mode)!;
  const dir = mkdtempSync(path.join(tmpdir(), `pydump-${mode}-`));
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONPATH: mode === 'safetensors' ? path.join(root, 'tests/python/shim') : '' };
  delete env.GRPO_STUDIO_DUMP_PURE;
  const r = spawnSync(python(), [path.join(root, 'tests/python/dump_package.py'), mode, dir], { encoding: 'utf8', timeout: 120_000, env });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  const run = { dir, ...JSON.parse(r.stdout) } as Run;
  runs.set(mode, run);
  return run;
}

function importDump(run: Run, d: Dumped): ImportResult {
  return importBatch(d.files.map((name) => ({ name, bytes: new Uint8Array(readFileSync(path.join(run.dir, name))) })));
}

/** Every field the Python side built equals what the import gives, value for value (float32 values exactly). */
function sameFields(r: ImportResult, d: Dumped): void {
  for (const [k, v] of Object.entries(d.expect)) expect([k, (r.batch as unknown as Record<string, unknown>)[k]]).toEqual([k, v]);
}

function noErrors(r: ImportResult): void {
  const report = diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred));
  expect(report.findings.filter((f) => f.severity === 'error').map((f) => `${f.rule}: ${f.message}`)).toEqual([]);
  expect(report.skipped.map((s) => s.rule)).not.toContain('advantage-mismatch'); // checked against the rewards, and it matches
}

describe.each(MODES)('grpo_studio_dump (%s)', (mode) => {
  it('writes with the expected writer; pyproject.toml is valid and the backend reads it as tomllib does', () => {
    const run = dump(mode);
    expect(run.writer).toBe(mode === 'safetensors' ? 'safetensors' : 'bundled');
    const { toml, backend, version } = run.pyproject;
    expect(toml['build-system']).toEqual({ requires: [], 'build-backend': 'grpo_studio_build', 'backend-path': ['_backend'] });
    expect(toml.project).toMatchObject({ name: 'grpo_studio_dump', dependencies: [] });
    expect(backend).toEqual({ name: toml.project.name, version: toml.project.version, description: toml.project.description, requires_python: toml.project['requires-python'], packages: ['grpo_studio_dump'] });
    expect(version).toBe(toml.project.version);
    // The wheel pip builds from ./python (the in-tree backend, no dependency): the package and its dist-info.
    expect(run.pyproject.wheel).toBe(`grpo_studio_dump-${version}-py3-none-any.whl`);
    const info = `grpo_studio_dump-${version}.dist-info`;
    expect(run.pyproject.wheel_files).toEqual(['__init__.py', '_dumps.py', '_json.py', '_writer.py'].map((f) => `grpo_studio_dump/${f}`).concat([`${info}/METADATA`, `${info}/RECORD`, `${info}/WHEEL`]).sort());
    expect(run.pyproject.metadata).toEqual(expect.arrayContaining(['Name: grpo_studio_dump', `Version: ${version}`, `Requires-Python: ${toml.project['requires-python']}`]));
    expect(run.pyproject.metadata.filter((l) => l.startsWith('Requires-Dist:') && !l.includes('extra =='))).toEqual([]); // nothing to download
  });

  it('dump_trl: two ranks merge into 12 rows in 3 groups; args.to_dict(), TrainerState and the processor ids arrive', () => {
    const run = dump(mode);
    expect(run.trl.files).toEqual(['trl_rank0.safetensors', 'trl_rank1.safetensors']);
    const r = importDump(run, run.trl);
    expect(r.format).toBe('trl');
    expect(r.unknownKeys).toEqual([]);
    sameFields(r, run.trl);
    const b = r.batch;
    expect([b.num_generations, b.pad_token_id, b.eos_token_ids]).toEqual([4, 0, [2]]);
    expect(b.group_ids).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    expect(b.rewards).toEqual([1, 0, 0.5, 0, 1, 0, 0.2, 1, 0, 1, 0.3, 0]);
    expect(b.config).toMatchObject({ beta: 0.07, loss_type: 'dapo', epsilon: 0.25, temperature: 0.9, gradient_accumulation_steps: 2, lr_scheduler_type: 'cosine', learning_rate: 3e-6, max_grad_norm: 0.5, rank: [0, 1], num_processes: 2 });
    expect(b.run).toMatchObject({ global_step: 3, max_steps: 50, num_items_in_batch: b.completion_mask.flat().reduce((a, x) => a + x, 0) });
    expect(b.metrics).toEqual({ kl: 0 });
    noErrors(r);
  });

  it('dump_verl: DataProto tensors, uid, meta_info and the OmegaConf config (resolved) arrive', () => {
    const run = dump(mode);
    const r = importDump(run, run.verl);
    expect(r.format).toBe('verl');
    expect(r.unknownKeys).toEqual([]);
    sameFields(r, run.verl);
    const b = r.batch;
    expect([b.num_generations, b.pad_token_id, b.eos_token_ids]).toEqual([3, 0, [2]]);
    expect(b.config).toMatchObject({ loss_agg_mode: 'seq-mean-token-sum', clip_ratio_high: 0.28, kl_loss_coef: 0.003, temperature: 0.7, scale_rewards: 'none', ppo_micro_batch_size_per_gpu: 2, ppo_mini_batch_size: 3 });
    expect(r.notes.join('\n')).not.toMatch(/inferred|no pad id|no EOS id/);
    noErrors(r);
  });

  it('dump_openrlhf: one file per Experience, merged by index into whole groups; eps_clip from the args', () => {
    const run = dump(mode);
    expect(run.openrlhf.files).toEqual(['exp_0.safetensors', 'exp_1.safetensors']);
    const r = importDump(run, run.openrlhf);
    expect(r.format).toBe('openrlhf');
    expect(r.unknownKeys).toEqual([]);
    sameFields(r, run.openrlhf);
    const b = r.batch;
    expect([b.num_generations, b.pad_token_id, b.eos_token_ids]).toEqual([2, 0, [2]]);
    expect(b.config).toMatchObject({ 'actor.eps_clip': 0.3, 'actor.policy_loss_type': 'ppo', 'algo.kl.init_coef': 0.02 });
    noErrors(r);
  });

  it('dump_nemo_rl: train_data_step3.jsonl as NeMo-RL writes it; groups by prompt, the sample_loss_mask-0 row out of the loss', () => {
    const run = dump(mode);
    expect(run.nemo_rl.files).toEqual(['train_data_step3.jsonl']);
    const r = importDump(run, run.nemo_rl);
    expect(r.format).toBe('nemo-rl');
    expect(r.unknownKeys).toEqual([]);
    sameFields(r, run.nemo_rl);
    const b = r.batch;
    expect([b.num_generations, b.pad_token_id, b.eos_token_ids]).toEqual([3, 0, [2]]);
    expect(b.completion_mask[4]).toEqual(b.completion_mask[4].map(() => 0)); // sample_loss_mask 0: no loss token
    expect(b.completion_mask.filter((_, i) => i !== 4).every((m) => m.includes(1))).toBe(true);
    expect(b.config).toMatchObject({ step: 3, advantage_estimator: 'verl', scale_rewards: 'group' });
    expect(r.inferred?.pad_token_id).toMatch(/past input_lengths/); // NeMo-RL writes no pad / EOS id
    expect(r.notes.join('\n')).toMatch(/sample_loss_mask is 0 on row\(s\) 4/);
    noErrors(r);
  });
});

describe('grpo_studio_dump writers agree', () => {
  it('torch tensors: the bundled writer writes the same bytes as safetensors.torch.save_file (the shim); the same JSONL', () => {
    const [a, b] = [dump('torch'), dump('safetensors')];
    for (const d of ['trl', 'verl', 'openrlhf', 'nemo_rl'] as const) {
      for (const f of a[d].files) expect([f, Buffer.compare(readFileSync(path.join(a.dir, f)), readFileSync(path.join(b.dir, f)))]).toEqual([f, 0]);
    }
  });
});
