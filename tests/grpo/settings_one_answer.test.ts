// Issue 20, "one batch, one answer": every row of the TRL settings table survives import → export → import,
// every loss-side row reaches the computation it belongs to (or the file is refused naming it), a file's
// settings never leak into another base, and the CLI and the page resolve the same file to the same update.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stepSettingsOfFile } from '../../src/cli/args.ts';
import { effectiveSettings, fileLayer, trainerOfBatch } from '../../src/grpo/settings/effective.ts';
import { TRL_RUN_SETTINGS, TRL_SETTINGS } from '../../src/grpo/settings/trl.ts';
import type { SettingSpec } from '../../src/grpo/settings/types.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { parseBatch, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { importBatch } from '../../src/io/formats/index.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';
import { validateBatch } from '../../src/io/validate.ts';
import { noEdits, pageSettings } from '../../src/bridge/settings.ts';

/** A valid value of the row that is not its default (bounds and allowed values from the row itself). */
function otherValue(s: SettingSpec): unknown {
  const d = s.default;
  switch (s.type) {
    case 'boolean':
      return !d;
    case 'enum':
      return s.values!.find((v) => v !== d);
    case 'string':
      return s.name === 'optim' ? 'sgd' : s.name === 'lr_scheduler_type' ? 'constant' : 'x';
    case 'number-list':
      return [0.5, 2];
    case 'object':
      return { num_cycles: 0.25 };
    case 'integer': {
      const base = typeof d === 'number' ? d : (s.min ?? 0);
      return s.max !== undefined && base + 1 > s.max ? base - 1 : base + 1;
    }
    case 'number': {
      const base = typeof d === 'number' ? d : (s.min ?? 0);
      const up = base + 0.5;
      return s.max !== undefined && up > s.max ? base / 2 : up;
    }
  }
}

/** A 2-row TRL dict as the docs' hook saves it, with `config` and `run` in the metadata. */
function trlDump(config: Record<string, unknown>, run: Record<string, unknown> = {}): Uint8Array {
  const i32 = (rows: number[][]) => ({ dtype: 'I32' as const, shape: [rows.length, rows[0].length], data: Int32Array.from(rows.flat()) });
  return writeSafeTensors(
    { prompt_ids: i32([[0, 5], [0, 6]]), prompt_mask: i32([[0, 1], [0, 1]]), completion_ids: i32([[7, 2], [8, 2]]), completion_mask: i32([[1, 1], [1, 1]]), advantages: { dtype: 'F32', shape: [2], data: Float32Array.of(1, -1) } },
    { config: JSON.stringify({ num_generations: 2, ...config }), run: JSON.stringify(run), pad_token_id: '0', eos_token_ids: '[2]' },
  );
}

const read = (bytes: Uint8Array, name: string) => importBatch([{ name, bytes }]).batch;

// Rows the reader takes from elsewhere: rank / num_processes are the hook's top-level keys and checked together.
const FROM_METADATA = new Set(['rank', 'num_processes']);
const configRows = TRL_SETTINGS.filter((s) => !s.studio && s.name !== 'num_generations');
const runRows = TRL_RUN_SETTINGS.filter((s) => !FROM_METADATA.has(s.name) && s.name !== 'steps_per_generation');

describe('every TRL row round-trips import → export → import', () => {
  const config = Object.fromEntries(configRows.map((s) => [s.name, otherValue(s)]));
  const run = Object.fromEntries(runRows.map((s) => [s.name, otherValue(s)]));

  it.each(configRows.map((s) => [s.name, s] as const))('config.%s', (name) => {
    const first = read(trlDump(config, run), 'dump.safetensors');
    expect(first.config?.[name]).toEqual(config[name]);
    const again = parseBatch(serializeBatch(first), 'export.json');
    expect(again.config?.[name]).toEqual(config[name]);
  });

  it('the run context the schedule and normalisers read', () => {
    const first = read(trlDump(config, run), 'dump.safetensors');
    const settings = effectiveSettings('trl', [fileLayer(first, 'dump')]);
    for (const s of runRows) expect([s.name, settings.run[s.name] ?? settings.config[s.name]]).toEqual([s.name, run[s.name]]);
  });

  it('null is kept where it means something of its own (clip_max null = no bound, not 3)', () => {
    const b = read(trlDump({ vllm_importance_sampling_clip_max: null, max_prompt_length: null }), 'dump.safetensors');
    expect(b.config).toMatchObject({ vllm_importance_sampling_clip_max: null, max_prompt_length: null });
  });
});

