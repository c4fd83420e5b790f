// The page's layout and view controls: the side panels' widths and whether they are collapsed (persisted to
// local storage with the settings, src/store/index.ts, so a reload keeps them), the heat scale the user set
// per metric (src/view/heat_scale.ts), and the grid's row sort / filter (src/store/rows.ts derives the order).
// Only the user's choices live here; every range and order is derived from them and the batch on screen.
import type { StateCreator } from 'zustand';
import { DEFAULT_SCALE, type ScaleSettings } from '../view/heat_scale.ts';
import type { HeatMetric } from './session.ts';

export type Side = 'left' | 'right';

export interface PanelState {
  width: number;
  collapsed: boolean;
}

/** Bounds a side panel's width stays within (px): narrower cuts its forms, wider leaves the grid no room. */
export const PANEL_MIN = 220;
export const PANEL_MAX = 720;
/** The collapsed strip's width (px): room for the expand button. */
export const PANEL_COLLAPSED = 28;

/**
 * Default widths: the centre keeps about 660 px at 1280×800 (the grid, its toolbar and the stepper); the right
 * column's tables read whole from about 330 px (the loss table is one row per loss type), the left holds the forms.
 */
export const DEFAULT_PANELS: Record<Side, PanelState> = { left: { width: 270, collapsed: false }, right: { width: 350, collapsed: false } };

export const clampWidth = (w: number) => Math.round(Math.min(PANEL_MAX, Math.max(PANEL_MIN, w)));

/** The keys a row can be sorted by (their values: src/store/rows.ts). */
export const SORT_KEYS = ['reward', 'advantage', 'length', 'findings', 'loss', 'mismatch'] as const;
export type SortKey = (typeof SORT_KEYS)[number];

export interface RowSort {
  /** null: the batch's own order. */
  key: SortKey | null;
  descending: boolean;
  /** Only the rows a Doctor finding names. */
  findingsOnly: boolean;
}

export interface LayoutSlice {
  panels: Record<Side, PanelState>;
  setPanel(side: Side, patch: Partial<PanelState>): void;
  /** The user's heat scale per metric (absent: DEFAULT_SCALE). */
  heatScales: Partial<Record<HeatMetric, ScaleSettings>>;
  setHeatScale(metric: HeatMetric, patch: Partial<ScaleSettings>): void;
  rowSort: RowSort;
  setRowSort(patch: Partial<RowSort>): void;
}

/** A stored `panels` value, checked: anything not a sane width / flag keeps the default. */
export function storedPanels(v: unknown): Record<Side, PanelState> {
  const o = (v && typeof v === 'object' ? v : {}) as Partial<Record<Side, Partial<PanelState>>>;
  const side = (s: Side): PanelState => ({
    width: typeof o[s]?.width === 'number' && Number.isFinite(o[s]!.width) ? clampWidth(o[s]!.width!) : DEFAULT_PANELS[s].width,
    collapsed: typeof o[s]?.collapsed === 'boolean' ? o[s]!.collapsed! : DEFAULT_PANELS[s].collapsed,
  });
  return { left: side('left'), right: side('right') };
}

export const scaleOf = (s: Pick<LayoutSlice, 'heatScales'>, metric: HeatMetric): ScaleSettings => s.heatScales[metric] ?? DEFAULT_SCALE;

export const createLayoutSlice: StateCreator<LayoutSlice, [], [], LayoutSlice> = (set) => ({
  panels: structuredClone(DEFAULT_PANELS),
  setPanel: (side, patch) =>
    set((s) => ({ panels: { ...s.panels, [side]: { ...s.panels[side], ...patch, ...(patch.width !== undefined ? { width: clampWidth(patch.width) } : {}) } } })),
  heatScales: {},
  setHeatScale: (metric, patch) => set((s) => ({ heatScales: { ...s.heatScales, [metric]: { ...scaleOf(s, metric), ...patch } } })),
  rowSort: { key: null, descending: true, findingsOnly: false },
  setRowSort: (patch) => set((s) => ({ rowSort: { ...s.rowSort, ...patch } })),
});
