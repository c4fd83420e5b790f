// The trainer's settings in the page's store (src/store/settings.ts, derived.ts) and their resolution
// (src/bridge/settings.ts, src/grpo/settings/effective.ts): persisted like the other settings; for TRL the
// loss panel and the trainer form edit ONE value (the same edits key, in TRL's names); an edit is a setting
// until it is cleared; another trainer keeps its own edits over its own defaults; an imported batch's
// settings are the base of its updates — the trainer's defaults plus the file's values, run context to run.
import { describe, expect, it } from 'vitest';
import { createStudioStore } from '../../src/store/index.ts';
import { effectiveOf, lossTypeOf } from '../../src/store/derived.ts';
import { effectiveSettings, fileLayer, settingOf, trainerOfBatch, unknownKeys, type EffectiveSettings } from '../../src/grpo/settings/effective.ts';
import { DEFAULT_GRPO_CONFIG } from '../../src/grpo/default_task.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { memoryStorage } from '../helpers/page_store.ts';

const settingsOf = (s: Parameters<typeof effectiveOf>[0]): EffectiveSettings => {
  const e = effectiveOf(s);
  if (!('settings' in e)) throw new Error(e.error);
  return e.settings;
};

describe('trainer settings', () => {
  it('defaults to TRL over the default task; the loss panel and the trainer form edit one value', () => {
    const s = createStudioStore(memoryStorage());
    expect(s.getState().trainer).toBe('trl');
    expect(s.getState().edits.trl).toEqual({ config: {}, run: {} });
    // No edits: the default task's preset.
    expect(settingOf(settingsOf(s.getState()), 'config', 'beta')).toEqual({ value: DEFAULT_GRPO_CONFIG.beta, provenance: { origin: 'preset', label: 'addition task' } });

    s.getState().setSetting('prompts', 'config', 'beta', 0.1);
    expect(s.getState().edits.trl.config).toEqual({ beta: 0.1 }); // one key, whichever panel set it
    expect(settingOf(settingsOf(s.getState()), 'config', 'beta')).toEqual({ value: 0.1, provenance: { origin: 'edited' } });

    // A TRL loss type that is no studio aggregation is kept as the trainer's; the studio loss keeps an aggregation.
    s.getState().setSetting('prompts', 'config', 'loss_type', 'cispo');
    expect(s.getState().edits.trl.config).toEqual({ beta: 0.1, loss_type: 'cispo' });
    expect(settingsOf(s.getState()).config).toMatchObject({ loss_type: 'cispo', beta: 0.1, epsilon: DEFAULT_GRPO_CONFIG.epsilon });
    expect(lossTypeOf(s.getState())).toBe('dapo');
    s.getState().setSetting('prompts', 'config', 'loss_type', 'bnpo');
    expect(s.getState().edits.trl.config).toEqual({ beta: 0.1, loss_type: 'bnpo' });
    expect(lossTypeOf(s.getState())).toBe('bnpo');

    s.getState().setSetting('prompts', 'config', 'top_entropy_quantile', 0.5);
    s.getState().setSetting('prompts', 'run', 'num_processes', 2);
    expect(s.getState().edits.trl).toEqual({ config: { beta: 0.1, loss_type: 'bnpo', top_entropy_quantile: 0.5 }, run: { num_processes: 2 } });
    // A value equal to the row's default is still the user's setting; clearing the edit lets the layer below show.
    s.getState().setSetting('prompts', 'config', 'top_entropy_quantile', 1);
    expect(settingOf(settingsOf(s.getState()), 'config', 'top_entropy_quantile')).toEqual({ value: 1, provenance: { origin: 'edited' } });
    s.getState().setSetting('prompts', 'config', 'top_entropy_quantile', undefined);
    expect(s.getState().edits.trl.config).toEqual({ beta: 0.1, loss_type: 'bnpo' });
    expect(settingOf(settingsOf(s.getState()), 'config', 'top_entropy_quantile').provenance).toEqual({ origin: 'default' });

    // A value the row refuses cannot form the settings: the error names the field.
    s.getState().setSetting('prompts', 'config', 'vllm_importance_sampling_mode', 'tokenmask');
    const bad = effectiveOf(s.getState());
    expect('error' in bad && bad.error).toMatch(/vllm_importance_sampling_mode/);
  });

  it('another trainer keeps its own edits over its defaults, and is persisted', () => {
    const storage = memoryStorage();
    const a = createStudioStore(storage);
    a.getState().setSetting('prompts', 'run', 'num_processes', 4);
    a.getState().setTrainer('prompts', 'verl');
    expect(a.getState().trainer).toBe('verl');
    expect(a.getState().edits.verl).toEqual({ config: {}, run: {} });
    expect(a.getState().edits.trl.run).toEqual({ num_processes: 4 }); // TRL's edits are kept for TRL
    expect(settingsOf(a.getState()).provenance['run.num_processes']).toBeUndefined();
    a.getState().setSetting('prompts', 'config', 'loss_mode', 'gspo');
    a.getState().setSetting('prompts', 'config', 'loss_agg_mode', 'token-mean'); // verl's default, set by the user
    const v = settingsOf(a.getState());
    expect(v.trainer).toBe('verl');
    expect(settingOf(v, 'config', 'loss_mode')).toEqual({ value: 'gspo', provenance: { origin: 'edited' } });
    // TRL's loss_type (the default task's) is not verl's: verl's own rows keep their defaults.
    expect(v.config.loss_type).toBeUndefined();
    const restored = createStudioStore(storage);
    const b = restored.getState();
    expect(b.trainer).toBe('verl');
    expect(b.edits.verl).toEqual({ config: { loss_mode: 'gspo', loss_agg_mode: 'token-mean' }, run: {} });
    expect(b.edits.trl).toEqual({ config: {}, run: { num_processes: 4 } });
    b.setTrainer('prompts', 'trl');
    expect(settingOf(settingsOf(restored.getState()), 'run', 'num_processes')).toEqual({ value: 4, provenance: { origin: 'edited' } });
  });

  it("an imported batch's settings: its trainer, the file's config and run over the defaults, run context to run", () => {
    expect(trainerOfBatch({ trainer: 'verl' })).toBe('verl');
    expect(trainerOfBatch({ trainer: 'openrlhf' })).toBe('openrlhf');
    expect(trainerOfBatch({})).toBe('trl');
    const config = { loss_type: 'dapo', beta: 0.04, use_vllm: true, vllm_importance_sampling_mode: 'token_mask', gradient_accumulation_steps: 2, num_items_in_batch: 40, output_dir: 'out' };
    const trl = effectiveSettings('trl', [fileLayer({ config }, 'a.json')]);
    expect(trl.config).toEqual({ loss_type: 'dapo', beta: 0.04, use_vllm: true, vllm_importance_sampling_mode: 'token_mask', output_dir: 'out' });
    expect(trl.run).toEqual({ gradient_accumulation_steps: 2, num_items_in_batch: 40 });
    expect(trl.provenance['run.gradient_accumulation_steps']).toEqual({ origin: 'file', label: 'a.json' });
    expect(unknownKeys(trl)).toEqual(['config.output_dir']); // kept, and listed: never silently ignored
    // Nothing the file does not set comes from the default task's preset: the trainer's defaults.
    expect(settingOf(trl, 'config', 'epsilon').provenance).toEqual({ origin: 'default' });
    // A value the table refuses is an error naming the field, never a silent default.
    expect(() => effectiveSettings('trl', [fileLayer({ config: { vllm_importance_sampling_mode: 'tokenmask' } }, 'b.json')])).toThrow(/vllm_importance_sampling_mode/);
    const verl = effectiveSettings('verl', [fileLayer({ trainer: 'verl', config: { loss_mode: 'gspo', clip_ratio_c: 10, dp_size: 2 } }, 'v.json')]);
    expect(verl.config).toEqual({ loss_mode: 'gspo', clip_ratio_c: 10 });
    expect(verl.run).toEqual({ dp_size: 2 });
  });

  it('an import starts from the batch trainer with no edits; the prompt set does not use the file', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().setSetting('prompts', 'config', 'beta', 0.3);
    s.getState().setSetting('prompts', 'config', 'epsilon', 0.1);
    const batch: GrpoBatch = { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [1], prompt_ids: [[5]], completion_ids: [[1]], completion_mask: [[1]], config: { beta: 0.07 } };
    s.getState().startFromBatch(trainerOfBatch(batch));
    s.getState().setImported({ batch, name: 'a.json', report: { findings: [], skipped: [], counts: { error: 0, warning: 0, info: 0 } } });
    // The batch's own edits start empty; the prompt set's stay the user's (nothing entered is lost).
    expect(s.getState().batchEdits.trl).toEqual({ config: {}, run: {} });
    expect(s.getState().edits.trl.config).toEqual({ beta: 0.3, epsilon: 0.1 });
    const fromFile = settingsOf(s.getState());
    expect(settingOf(fromFile, 'config', 'beta')).toEqual({ value: 0.07, provenance: { origin: 'file', label: 'a.json' } });
    // The earlier edit (epsilon 0.1) and the default task's preset are not carried into the batch.
    expect(settingOf(fromFile, 'config', 'epsilon').provenance).toEqual({ origin: 'default' });
    s.getState().setStepFrom('prompts');
    const fromPrompts = settingsOf(s.getState());
    expect(settingOf(fromPrompts, 'config', 'beta')).toEqual({ value: 0.3, provenance: { origin: 'edited' } });
    expect(settingOf(fromPrompts, 'config', 'epsilon_high')).toEqual({ value: DEFAULT_GRPO_CONFIG.epsilon_high, provenance: { origin: 'preset', label: 'addition task' } });
    // Edits made on the batch are the batch's: the prompt set does not see them, a new import starts without them.
    s.getState().setStepFrom('import');
    s.getState().setSetting('batch', 'config', 'beta', 0.5);
    expect(settingOf(settingsOf(s.getState()), 'config', 'beta')).toEqual({ value: 0.5, provenance: { origin: 'edited' } });
    s.getState().setStepFrom('prompts');
    expect(settingOf(settingsOf(s.getState()), 'config', 'beta').value).toBe(0.3);
    s.getState().startFromBatch(trainerOfBatch(batch));
    s.getState().setImported({ batch, name: 'a.json', report: { findings: [], skipped: [], counts: { error: 0, warning: 0, info: 0 } } });
    expect(settingOf(settingsOf(s.getState()), 'config', 'beta')).toEqual({ value: 0.07, provenance: { origin: 'file', label: 'a.json' } });
  });
});