describe('every loss-side TRL row reaches the loss, or the file is refused naming it', () => {
  const lossRows = TRL_SETTINGS.filter((s) => (s.scope === 'loss' || s.scope === 'batch') && !s.studio);
  it.each(lossRows.map((s) => [s.name, s] as const))('%s', (name, spec) => {
    const v = otherValue(spec);
    let cfg;
    try {
      cfg = stepConfigOf(effectiveSettings('trl', [{ origin: 'file', config: { [name]: v } }]), 4);
    } catch (e) {
      // A value the trainer itself would refuse (e.g. liger with another loss) is refused by name.
      expect((e as Error).message).toContain(name);
      return;
    }
    const studio = cfg.loss as unknown as Record<string, unknown>;
    const studioName = name === 'epsilon' ? 'epsilon_low' : name;
    // Either the studio loss applies it itself, or the step follows TRL's objective with the value in its config.
    if (cfg.trainer === null) expect(studio[studioName]).toEqual(v);
    else expect(cfg.trainer?.config[name]).toEqual(v);
  });
});

describe("a file's settings are that file's only", () => {
  const dumpA = read(trlDump({ learning_rate: 1e-6, loss_type: 'dapo' }, { num_items_in_batch: 150 }), 'a.safetensors');
  const plain: GrpoBatch = { ...dumpA, config: undefined, run: undefined };

  it('a run from the prompt set after an import uses the preset, not the file', () => {
    const onFile = pageSettings('trl', { kind: 'batch', batch: dumpA, name: 'a.safetensors' }, noEdits());
    expect(onFile.config.learning_rate).toBe(1e-6);
    expect(onFile.run.num_items_in_batch).toBe(150);
    expect(onFile.provenance['config.learning_rate']).toEqual({ origin: 'file', label: 'a.safetensors' });
    const onPrompts = pageSettings('trl', { kind: 'prompts' }, noEdits());
    expect(onPrompts.run.num_items_in_batch).toBeUndefined();
    expect(onPrompts.provenance['config.learning_rate'].origin).toBe('preset');
    expect(onPrompts.config.learning_rate).not.toBe(1e-6);
  });

  it('a batch without config, after a verl dump, runs on the defaults', () => {
    const verl = read(readFileSync('tests/fixtures/formats/verl-interleaved.safetensors'), 'verl.safetensors');
    expect(trainerOfBatch(verl)).toBe('verl');
    const s = stepSettingsOfFile(plain, 'plain.json').config;
    expect([s.scale_rewards, s.advantage_estimator, s.position_ids]).toEqual(['group', 'trl', 'from_attention_mask']);
    // The same on the page: its base is the batch's own settings, whatever was imported before.
    const page = stepConfigOf(pageSettings(trainerOfBatch(plain), { kind: 'batch', batch: plain, name: 'plain.json' }, noEdits()), 2);
    expect([page.scale_rewards, page.advantage_estimator, page.position_ids]).toEqual(['group', 'trl', 'from_attention_mask']);
  });

  it("a TRL file's values do not become another trainer's (the preset what-if starts from that trainer's defaults)", () => {
    const s = pageSettings('verl', { kind: 'batch', batch: dumpA, name: 'a.safetensors' }, noEdits());
    expect(s.config.loss_type).toBeUndefined(); // TRL's dapo is not verl's bypass-mode loss_type
    expect(s.config.learning_rate).toBe(1e-6); // the optimizer's values are the same under every trainer
  });

  it('max_grad_norm 0 (no clipping) is one rule: exported, validated and stepped', () => {
    const b = { ...plain, config: { max_grad_norm: 0 } };
    expect(validateBatch(parseBatch(serializeBatch(b), 'b.json')).filter((f) => f.field?.startsWith('config'))).toEqual([]);
    expect(stepSettingsOfFile(b, 'b.json').config.max_grad_norm).toBe(0);
  });
});

describe('the CLI and the page resolve every fixture to the same update', () => {
  const dir = 'tests/fixtures/batches';
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  it.each(files)('%s', (f) => {
    const batch = parseBatch(readFileSync(join(dir, f), 'utf8'), f);
    let cli: unknown;
    try {
      cli = stepSettingsOfFile(batch, f).config;
    } catch (e) {
      cli = (e as Error).message.replace(`${f}: `, '');
    }
    let page: unknown;
    try {
      const C = batch.completion_ids.reduce((m, r) => Math.max(m, r.length), 0);
      page = stepConfigOf(pageSettings(trainerOfBatch(batch), { kind: 'batch', batch, name: f }, noEdits()), C);
    } catch (e) {
      page = (e as Error).message;
    }
    expect(page).toEqual(cli);
  });
});
