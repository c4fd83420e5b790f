// The prompt set's sampler values are its trainer's (SettingSpec.sampler): TRL samples and scores with one
// temperature, caps completions and divides dr_grpo by one max_completion_length, groups by one num_generations.
// The sampling form holds each once: an edit of the trainer's row goes to it (and "reset" gives the task's back),
// the resolution takes it as a layer (provenance "sampling form"), an older stored state's edit of such a row
// moves into it, and an update whose settings hold another value than its sampler's is refused naming both.
import { describe, expect, it } from 'vitest';
import { STORAGE_KEY, createStudioStore } from '../../src/store/index.ts';
import { effectiveOf } from '../../src/store/derived.ts';
import { settingOf, type EffectiveSettings } from '../../src/grpo/settings/effective.ts';
import { noEdits, pageSettings, samplerOf } from '../../src/bridge/settings.ts';
import { DEFAULT_SAMPLING_SETTINGS } from '../../src/store/settings.ts';
import { TASKS } from '../../src/grpo/tasks.ts';
import { memoryStorage } from '../helpers/page_store.ts';

const resolved = (s: Parameters<typeof effectiveOf>[0]): EffectiveSettings => {
  const e = effectiveOf(s);
  if ('error' in e) throw new Error(e.error);
  return e.settings;
};

