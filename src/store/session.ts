// The session slices (not persisted): GPU adapter and model, the imported batch, the batch on screen with
// its Doctor findings (an import's under the user's edited settings: JudgedImport), the stepper (what the update starts from, each stage's status, time and memory),
// what the token view shows, and the error messages. Each stage's data from the worker is kept by
// reference under its stage id in `run` (typed arrays are never copied or mutated).
import type { StateCreator } from 'zustand';
import type { AdapterReport } from '../gpu/context.ts';
import type { DoctorReport } from '../doctor/types.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import { STAGES, type MismatchResult, type CorrectionSummary, type CorrectionsResult, type ErrorKind, type Finding, type LoadProgress, type ModelInfo, type StageId, type StagePayloads, type StageResult, type StepSettings, type TokenTexts, type WhatIfResult, type BeforeAfterResult, type WeightsMode, type TemplateDiff, type PagePlan, type InferredIds } from '../bridge/protocol.ts';

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

/** What each completed stage of the current update produced, by stage (absent: not run, or skipped). */
export type RunResults = Partial<{ [S in StageId]: StagePayloads[S] }>;

export interface StageState {
  status: 'pending' | 'running' | 'done' | 'skipped' | 'error';
  ms?: number;
  gpuBytes?: number;
  peakBytes?: number;
  /** Why a skipped stage did not run. */
  skipped?: string;
}

/** A batch read from a file, with the Doctor's report on it. */
export interface ImportedBatch {
  batch: GrpoBatch;
  name: string;
  report: DoctorReport;
  /** The import's request id: how the worker names this batch (it keeps the last import; the page never sends it back). */
  importId?: number;
  /** Decoded tokens, when a model's tokenizer was loaded at import. */
  token_texts?: TokenTexts;
  /** The reader's notes: the trainer format it was read as, assumptions, keys it did not read. */
  notes?: string[];
  /** The ids the reader inferred: an update from this batch carries them, so its stages' Doctor downgrades what the import's did. */
  inferred?: InferredIds;
}

/**
 * The imported batch's Doctor report under settings other than the file's own: the next update's once the user
 * edited them (a form edit, another trainer, a what-if applied), or the started update's; what the page's Export
 * writes, so its report is `grpo-studio doctor`'s on that file (src/store/controller.ts asks the worker; which
 * settings: src/store/export_batch.ts importDoctorSettings). While it exists for the imported batch it is what the
 * Doctor shows for it instead of `imported.report`; null: the file's own settings, and its own report.
 */
export interface JudgedImport {
  /** The imported batch it is for (another import makes it void). */
  batch: GrpoBatch;
  /**
   * 'busy': a report for the settings now is on its way (the one shown, if any, is for earlier ones: `changes`);
   * 'ready': `report` is for the settings now; 'error': there is none (the settings cannot be formed, or the worker
   * failed): `error` says why, and no findings are shown.
   */
  status: 'busy' | 'ready' | 'error';
  /** The report judged under the edited settings (kept while the next is on its way), or null: none yet. */
  report: DoctorReport | null;
  /** What `report`'s settings change against the file's own (src/grpo/settings/effective.ts settingsChanges). */
  changes: string[];
  error?: string;
}

