// The page's store in node: an in-memory localStorage (what the store persists, readable back), and the page's
// controller wired to a scripted worker class in place of the studio worker — one setup for the store tests.
import { vi } from 'vitest';
import type { StateStorage } from 'zustand/middleware';

export function memoryStorage(): StateStorage & { data: Map<string, string> } {
  const data = new Map<string, string>();
  return { data, getItem: (k) => data.get(k) ?? null, setItem: (k, v) => void data.set(k, v), removeItem: (k) => void data.delete(k) };
}

type Store = ReturnType<typeof import('../../src/store/index.ts').studioStore>;

/** The controller and the page's store over `worker` (stubbed as the global Worker before they load). */
export async function pageWithWorker(worker: unknown): Promise<{ controller: typeof import('../../src/store/controller.ts'); studio: Store; store: () => ReturnType<Store['getState']> }> {
  vi.stubGlobal('localStorage', memoryStorage());
  vi.stubGlobal('Worker', worker);
  const controller = await import('../../src/store/controller.ts');
  const { studioStore } = await import('../../src/store/index.ts');
  const studio = studioStore();
  return { controller, studio, store: () => studio.getState() };
}
