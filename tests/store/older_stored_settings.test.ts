// Settings a page of an older version stored (version 1: a full loss form, a trainer preset object) are values, not
// the edits this version keeps, so they are not carried over; the page names them, so nothing the user entered is
// lost without a word. The stored prompts and sampling are kept as before (tests/store/ui_store.test.ts).
import { describe, expect, it } from 'vitest';
import { STORAGE_KEY, createStudioStore } from '../../src/store/index.ts';
import { memoryStorage } from '../helpers/page_store.ts';

describe('a stored state of version 1', () => {
  it('names the loss form and trainer preset it does not carry over', () => {
    const storage = memoryStorage();
    const loss = { beta: 0.5, epsilon_low: 0.1 };
    const trainer = { trainer: 'verl', config: { ppo_micro_batch_size_per_gpu: 4 }, run: {} };
    storage.setItem(STORAGE_KEY, JSON.stringify({ state: { loss, trainer, sampling: { top_p: 0.5 } }, version: 1 }));
    const s = createStudioStore(storage).getState();
    const notices = s.errors.filter((e) => e.kind === 'notice');
    expect(notices).toHaveLength(1);
    expect(notices[0].message).toContain(JSON.stringify(loss));
    expect(notices[0].message).toContain(JSON.stringify(trainer));
    expect(s.sampling.top_p).toBe(0.5);
  });

  it('says nothing of a state of this version, or an older one without those settings', () => {
    const storage = memoryStorage();
    createStudioStore(storage).getState().setSampling({ top_p: 0.5 });
    expect(createStudioStore(storage).getState().errors).toEqual([]);
    const older = memoryStorage();
    older.setItem(STORAGE_KEY, JSON.stringify({ state: { prompts: [{ system: '', user: 'u', answer: 'a' }] }, version: 1 }));
    expect(createStudioStore(older).getState().errors).toEqual([]);
  });
});