export interface BatchSlice {
  /** The last imported batch (kept while steps from the prompt set replace the view). */
  imported: ImportedBatch | null;
  /** The imported batch's Doctor under the edited settings (JudgedImport), or null: its own report stands. */
  judged: JudgedImport | null;
  /** Another judgement of the imported batch (or none: its own report again); the findings on screen follow while it is shown. */
  setJudged(judged: JudgedImport | null): void;
  /** What the next update starts from: the prompt set, or the imported batch (render / sample / reward skipped). */
  stepFrom: 'prompts' | 'import';
  /** The batch on screen: the imported one, or the current update's assembled batch. */
  batch: GrpoBatch | null;
  batchName: string;
  batchOrigin: 'import' | 'step' | null;
  /** Decoded tokens of the batch on screen (the tokenizer's), or null: the grid then shows ids. */
  tokenTexts: TokenTexts | null;
  findings: Finding[];
  /** Rules the Doctor could not run on this batch, and why. */
  skipped: DoctorReport['skipped'];
  run: RunResults;
  /**
   * The settings the current update was started with: every number in `run` was computed with these, so
   * labels read them (never the form's current values) and a form that differs marks the results stale.
   */
  runSettings: StepSettings | null;
  /** The what-if form: a trainer and config values to try on this update's batch over its settings, null until first changed. */
  whatIfSettings: { trainer: TrainerId; edits: Record<string, unknown> } | null;
  /** The latest what-if result: the loss recomputed on the same batch under whatIfSettings. */
  whatIf: WhatIfResult | null;
  setWhatIfSettings(s: { trainer: TrainerId; edits: Record<string, unknown> } | null): void;
  setWhatIf(r: WhatIfResult | null): void;
  /** The before/after check of this update (its samples vs the same prompts re-sampled after the step). */
  beforeAfter: BeforeAfterResult | null;
  setBeforeAfter(r: BeforeAfterResult | null): void;
  stages: Record<StageId, StageState>;
  /** What the next update starts from (StepSettings.weights): the weights the last update stepped to, or the weights as loaded. */
  weights: WeightsMode;
  setWeights(w: WeightsMode): void;
  /** Optimizer steps the policy is away from the weights as loaded, as the worker applied and undid them. */
  policySteps: number;
  setPolicySteps(n: number): void;
  /** Index in STAGES of the stage Next runs; STAGES.length when the update is complete. */
  cursor: number;
  running: boolean;
  /**
   * Stage requests the worker has not answered yet. Dropping an update (an import, a model change, Reset) resets
   * the stages at once, but the worker is still computing the stage it was asked for: no new stage may be asked
   * until it answers, or the two updates' stages interleave in the worker.
   */
  stageRequests: number;
  trackStageRequest(delta: 1 | -1): void;
  setImported(imported: ImportedBatch): void;
  /**
   * The Doctor's full report on the imported `batch` (and its token texts) from the model loaded now: its deferred
   * tokenizer checks done, or checked again after another model's load; ignored if another batch was imported since.
   */
  setImportedReport(batch: GrpoBatch, report: DoctorReport, token_texts?: TokenTexts): void;
  /** The imported batch's notes (the reader's, then what its settings changed). */
  setImportedNotes(notes: string[]): void;
  setStepFrom(from: BatchSlice['stepFrom']): void;
  stageStarted(stage: StageId, settings?: StepSettings): void;
  stageDone(result: StageResult): void;
  stageFailed(stage: StageId): void;
  setRunning(running: boolean): void;
  /** Back to before the first stage; the view shows the imported batch when the next update starts from it. */
  resetRun(): void;
}

/**
 * The mismatch explorer's answer for one batch: `key` is what it was asked for (the imported batch, or the loss
 * stage's payload of an update: a new update is a new key), so an answer for a batch no longer on screen is never shown.
 */
export interface MismatchState {
  key: object;
  status: 'busy' | 'ready' | 'error';
  /** Asked with the trainer side recomputed by the loaded model. */
  recompute: boolean;
  result: MismatchResult | null;
}

/**
 * What the corrections would do on the explorer's batch, for the analysis `key` (a MismatchResult: a new analysis,
 * e.g. a recompute, is a new trainer side and so new effects), by correction id, with the user's edits of each.
 */
export interface CorrectionsState {
  key: MismatchResult;
  /** Corrections whose answer is on its way. */
  busy: string[];
  table: CorrectionsResult['table'];
  effects: Record<string, CorrectionSummary>;
  edits: Record<string, Record<string, unknown>>;
}

export interface MismatchSlice {
  mismatchOpen: boolean;
  mismatch: MismatchState | null;
  mismatchCorrections: CorrectionsState | null;
  setMismatchOpen(open: boolean): void;
  setMismatch(m: MismatchState | null): void;
  setMismatchCorrections(c: CorrectionsState | null): void;
}

export type Overlay = 'none' | 'attention' | 'completion' | 'tool';
export type TurnsView = 'off' | 'bands' | 'collapsed';
export type HeatMetric = 'none' | 'logp' | 'old_logp' | 'ref_logp' | 'sampling_logp' | 'entropy' | 'kl' | 'ratio' | 'loss' | 'weight' | 'clip' | 'dlogp' | 'whatif_dloss' | 'whatif_dgrad' | 'whatif_dweight' | 'diff' | 'trainer_loss' | 'trainer_dlogp' | 'effective_mask' | 'mask_factor' | 'is_weight' | 'log_ratio';

