// The studio's one zustand store: settings slices (persisted to local storage) + session slices.
// `createStudioStore` takes the storage so tests can run the store in Node with an in-memory one.
import { TASKS } from '../grpo/tasks.ts';
import { useStore } from 'zustand';
import { createJSONStorage, persist, type StateStorage } from 'zustand/middleware';
import { createStore } from 'zustand/vanilla';
import { createSessionSlices, type SessionSlices } from './session.ts';
import { createSettingsSlice, PERSISTED_KEYS, withSamplerEdits, type SettingsSlice } from './settings.ts';
import { createLayoutSlice, storedPanels, type LayoutSlice } from './layout.ts';
import { TRAINERS, type TrainerId } from '../grpo/settings/types.ts';

export type StudioState = SettingsSlice & SessionSlices & LayoutSlice;

export const STORAGE_KEY = 'grpo-studio/settings';

/**
 * What a stored state of an older version held that this one does not read (version 1: a full loss form, a trainer
 * preset object), in words for the user, or null. Those are values, defaults among them, not the edits this version
 * keeps: read as edits they would pin old defaults over the current task's preset, so they are named, not carried over.
 */
function notCarriedOver(persisted: unknown, version: number): string | null {
  if (version >= 2 || !persisted || typeof persisted !== 'object') return null;
  const p = persisted as { loss?: unknown; trainer?: unknown };
  const old = [p.loss && typeof p.loss === 'object' ? `loss ${JSON.stringify(p.loss)}` : '', p.trainer && typeof p.trainer === 'object' ? `trainer ${JSON.stringify(p.trainer)}` : ''].filter(Boolean);
  return old.length ? `settings saved by an older version of the studio were not carried over (set them again in the settings panel): ${old.join('; ')}` : null;
}

export function createStudioStore(storage: StateStorage) {
  /** Said once the stored state is read (notCarriedOver). */
  let dropped: string | null = null;
  return createStore<StudioState>()(
    persist(
      (...a) => ({ ...createSettingsSlice(...a), ...createSessionSlices(...a), ...createLayoutSlice(...a) }),
      {
        name: STORAGE_KEY,
        version: 2,
        storage: createJSONStorage(() => storage),
        // An older version's prompts, sampling and rewards are the user's: merge keeps them and drops the rest, which
        // the page then names (without a migrate, zustand would drop the whole stored state on the version change).
        migrate: (persisted, version) => {
          dropped = notCarriedOver(persisted, version);
          return persisted as StudioState;
        },
        onRehydrateStorage: () => (state) => {
          if (dropped) state?.pushError({ kind: 'notice', message: dropped });
        },
        partialize: (s) => Object.fromEntries(PERSISTED_KEYS.map((k) => [k, s[k]])) as Pick<StudioState, (typeof PERSISTED_KEYS)[number]>,
        // A stored value from an older shape keeps the current defaults for keys it lacks.
        merge: (stored, current) => {
          const s = (stored ?? {}) as Partial<StudioState>;
          const merged: StudioState = {
            ...current,
            prompts: Array.isArray(s.prompts) ? s.prompts : current.prompts,
            rewards: Array.isArray(s.rewards) ? s.rewards : current.rewards,
            sampling: { ...current.sampling, ...s.sampling },
            // A task this version does not ship falls back to the default with its own prompt set's tools.
            task: s.task && s.task in TASKS ? s.task : current.task,
            tools: s.task && s.task in TASKS && s.tools !== undefined ? s.tools : current.tools,
            // Older shapes (a full loss form, a preset object) are not edits: they are dropped (and named), not reinterpreted.
            trainer: TRAINERS.includes(s.trainer as TrainerId) ? (s.trainer as TrainerId) : current.trainer,
            edits: s.edits && typeof s.edits === 'object' ? { ...current.edits, ...s.edits } : current.edits,
            panels: storedPanels(s.panels),
          };
          // An older version kept the prompt set's temperature (etc.) as a trainer edit too: the sampling form's now.
          return { ...merged, ...withSamplerEdits(merged) };
        },
      },
    ),
  );
}

export type StudioStore = ReturnType<typeof createStudioStore>;

/** The page's store (local storage). Created lazily so importing this module in Node does not touch it. */
let store: StudioStore | null = null;
export function studioStore(): StudioStore {
  store ??= createStudioStore(globalThis.localStorage);
  return store;
}

export function useStudio<T>(selector: (s: StudioState) => T): T {
  return useStore(studioStore(), selector);
}
