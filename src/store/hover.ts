// The hovered grid cell. It changes at mouse-move rate, so it lives in its own tiny store: only the token
// inspector subscribes, and the grid redraws its outline imperatively instead of re-rendering.
import { useStore } from 'zustand';
import { createStore } from 'zustand/vanilla';

export interface HoverState {
  cell: { sample: number; col: number } | null;
  setCell(cell: HoverState['cell']): void;
}

export const hoverStore = createStore<HoverState>()((set) => ({
  cell: null,
  setCell: (cell) => set({ cell }),
}));

export function useHover<T>(selector: (s: HoverState) => T): T {
  return useStore(hoverStore, selector);
}