export interface ViewSlice {
  /** A batch pinned to compare the batch on screen with, token by token. */
  diffBase: { name: string; batch: GrpoBatch } | null;
  setDiffBase(b: ViewSlice['diffBase']): void;
  /** The prompt set rendered with two chat-template variants, aligned token by token (null until asked). */
  templateDiff: TemplateDiff | null;
  setTemplateDiff(d: TemplateDiff | null): void;
  /** The memory plan of an update with the current prompt set, G and completion length (null: not asked yet, the model's default-task plan stands). */
  plan: PagePlan | null;
  setPlan(p: PagePlan | null): void;
  overlay: Overlay;
  heat: HeatMetric;
  /** How the grid shows a multi-turn row's turns: not at all, as role bands over the tokens, or one cell per turn. */
  turnsView: TurnsView;
  setTurnsView(v: TurnsView): void;
  /** The pass over the batch (1 … μ) whose ratio, KL, loss and clip bits the heat, inspector and loss table show. */
  pass: number;
  setPass(pass: number): void;
  /** The selected cell (sample, column of the grid), or null. */
  selected: { sample: number; col: number } | null;
  /**
   * A Doctor finding's location to highlight: sample, field and [start, end) positions in that field's row.
   * No sample: a batch-level finding (config, group sizes), which selects no row.
   */
  focus: { sample?: number; field?: string; span?: [number, number]; rule: string } | null;
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
  /** Form fields whose text is not a valid value, by label: an update does not start while any exist. */
  formErrors: Record<string, string>;
  setFormError(field: string, problem: string | null): void;
  pushError(e: Omit<StudioError, 'id'>): void;
  dismissError(id: number): void;
}

export type SessionSlices = ModelSlice & BatchSlice & MismatchSlice & ViewSlice & ErrorSlice;

const pendingStages = (): Record<StageId, StageState> => Object.fromEntries(STAGES.map((s) => [s, { status: 'pending' }])) as Record<StageId, StageState>;

const freshRun = () => ({ run: {}, runSettings: null, whatIfSettings: null, whatIf: null, beforeAfter: null, stages: pendingStages(), cursor: 0, running: false, pass: 1 });

const NO_FINDINGS = { findings: [] as Finding[], skipped: [] as DoctorReport['skipped'] };

/**
 * The Doctor's findings shown for an imported batch: under the edited settings where they are judged (none while
 * they cannot be: never the file's report in their place), else the file's own report.
 */
function importFindings(i: ImportedBatch, judged: JudgedImport | null): { findings: Finding[]; skipped: DoctorReport['skipped'] } {
  const report = judged?.batch === i.batch ? (judged.status === 'error' ? NO_FINDINGS : (judged.report ?? i.report)) : i.report;
  return { findings: report.findings, skipped: report.skipped };
}

