// The session slices (not persisted): GPU adapter and model, the batch on screen with its Doctor findings,
// the stepper, what the token view shows, and the error messages. Per-token typed arrays from the worker
// are kept by reference (they are never copied or mutated), merged stage by stage into `run`.
import type { StateCreator } from 'zustand';
import type { AdapterReport } from '../gpu/context.ts';
import type { DoctorReport } from '../doctor/types.ts';
import type { GrpoBatch } from '../io/batch.ts';
import { STAGES, type ErrorKind, type Finding, type LoadProgress, type ModelInfo, type StageId, type StagePayloads, type StageResult } from '../worker/protocol.ts';

export type Status = 'idle' | 'busy' | 'ready' | 'error';

export interface ModelSlice {
  gpuStatus: Status;
  adapter: AdapterReport | null;
  modelStatus: Status;
  model: ModelInfo | null;
  loadProgress: LoadProgress | null;
  /** The Hub id typed in the model panel. */
  hubId: string;
  setGpu(status: Status, adapter?: AdapterReport | null): void;
  setModel(status: Status, model?: ModelInfo | null): void;
  setLoadProgress(p: LoadProgress | null): void;
  setHubId(id: string): void;
}

/** Everything the stages of the current update produced, merged (later stages add fields). */
export type RunResults = Partial<StagePayloads['render'] & StagePayloads['sample'] & StagePayloads['reward'] & StagePayloads['advantages'] &
  StagePayloads['assemble'] & StagePayloads['policy_forward'] & StagePayloads['reference_forward'] & StagePayloads['loss'] &
  StagePayloads['backward'] & StagePayloads['step'] & StagePayloads['re_evaluate']>;

export interface StageState {
  status: 'pending' | 'running' | 'done' | 'error';
  ms?: number;
  gpu_ms?: number;
  memory?: StageResult['memory'];
}

export interface BatchSlice {
  batch: GrpoBatch | null;
  batchName: string;
  batchOrigin: 'import' | 'step' | null;
  findings: Finding[];
  /** Rules the Doctor could not run on this batch, and why. */
  skipped: DoctorReport['skipped'];
  run: RunResults;
  stages: Record<StageId, StageState>;
  /** Index in STAGES of the stage Next runs; STAGES.length when the update is complete. */
  cursor: number;
  running: boolean;
  setImported(batch: GrpoBatch, name: string, report: DoctorReport): void;
  stageStarted(stage: StageId): void;
  stageDone(result: StageResult): void;
  stageFailed(stage: StageId): void;
  setRunning(running: boolean): void;
  resetRun(): void;
}

export type Overlay = 'none' | 'attention' | 'completion' | 'tool';
export type HeatMetric = 'none' | 'logp' | 'old_logp' | 'ref_logp' | 'sampling_logp' | 'entropy' | 'kl' | 'ratio' | 'loss' | 'weight' | 'clip' | 'dlogp';

export interface ViewSlice {
  overlay: Overlay;
  heat: HeatMetric;
  /** The selected cell (sample, column of the grid), or null. */
  selected: { sample: number; col: number } | null;
  /** A Doctor finding's location to highlight: sample, field and [start, end) positions in that field's row. */
  focus: { sample: number; field?: string; span?: [number, number]; rule: string } | null;
  setOverlay(o: Overlay): void;
  setHeat(h: HeatMetric): void;
  select(sel: { sample: number; col: number } | null): void;
  setFocus(f: ViewSlice['focus']): void;
}

export interface StudioError {
  id: number;
  kind: ErrorKind;
  message: string;
  detail?: string;
}

export interface ErrorSlice {
  errors: StudioError[];
  pushError(e: Omit<StudioError, 'id'>): void;
  dismissError(id: number): void;
}

export type SessionSlices = ModelSlice & BatchSlice & ViewSlice & ErrorSlice;

const pendingStages = (): Record<StageId, StageState> => Object.fromEntries(STAGES.map((s) => [s, { status: 'pending' }])) as Record<StageId, StageState>;

let nextErrorId = 1;

export const createSessionSlices: StateCreator<SessionSlices, [], [], SessionSlices> = (set) => ({
  gpuStatus: 'idle',
  adapter: null,
  modelStatus: 'idle',
  model: null,
  loadProgress: null,
  hubId: '',
  setGpu: (gpuStatus, adapter) => set((s) => ({ gpuStatus, adapter: adapter === undefined ? s.adapter : adapter })),
  setModel: (modelStatus, model) => set((s) => ({ modelStatus, model: model === undefined ? s.model : model })),
  setLoadProgress: (loadProgress) => set({ loadProgress }),
  setHubId: (hubId) => set({ hubId }),

  batch: null,
  batchName: '',
  batchOrigin: null,
  findings: [],
  skipped: [],
  run: {},
  stages: pendingStages(),
  cursor: 0,
  running: false,
  setImported: (batch, batchName, report) =>
    set({ batch, batchName, findings: report.findings, skipped: report.skipped, batchOrigin: 'import', run: {}, stages: pendingStages(), cursor: 0, selected: null, focus: null }),
  stageStarted: (stage) => set((s) => ({ stages: { ...s.stages, [stage]: { status: 'running' } } })),
  stageDone: (r) =>
    set((s) => {
      const run = { ...s.run, ...(r.payload as RunResults) };
      const a = r.stage === 'assemble' ? (r.payload as StagePayloads['assemble']) : null;
      const assembled = a ? { batch: a.batch, batchOrigin: 'step' as const, batchName: 'current step', findings: a.report?.findings ?? [], skipped: a.report?.skipped ?? [] } : {};
      return {
        run,
        ...assembled,
        stages: { ...s.stages, [r.stage]: { status: 'done', ms: r.ms, gpu_ms: r.gpu_ms, memory: r.memory } },
        cursor: Math.max(s.cursor, STAGES.indexOf(r.stage) + 1),
      };
    }),
  stageFailed: (stage) => set((s) => ({ stages: { ...s.stages, [stage]: { status: 'error' } }, running: false })),
  setRunning: (running) => set({ running }),
  resetRun: () => set((s) => ({ run: {}, stages: pendingStages(), cursor: 0, running: false, ...(s.batchOrigin === 'step' ? { batch: null, batchOrigin: null, findings: [], skipped: [] } : {}) })),

  overlay: 'none',
  heat: 'none',
  selected: null,
  focus: null,
  setOverlay: (overlay) => set({ overlay }),
  setHeat: (heat) => set({ heat }),
  select: (selected) => set({ selected }),
  setFocus: (focus) => set({ focus }),

  errors: [],
  pushError: (e) => set((s) => ({ errors: [...s.errors.filter((x) => x.message !== e.message), { ...e, id: nextErrorId++ }] })),
  dismissError: (id) => set((s) => ({ errors: s.errors.filter((e) => e.id !== id) })),
});