describe("the prompt set's sampler rows: one value, the sampling form's", () => {
  it('the sampling form sets the trainer rows (TRL names), with its provenance; an untouched form leaves the preset', () => {
    const store = createStudioStore(memoryStorage());
    expect(settingOf(resolved(store.getState()), 'config', 'max_completion_length')).toEqual({ value: TASKS.addition.config.max_completion_length, provenance: { origin: 'preset', label: 'addition task' } });
    store.getState().setSampling({ temperature: 0.7, max_new_tokens: 20, num_generations: 4, top_k: 5, top_p: 0.9, min_p: 0.05 });
    const s = resolved(store.getState());
    const form = { origin: 'edited', label: 'sampling form' };
    expect(settingOf(s, 'config', 'temperature')).toEqual({ value: 0.7, provenance: form });
    expect(settingOf(s, 'config', 'max_completion_length')).toEqual({ value: 20, provenance: form });
    expect(settingOf(s, 'config', 'num_generations')).toEqual({ value: 4, provenance: form });
    expect([settingOf(s, 'config', 'top_k').value, settingOf(s, 'config', 'top_p').value, settingOf(s, 'config', 'min_p').value]).toEqual([5, 0.9, 0.05]);
    // verl's and OpenRLHF's temperature rows are the same value under their names.
    store.getState().setTrainer('prompts', 'verl');
    expect(settingOf(resolved(store.getState()), 'config', 'temperature').value).toBe(0.7);
    store.getState().setTrainer('prompts', 'openrlhf');
    expect(settingOf(resolved(store.getState()), 'config', 'rollout.temperature').value).toBe(0.7);
  });

  it("an edit of such a row in the trainer form is the sampling form's value; reset gives the task's back", () => {
    const store = createStudioStore(memoryStorage());
    store.getState().setSetting('prompts', 'config', 'temperature', 0.5);
    store.getState().setSetting('prompts', 'config', 'max_completion_length', 30);
    expect(store.getState().sampling).toMatchObject({ temperature: 0.5, max_new_tokens: 30 });
    expect(store.getState().edits.trl.config).toEqual({});
    store.getState().setTrainer('prompts', 'openrlhf');
    store.getState().setSetting('prompts', 'config', 'rollout.temperature', 0.9);
    expect(store.getState().sampling.temperature).toBe(0.9);
    store.getState().setSetting('prompts', 'config', 'rollout.temperature', undefined);
    expect(store.getState().sampling.temperature).toBe(TASKS.addition.temperature);
    // Other rows stay edits; an imported batch's edits are its own (nothing goes to the prompt set's sampling).
    store.getState().setSetting('prompts', 'config', 'actor.eps_clip', 0.1);
    expect(store.getState().edits.openrlhf.config).toEqual({ 'actor.eps_clip': 0.1 });
    store.getState().setSetting('batch', 'config', 'temperature', 0.3);
    expect(store.getState().batchEdits.trl.config).toEqual({ temperature: 0.3 });
    expect(store.getState().sampling.temperature).toBe(TASKS.addition.temperature);
  });

  it("a what-if applied sets the sampling form's values through the same path", () => {
    const store = createStudioStore(memoryStorage());
    store.getState().setTrainerEdits('prompts', 'trl', { config: { num_generations: 4, beta: 0.2 }, run: {} });
    expect(store.getState().sampling.num_generations).toBe(4);
    expect(store.getState().edits.trl.config).toEqual({ beta: 0.2 });
  });

  it("an older stored state's edit of a sampler row moves into the sampling form (the active trainer's), never a second value", () => {
    const storage = memoryStorage();
    const edits = { ...noEdits(), trl: { config: { temperature: 0.6, beta: 0.1 }, run: {} }, verl: { config: { temperature: 0.2 }, run: {} } };
    storage.setItem(STORAGE_KEY, JSON.stringify({ state: { trainer: 'trl', edits, sampling: { ...DEFAULT_SAMPLING_SETTINGS, temperature: 1.1 } }, version: 2 }));
    const s = createStudioStore(storage).getState();
    expect(s.sampling.temperature).toBe(0.6);
    expect(s.edits.trl.config).toEqual({ beta: 0.1 });
    expect(s.edits.verl.config).toEqual({});
  });

  it("a value the sampler cannot run is named before anything runs: None as max_completion_length, G 1 or temperature 0 under TRL, TRL's repetition penalty over the completion only", () => {
    const store = createStudioStore(memoryStorage());
    // No cap (TRL's None) is nothing the page's sampler can sample with: kept as the user's edit, refused naming it.
    store.getState().setSetting('prompts', 'config', 'max_completion_length', null);
    expect(store.getState().sampling.max_new_tokens).toBe(TASKS.addition.config.max_completion_length);
    expect(store.getState().edits.trl.config).toEqual({ max_completion_length: null });
    expect(effectiveOf(store.getState())).toEqual({ error: expect.stringMatching(/^config\.max_completion_length null \(edited\): the page's sampler needs a value for its max_new_tokens; set it in the sampling form$/) });
    store.getState().setSetting('prompts', 'config', 'max_completion_length', undefined);
    expect('settings' in effectiveOf(store.getState())).toBe(true);
    // The form's values are checked against the rows they are, named as the form's.
    store.getState().setSampling({ num_generations: 1 });
    expect(effectiveOf(store.getState())).toEqual({ error: expect.stringMatching(/^sampling form: num_generations 1 is trl's config\.num_generations: /) });
    store.getState().setSampling({ num_generations: 8, temperature: 0 });
    expect(effectiveOf(store.getState())).toEqual({ error: expect.stringMatching(/^sampling form: temperature 0 is trl's config\.temperature: .*\(greedy decoding: untick "sample"\)$/) });
    // verl groups by uid: G 1 is its to run.
    store.getState().setSampling({ temperature: 1, num_generations: 1 });
    store.getState().setTrainer('prompts', 'verl');
    expect('settings' in effectiveOf(store.getState())).toBe(true);
    // TRL's repetition_penalty is vLLM's / HF's, over the prompt's tokens too.
    store.getState().setTrainer('prompts', 'trl');
    store.getState().setSampling({ num_generations: 8, repetition_penalty: 1.3 });
    expect(settingOf(resolved({ ...store.getState(), sampling: { ...store.getState().sampling, penalty_scope: 'prompt+completion' } }), 'config', 'repetition_penalty').value).toBe(1.3);
    expect(effectiveOf(store.getState())).toEqual({ error: expect.stringMatching(/repetition penalty .* counts the prompt's tokens too; set the sampling form's penalty scope to prompt\+completion$/) });
  });

  it('an update whose settings hold another value than its sampler is refused, naming both', () => {
    const sampling = { ...DEFAULT_SAMPLING_SETTINGS, max_new_tokens: 5 };
    const under = (t: 'trl' | 'verl') => pageSettings(t, { kind: 'prompts', sampling }, noEdits());
    expect(samplerOf(under('trl'), sampling)).toBe(sampling);
    // The task's preset alone (no sampling form) says 12 where the sampler caps at 5.
    const preset = pageSettings('trl', { kind: 'prompts' }, noEdits());
    expect(() => samplerOf(preset, sampling)).toThrow(/^config\.max_completion_length 12 \(addition task\) is not the sampler's max_new_tokens 5: trl samples with the value it scores with; set it in the sampling form$/);
    // verl has no completion-budget row: only its temperature is the sampler's.
    expect(samplerOf(under('verl'), sampling)).toBe(sampling);
    expect(() => samplerOf(under('verl'), { ...sampling, temperature: 0.5 })).toThrow(/^config\.temperature 1 \(default\) is not the sampler's temperature 0\.5/);
  });
});