/** The view of an imported batch, or of nothing. */
const showing = (i: ImportedBatch | null, judged: JudgedImport | null) =>
  i
    ? { batch: i.batch, batchName: i.name, batchOrigin: 'import' as const, tokenTexts: i.token_texts ?? null, ...importFindings(i, judged) }
    : { batch: null, batchName: '', batchOrigin: null, tokenTexts: null, findings: [], skipped: [] };

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

  imported: null,
  stepFrom: 'prompts',
  batch: null,
  batchName: '',
  batchOrigin: null,
  tokenTexts: null,
  findings: [],
  skipped: [],
  run: {},
  runSettings: null,
  whatIfSettings: null,
  whatIf: null,
  setWhatIfSettings: (whatIfSettings) => set({ whatIfSettings }),
  setWhatIf: (whatIf) => set({ whatIf }),
  beforeAfter: null,
  setBeforeAfter: (beforeAfter) => set({ beforeAfter }),
  stages: pendingStages(),
  weights: 'continue',
  setWeights: (weights) => set({ weights }),
  policySteps: 0,
  setPolicySteps: (policySteps) => set({ policySteps }),
  cursor: 0,
  running: false,
  stageRequests: 0,
  trackStageRequest: (delta) => set((s) => ({ stageRequests: s.stageRequests + delta })),
  setImported: (imported) => set(() => ({ imported, judged: null, stepFrom: 'import', ...freshRun(), ...showing(imported, null), selected: null, focus: null })),
  judged: null,
  setJudged: (judged) =>
    set((s) => {
      const i = s.imported;
      // The findings on screen change only while the imported batch is the one shown.
      return i && s.batchOrigin === 'import' && s.batch === i.batch ? { judged, ...importFindings(i, judged) } : { judged };
    }),
  setImportedNotes: (notes) => set((s) => (s.imported ? { imported: { ...s.imported, notes } } : {})),
  setImportedReport: (batch, report, token_texts) =>
    set((s) => {
      if (s.imported?.batch !== batch) return {};
      const imported = { ...s.imported, report, token_texts };
      // The findings (and decoded tokens) on screen change only while the imported batch is the one shown, and then
      // only where the file's own settings are the ones judged (JudgedImport).
      return s.batchOrigin === 'import' && s.batch === batch ? { imported, ...importFindings(imported, s.judged), tokenTexts: token_texts ?? null } : { imported };
    }),
  setStepFrom: (stepFrom) => set((s) => ({ stepFrom, ...freshRun(), ...showing(stepFrom === 'import' ? s.imported : null, s.judged) })),
  // An update from the loaded weights restores them at its first stage; the step stage moves them one step on.
  stageStarted: (stage, settings) =>
    set((s) => ({ stages: { ...s.stages, [stage]: { status: 'running' } }, runSettings: settings ?? s.runSettings, policySteps: settings?.weights === 'loaded' ? 0 : s.policySteps })),
  stageDone: (r) =>
    set((s) => {
      const a = r.id === 'assemble' ? (r.data as StagePayloads['assemble'] | null) : null;
      // The assembled batch replaces the view; the first completion token of sample 0 is selected, so the
      // inspectors show what the trainer sees there without a click.
      const assembled = a
        ? {
            batch: a.batch, batchOrigin: 'step' as const, tokenTexts: a.token_texts, batchName: s.stepFrom === 'import' ? `${s.imported?.name ?? 'batch'} (stepped)` : 'current step',
            findings: a.report.findings, skipped: a.report.skipped, selected: s.selected ?? { sample: 0, col: a.padded.P },
          }
        : {};
      // The loss stage re-checks the batch once old_per_token_logps exist (sampler vs trainer log-probs).
      const rechecked = r.id === 'loss' && r.data && 'report' in r.data ? { findings: r.data.report.findings, skipped: r.data.report.skipped } : {};
      return {
        run: r.data ? { ...s.run, [r.id]: r.data } : s.run,
        ...assembled,
        ...rechecked,
        stages: { ...s.stages, [r.id]: { status: r.skipped ? 'skipped' : 'done', ms: r.ms, gpuBytes: r.gpuBytes, peakBytes: r.peakBytes, skipped: r.skipped } },
        cursor: Math.max(s.cursor, STAGES.indexOf(r.id) + 1),
        policySteps: s.policySteps + (r.id === 'step' && !r.skipped ? 1 : 0),
      };
    }),
  stageFailed: (stage) => set((s) => ({ stages: { ...s.stages, [stage]: { status: 'error' } }, running: false })),
  setRunning: (running) => set({ running }),
  resetRun: () => set((s) => ({ ...freshRun(), ...(s.batchOrigin === 'step' ? showing(s.stepFrom === 'import' ? s.imported : null, s.judged) : {}) })),

  mismatchOpen: false,
  mismatch: null,
  setMismatchOpen: (mismatchOpen) => set({ mismatchOpen }),
  mismatchCorrections: null,
  setMismatch: (mismatch) => set({ mismatch }),
  setMismatchCorrections: (mismatchCorrections) => set({ mismatchCorrections }),

  diffBase: null,
  setDiffBase: (diffBase) => set({ diffBase }),
  templateDiff: null,
  setTemplateDiff: (templateDiff) => set({ templateDiff }),
  plan: null,
  setPlan: (plan) => set({ plan }),
  overlay: 'completion',
  heat: 'none',
  turnsView: 'bands',
  setTurnsView: (turnsView) => set({ turnsView }),
  pass: 1,
  setPass: (pass) => set({ pass }),
  selected: null,
  focus: null,
  setOverlay: (overlay) => set({ overlay }),
  setHeat: (heat) => set({ heat }),
  select: (selected) => set({ selected }),
  setFocus: (focus) => set(focus && focus.sample === undefined ? { focus, selected: null } : { focus }),

  errors: [],
  formErrors: {},
  setFormError: (field, problem) =>
    set((s) => {
      if ((s.formErrors[field] ?? null) === problem) return {};
      const formErrors = { ...s.formErrors };
      if (problem === null) delete formErrors[field];
      else formErrors[field] = problem;
      return { formErrors };
    }),
  pushError: (e) => set((s) => ({ errors: [...s.errors.filter((x) => x.message !== e.message), { ...e, id: nextErrorId++ }] })),
  dismissError: (id) => set((s) => ({ errors: s.errors.filter((e) => e.id !== id) })),
});
