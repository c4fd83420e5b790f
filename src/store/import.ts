// The import in progress (at most one): what it is doing, how far along, and how to stop it. A store of
// its own, like hover.ts: progress changes often and only the import bar subscribes.
import { useStore } from 'zustand';
import { createStore } from 'zustand/vanilla';
import type { LoadProgress } from '../bridge/protocol.ts';

export interface ImportState {
  name: string | null;
  progress: LoadProgress | null;
  /** Stops the import (the file read, or the worker's parse); null when none runs. */
  cancel: (() => void) | null;
  set(s: Partial<Pick<ImportState, 'name' | 'progress' | 'cancel'>>): void;
}

export const importStore = createStore<ImportState>()((set) => ({
  name: null,
  progress: null,
  cancel: null,
  set: (s) => set(s),
}));

export function useImport<T>(selector: (s: ImportState) => T): T {
  return useStore(importStore, selector);
}
