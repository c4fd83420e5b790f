// Studio v2 store behaviour without a browser: results carry the settings their update started with
// (a later form change is reported as stale, never relabels them); a batch-level finding selects no row;
// form errors are registered by field and cleared; invalid number text is named; a reset forgets the
// what-if together with the run.
import { describe, expect, it } from 'vitest';
import { createStudioStore } from '../../src/store/index.ts';
import { numberProblem } from '../../src/ui/fields.tsx';
import { effectiveOf, staleFields } from '../../src/store/derived.ts';
import { settingOf } from '../../src/grpo/settings/effective.ts';
import { memoryStorage } from '../helpers/page_store.ts';

type State = ReturnType<ReturnType<typeof createStudioStore>['getState']>;
const effective = (s: State) => {
  const e = effectiveOf(s);
  if (!('settings' in e)) throw new Error(e.error);
  return e.settings;
};
const settingsOf = (s: State) => ({ prompts: s.prompts, sampling: s.sampling, rewards: s.rewards, settings: effective(s) });

describe('results keep the settings they were computed with', () => {
  it('captures the settings at the first stage; later changes are stale fields, not new labels', () => {
    const store = createStudioStore(memoryStorage());
    const s = store.getState();
    s.stageStarted('render', structuredClone(settingsOf(s)));
    const ranType = settingOf(store.getState().runSettings!.settings, 'config', 'loss_type').value;
    expect(staleFields(store.getState().runSettings, settingsOf(store.getState()))).toEqual([]);
    const other = ranType === 'grpo' ? 'bnpo' : 'grpo';
    store.getState().setSetting('prompts', 'config', 'loss_type', other);
    store.getState().setSetting('prompts', 'config', 'beta', 0.5);
    // Later stages do not replace the captured settings.
    store.getState().stageStarted('sample');
    expect(settingOf(store.getState().runSettings!.settings, 'config', 'loss_type').value).toBe(ranType);
    const stale = staleFields(store.getState().runSettings, settingsOf(store.getState()));
    // Each changed setting by name, with where its value came from then and now.
    expect(stale).toContain(`config.loss_type: "${ranType}" (preset) → "${other}" (edited)`);
    expect(stale.some((f) => f.startsWith('config.beta: '))).toBe(true);
    expect(stale).toHaveLength(2);
    store.getState().setSampling({ seed: 7 });
    expect(staleFields(store.getState().runSettings, settingsOf(store.getState()))).toContain('sampling changed');
    store.getState().resetRun();
    expect(store.getState().runSettings).toBeNull();
    expect(store.getState().whatIf).toBeNull();
  });
});

describe('findings and form errors', () => {
  it('a finding without a sample clears the selection instead of selecting row 0', () => {
    const store = createStudioStore(memoryStorage());
    store.getState().select({ sample: 3, col: 4 });
    store.getState().setFocus({ rule: 'pad-equals-eos' });
    expect(store.getState().selected).toBeNull();
    store.getState().select({ sample: 3, col: 4 });
    store.getState().setFocus({ rule: 'mask-length-mismatch', sample: 5, span: [0, 2] });
    expect(store.getState().selected).toEqual({ sample: 3, col: 4 }); // the grid then moves it to the span
  });

  it('registers and clears form errors by field', () => {
    const store = createStudioStore(memoryStorage());
    store.getState().setFormError('G (num_generations)', '"abc" is not a number');
    expect(store.getState().formErrors).toEqual({ 'G (num_generations)': '"abc" is not a number' });
    store.getState().setFormError('G (num_generations)', null);
    expect(store.getState().formErrors).toEqual({});
  });

  it('names what is wrong with a number field text', () => {
    expect(numberProblem('abc', {})).toBe('"abc" is not a number');
    expect(numberProblem('2', { max: 1 })).toBe('2 is above the maximum 1');
    expect(numberProblem('-1', { min: 0 })).toBe('-1 is below the minimum 0');
    expect(numberProblem('2.5', { integer: true })).toBe('2.5 is not an integer');
    expect(numberProblem('', {})).toBe('is empty');
    expect(numberProblem('', { nullable: true })).toBeNull();
    expect(numberProblem(' 0.9 ', { min: 0, max: 1 })).toBeNull();
  });
});
