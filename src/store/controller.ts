// The page's actions: start the worker, import / export batches, load a model and drive the stepper.
// Components call these; they talk to the worker through the typed client and write results to the
// store. Nothing here blocks the page: every heavy call is a worker request. It is part of the store
// layer because it is the one place that talks to the worker (ui → store → worker). It also keeps an imported
// batch's Doctor report that of the settings its Export would record (watchImportDoctor).
import { TASKS, taskModelPath, type TaskId } from '../grpo/tasks.ts';
import type { RewardSample, RewardTable } from '../grpo/rewards.ts';
import { groupLabel, serializeBatch, type GrpoBatch } from '../io/batch.ts';
import { studioStore } from './index.ts';
import { StudioClient } from '../bridge/client.ts';
import { Cancelled, StudioFailure } from '../bridge/errors.ts';
import { importStore } from './import.ts';
import { STAGES, type AdapterChoice, type AdapterReference, type LoadProgress, type ModelChoice, type ModelInfo, type PackedLogRatio, type StageId, type StageResult, type StepSettings, type StepStart, type TemplateVariant } from '../bridge/protocol.ts';
import { editsReaching, promptConversation } from '../bridge/settings.ts';
import { settingsChanges, trainerOfBatch } from '../grpo/settings/effective.ts';
import { baseKindOf, baseOf, effectiveOf, mismatchShown, mismatchTarget, ranValue, reportSettings, whatIfOf } from './derived.ts';
import type { ReportInput } from '../report/html.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import type { CorrectionsState } from './session.ts';
import { exportBase } from './export_name.ts';
import { exportedBatch, exportNote, importDoctorSettings } from './export_batch.ts';
import type { StudioState } from './index.ts';

let client: StudioClient | null = null;

const store = () => studioStore().getState();

function fail(e: unknown): void {
  const f = e instanceof StudioFailure ? e : new StudioFailure('internal', e instanceof Error ? e.message : String(e));
  store().pushError({ kind: f.kind, message: f.message, detail: f.detail });
}

function worker(): StudioClient {
  if (!client) {
    const w = new Worker(new URL('../worker/studio.worker.ts', import.meta.url), { type: 'module', name: 'studio' });
    client = new StudioClient(w, {
      onProgress: (p) => store().setLoadProgress(p),
      // A lost device takes the loaded model and the update with it: the page says so and disables stepping.
      onDeviceLost: (e) => {
        store().setGpu('error');
        store().setModel('error', null);
        store().resetRun();
        store().pushError(e);
      },
    });
  }
  return client;
}

/** Probes WebGPU in the worker and shows the adapter; true when a device is ready. */
export async function initGpu(): Promise<boolean> {
  store().setGpu('busy');
  try {
    const { adapter } = await worker().request({ type: 'init' });
    store().setGpu('ready', adapter);
    return true;
  } catch (e) {
    store().setGpu('error', null);
    fail(e);
    return false;
  }
}

/** Opening the page: probe the GPU, then load the embedded default model so the first step is one click away. */
export async function startStudio(): Promise<void> {
  if ((await initGpu()) && store().modelStatus === 'idle') await loadDefaultModel();
}

/** The embedded model of the prompt set's task (public/models/<name>/, served beside the page: works offline). */
export function loadDefaultModel(): Promise<void> {
  const task = store().task;
  return loadModel({ kind: 'embedded', name: TASKS[task].model, url: new URL(`${taskModelPath(task)}/`, document.baseURI).href });
}

/** Another embedded task: its prompt set, sampling, rewards and tools, and the model trained on it. */
export function chooseTask(id: TaskId): Promise<void> {
  store().chooseTask(id);
  return loadDefaultModel();
}

let currentImport: AbortController | null = null;

/** One batch file: importBatchFiles([file]). */
export function importBatchFile(file: File): Promise<void> {
  return importBatchFiles([file]);
}

/**
 * Reads a batch file (grpo-batch/v1, or a trainer's dump: src/io/formats), checks it in the worker (schema +
 * Doctor) and shows it, with progress and a cancel (importStore) on the way. Its config (TRL's loss,
 * optimizer and clipping fields) fills the loss settings, so stepping it replays that trainer's update.
 * Several files (the ranks or experiences of one step, dropped or selected together) are one import, merged
 * in the worker exactly as `grpo-studio doctor a b` merges them (src/io/formats importBatch).
 */
export async function importBatchFiles(files: readonly File[]): Promise<void> {
  if (files.length === 0) return;
  const [file, ...more] = files;
  const name = files.map((f) => f.name).join(' + ');
  importStore.getState().cancel?.();
  const abort = new AbortController();
  currentImport = abort;
  const progress = (p: LoadProgress) => importStore.getState().set({ progress: p });
  importStore.getState().set({ name, progress: { label: 'starting', loaded: 0, total: 0 }, cancel: () => abort.abort() });
  try {
    // The Files themselves go to the worker (handles, not their bytes): reading, parsing, merging and checking happen there.
    const request = { type: 'import-batch' as const, file, name: file.name, ...(more.length ? { also: more.map((f) => ({ file: f, name: f.name })) } : {}) };
    const { import: importId, batch, report, token_texts, trainer, notes, tokenizer_checks, inferred } = await worker().request(request, { onProgress: progress, signal: abort.signal });
    await dropRun(false);

    // The batch's own settings are the base of its updates, with no edits: nothing an earlier batch or form set
    // carries over. What that changes against the settings before is listed with the reader's notes.
    const before = effectiveOf(store());
    store().startFromBatch(trainerOfBatch(batch));
    // What the reader had to assume or could not read is shown with the batch, not hidden.
    store().setImported({ batch, name, importId, report, token_texts, inferred, notes: trainer === 'grpo-batch/v1' ? notes : [`read as ${trainer}`, ...notes] });
    // The worker keeps the batch the page shows, and no other, for the requests that name it (a model's re-check, the explorer).
    void worker().request({ type: 'hold-import', import: importId }).catch(fail);
    const after = effectiveOf(store());
    const changed = 'settings' in before && 'settings' in after ? settingsChanges(before.settings, after.settings) : 'error' in after ? [`settings: ${after.error}`] : [];
    if (changed.length) store().setImportedNotes([...(store().imported?.notes ?? []), `settings now (${changed.length} changed): ${changed.join('; ')}`]);
    // The batch is on screen; the tokenizer's checks (a decode → encode of every row) follow.
    if (tokenizer_checks !== null) recheckImport(tokenizer_checks, batch);
    // From now on its report follows the settings its Export would record (edits, another trainer, Defaults, a what-if applied).
    watchImportDoctor();
  } catch (e) {
    // A cancel is the user's choice, not an error: the batch on screen stays as it was.
    if (!(e instanceof Cancelled)) fail(e);
  } finally {
    // A newer import replaced this one: its progress bar stays.
    if (currentImport === abort) importStore.getState().set({ name: null, progress: null, cancel: null });
  }
}

/**
 * The imported batch's Doctor report from the model loaded now (the worker's full check, tokenizer rules included):
 * what `grpo-studio doctor --tokenizer` gives with that model's folder, whichever model the import found.
 */
function recheckImport(importId: number, batch: GrpoBatch): void {
  void worker().request({ type: 'tokenizer-checks', import: importId }).then((r) => store().setImportedReport(batch, r.report, r.token_texts), fail);
}

/** How long the settings must stay put before the imported batch is judged under them: typing a value asks once. */
const JUDGE_DEBOUNCE_MS = 150;

/** Bumped whenever the settings the imported batch is judged under change: an answer asked before is dropped. */
let judgeSeq = 0;
/** The inputs of the last judgement (importDoctorSettings' and the model's): a store change that leaves them is nothing to do. */
let judgeInputs: readonly unknown[] | null = null;
/** The last judgement asked (its batch, model and settings): the same again (an update started with them) asks nothing. */
let judgeLast: { batch: GrpoBatch; model: unknown; key: string } | null = null;
let judgeTimer: ReturnType<typeof setTimeout> | null = null;
/** One judgement in the worker at a time; a change meanwhile sends the latest settings once it answers. */
let judging = false;
let judgeAgain = false;
let watchingImport = false;

/**
 * Keeps the imported batch's Doctor report on screen that of the settings its Export would record (src/store/
 * export_batch.ts importDoctorSettings), as `grpo-studio doctor` on that file gives it: on every change of those
 * settings (or of the model, whose tokenizer the Doctor reads) the report goes 'busy', and the worker judges the
 * batch under them (tokenizer-checks with `settings`) once they stayed put JUDGE_DEBOUNCE_MS, one request at a
 * time; an answer for settings that changed since is dropped. Back to the file's own settings: its own report at
 * once; settings that cannot be formed: that error, and no findings. Subscribed once; the listener compares a few
 * references on each store change and writes only when the judgement changes.
 */
function watchImportDoctor(): void {
  if (watchingImport) return;
  watchingImport = true;
  studioStore().subscribe(onJudgeInputs);
  onJudgeInputs(store());
}

function onJudgeInputs(s: StudioState): void {
  const inputs = [s.imported, s.batch, s.batchOrigin, s.stepFrom, s.batchTrainer, s.batchEdits, s.runSettings, s.model];
  if (judgeInputs?.every((x, i) => x === inputs[i])) return;
  judgeInputs = inputs;
  const target = importDoctorSettings(s);
  // Not on screen (an update's batch, the prompt set): judged again when it is shown again.
  if (!target) return;
  const batch = s.imported!.batch;
  const key = target.kind === 'edited' ? target.key : target.kind === 'error' ? `error: ${target.error}` : 'own';
  if (judgeLast?.batch === batch && judgeLast.model === s.model && judgeLast.key === key && (key === 'own') === (s.judged === null)) return;
  judgeLast = { batch, model: s.model, key };
  judgeSeq++;
  if (judgeTimer !== null) clearTimeout(judgeTimer);
  judgeTimer = null;
  if (target.kind === 'own') {
    if (s.judged !== null) s.setJudged(null);
    return;
  }
  if (target.kind === 'error') return s.setJudged({ batch, status: 'error', report: null, changes: [], error: target.error });
  // The report shown meanwhile (an earlier edit's) stays, said to be for those settings.
  const before = s.judged?.batch === batch && s.judged.status !== 'error' ? s.judged : null;
  if (before?.status !== 'busy') s.setJudged({ batch, status: 'busy', report: before?.report ?? null, changes: before?.changes ?? [] });
  judgeTimer = setTimeout(() => void judgeImport(), JUDGE_DEBOUNCE_MS);
}

/** Asks the worker for the imported batch's report under the settings now; a newer change meanwhile drops its answer. */
async function judgeImport(): Promise<void> {
  judgeTimer = null;
  if (judging) {
    judgeAgain = true;
    return;
  }
  const s = store();
  const target = importDoctorSettings(s);
  const imported = s.imported;
  if (target?.kind !== 'edited' || !imported) return;
  const seq = judgeSeq;
  const { batch } = imported;
  judging = true;
  try {
    if (imported.importId === undefined) throw new StudioFailure('internal', 'the imported batch has no import id: the worker cannot judge it under the edited settings');
    const r = await worker().request({ type: 'tokenizer-checks', import: imported.importId, settings: target.settings });
    if (seq === judgeSeq) store().setJudged({ batch, status: 'ready', report: r.report, changes: target.changes });
  } catch (e) {
    if (seq === judgeSeq) {
      store().setJudged({ batch, status: 'error', report: null, changes: target.changes, error: e instanceof Error ? e.message : String(e) });
      fail(e);
    }
  } finally {
    judging = false;
    if (judgeAgain) {
      judgeAgain = false;
      void judgeImport();
    }
  }
}

/**
 * Downloads the batch on screen (with this step's results and settings folded in: src/store/export_batch.ts) as
 * grpo-batch/v1 JSON; what the file leaves out of the form (edits made after the update started) is said beside it.
 */
export function exportBatch(): void {
  let out;
  try {
    out = exportedBatch(store());
  } catch (e) {
    return fail(e);
  }
  if (!out) return;
  // Strict JSON: a NaN reward (a reward function that did not apply) must not make the file unreadable to JSON.parse / jq.
  download(new Blob([serializeBatch(out, { strictJson: true })], { type: 'application/json' }), `${exportName()}.grpo-batch.json`);
  const note = exportNote(store());
  if (note) store().pushError({ kind: 'notice', message: `Export: ${note}` });
}

/**
 * Downloads one self-contained offline HTML report of the batch on screen: the grid (decoded tokens when a
 * tokenizer is loaded, the heat the page shows, passed in by the page), the Doctor's findings, the settings the update ran with and
 * its losses (src/report/html.ts, the same code as `grpo-studio report`).
 */
export async function saveReport(heat: ReportInput['heat']): Promise<void> {
  const s = store();
  if (!s.batch) return;
  const { renderReport } = await import('../report/html.ts');
  const counts = { error: 0, warning: 0, info: 0 };
  for (const f of s.findings) counts[f.severity]++;
  const loss = s.run.loss;
  // The explorer's analysis of this batch when it has one (the same numbers `grpo-studio report` computes).
  const shown = mismatchShown(s)?.result;
  const html = renderReport({
    name: s.batchName || 'batch',
    batch: s.batch,
    report: { findings: s.findings, skipped: s.skipped, counts },
    tokenTexts: s.tokenTexts,
    specialIds: s.model?.tokenizer?.special_token_ids,
    settings: reportSettings(s),
    losses: loss && s.runSettings ? { chosen: String(ranValue(s.runSettings.settings, 'loss_type')), before: loss.losses, after: s.run.re_evaluate?.losses_after } : null,
    // The log ratio is the report's own mismatch heat: passed once, as the explorer's analysis and rows.
    heat: s.heat === 'log_ratio' ? null : heat,
    mismatch: shown?.report && shown.log_ratio ? { report: shown.report, log_ratio: unpackLogRatio(shown.log_ratio) } : null,
    generator: 'GRPO Studio (page)',
  });
  download(new Blob([html], { type: 'text/html' }), `${exportName()}.report.html`);
}

/** The explorer's packed log-ratio rows as one row per sample (views, no copy). */
const unpackLogRatio = ({ values, offsets }: PackedLogRatio): Float32Array[] => Array.from({ length: offsets.length - 1 }, (_, b) => values.subarray(offsets[b], offsets[b + 1]));

/** The base name of an export of the batch on screen (src/store/export_name.ts). */
function exportName(): string {
  const s = store();
  return exportBase({ batchName: s.batchName, batchOrigin: s.batchOrigin, importedName: s.stepFrom === 'import' ? s.imported?.name : null, modelName: s.model?.name, policySteps: s.policySteps, stepDone: s.stages.step.status === 'done' });
}

/** Saves a blob as a file through a temporary link. */
function download(blob: Blob, name: string): void {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

/**
 * Runs a model-changing request (policy, reference): the model panel is busy with `label` meanwhile; on
 * success the update on screen is dropped (it was computed with the old model) and the answer shown; on
 * failure the model that worked before stays.
 */
async function changeModel(label: string, request: () => Promise<ModelInfo>, after: () => void = () => {}): Promise<void> {
  const previous = store().modelStatus === 'ready' ? store().model : null;
  store().setModel('busy');
  store().setLoadProgress({ label, loaded: 0, total: 0 });
  try {
    const model = await request();
    store().resetRun();
    after();
    store().setModel('ready', model);
  } catch (e) {
    store().setModel(previous ? 'ready' : 'error', previous);
    fail(e);
  } finally {
    store().setLoadProgress(null);
  }
}

/** Loads a model; on failure the model loaded before stays (the worker swaps only after a complete load). */
export function loadModel(source: ModelChoice): Promise<void> {
  return changeModel('starting', async () => (await worker().request({ type: 'load-model', source })).model, () => {
    store().setPolicySteps(0);
    // The imported batch's findings were the previous model's (its tokenizer, vocabulary): checked again with this one.
    const imported = store().imported;
    if (imported?.importId !== undefined) recheckImport(imported.importId, imported.batch);
  });
}

/**
 * Loads a second checkpoint as the reference of the next updates, or (null) goes back to the frozen copy
 * of the policy as loaded. The policy's weights stay; on failure the reference loaded before stays.
 */
export function loadReference(source: ModelChoice | null): Promise<void> {
  return changeModel('reference', async () => (await worker().request({ type: 'load-reference', source })).model);
}

/**
 * Attaches a LoRA adapter (a dropped PEFT folder or a new one), or (null) removes it: the base goes back to
 * its weights as loaded (a bf16 model is reloaded) and the optimizer starts afresh, so the step count does too.
 */
export function loadAdapter(source: AdapterChoice | null): Promise<void> {
  return changeModel(source ? 'adapter' : 'removing the adapter', async () => (await worker().request({ type: 'load-adapter', source })).model, () => store().setPolicySteps(0));
}

export function setAdapterReference(reference: AdapterReference): Promise<void> {
  return changeModel('adapter reference', async () => (await worker().request({ type: 'adapter-reference', reference })).model);
}

/**
 * Gradient checkpointing on or off for the next updates (the same numbers; the plan shows the memory). The plan
 * asked for before is dropped at once: the model's own plan shows the choice until the panel's next one answers.
 */
export async function setCheckpointing(on: boolean): Promise<void> {
  if (store().model?.memory_plan.options.checkpointing === on) return;
  await changeModel('gradient checkpointing', async () => (await worker().request({ type: 'checkpointing', on })).model, () => store().setPlan(null));
}

/** Downloads the stepped adapter as a PEFT folder's two files (no zip writer in the page: two downloads). */
export async function saveAdapter(): Promise<void> {
  try {
    const { files } = await worker().request({ type: 'save-adapter' });
    for (const [name, bytes] of Object.entries(files)) download(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: name.endsWith('.json') ? 'application/json' : 'application/octet-stream' }), name);
  } catch (e) {
    fail(e);
  }
}

/** The next update's settings; throws the reason they cannot be formed (a value the tables refuse). */
function settings(): StepSettings {
  const s = store();
  const { prompts, sampling, rewards, tools, weights } = s;
  const e = effectiveOf(s);
  if ('error' in e) throw new Error(e.error);
  return { prompts, sampling, rewards, tools, settings: e.settings, weights };
}

/** Where a new update starts: the imported batch when the stepper is set to it, else the prompt set. */
function start(): StepStart {
  const { stepFrom, imported } = store();
  return stepFrom === 'import' && imported ? { kind: 'batch', batch: imported.batch, inferred: imported.inferred } : { kind: 'prompts' };
}

/**
 * Why the form cannot start an update (a field whose text is not a valid value, an empty prompt), or
 * null. Checked before the first stage: the page never runs on the last valid value of a field.
 */
export function settingsProblem(): string | null {
  const { formErrors, prompts, stepFrom, imported } = store();
  const bad = Object.entries(formErrors);
  if (bad.length > 0) return `settings: ${bad.map(([f, p]) => `${f}: ${p}`).join('; ')}`;
  const e = effectiveOf(store());
  if ('error' in e) return `settings: ${e.error}`;
  if (stepFrom === 'import' && imported) return null;
  if (prompts.length === 0) return 'prompts: the prompt set is empty';
  const empty = prompts.findIndex((p) => p.user.trim() === '');
  if (empty >= 0) return `prompts: prompt #${empty} has an empty user message`;
  return null;
}

/** A stage's request, on its way to the worker. */
interface Posted {
  stage: StageId;
  /** The update's settings, which the first stage carries (later stages' are ignored by the worker). */
  settings: StepSettings;
  first: boolean;
  /**
   * The update it belongs to, as the store names it (runSettings) when it was posted: an import, a model change or
   * Reset landing before its answer drops the update (runSettings changes), and the answer must not be written into
   * the next update's fresh stages.
   */
  update: StepSettings | null;
  reply: Promise<StageResult>;
}

/** Posts the stage at `cursor` to the worker; the page records nothing yet (runStage does). */
function postStage(cursor: number): Posted {
  const stage = STAGES[cursor];
  const first = cursor === 0;
  const sent = first ? structuredClone(settings()) : store().runSettings ?? settings();
  const reply = worker().request({ type: 'run-stage', stage, settings: sent, start: first ? start() : undefined });
  return { stage, settings: sent, first, update: first ? sent : store().runSettings, reply };
}

/**
 * Runs the stage at the cursor and records its result; false when there is none, it failed, or its update was
 * dropped meanwhile. `posted`: its request, already on its way (sent ahead by the previous stage). `ahead()`,
 * asked when the result arrives: whether the next stage's request goes to the worker at once, before this result
 * is recorded — recording re-renders the page synchronously (a few tens of ms a stage, ~250 ms for the assembled
 * batch's views on a 2-core machine), and Run to end would otherwise leave the worker idle for it. A stage sent
 * ahead is returned and must be run next (the worker is already running it): even when its update was dropped
 * before it could be recorded (by something recording the previous result set off), it is awaited, counted in
 * stageRequests while the worker runs it, and not recorded.
 */
async function runStage(posted: Posted | null, ahead: () => boolean): Promise<{ next: Posted | null } | false> {
  const s = store();
  if (!posted) {
    if (s.cursor >= STAGES.length || s.stageRequests > 0) return false;
    const problem = s.cursor === 0 ? settingsProblem() : null;
    if (problem) {
      s.pushError({ kind: 'settings', message: problem });
      return false;
    }
  }
  const p = posted ?? postStage(s.cursor);
  const live = p.first || store().runSettings === p.update;
  if (live) store().stageStarted(p.stage, p.first ? p.settings : undefined);
  const dropped = () => !live || store().runSettings !== p.update;
  store().trackStageRequest(1);
  let result: StageResult;
  try {
    result = await p.reply;
  } catch (e) {
    if (!dropped()) {
      store().stageFailed(p.stage);
      fail(e);
    }
    return false;
  } finally {
    store().trackStageRequest(-1);
  }
  if (dropped()) return false;
  const i = STAGES.indexOf(p.stage) + 1;
  const next = i < STAGES.length && ahead() ? postStage(i) : null;
  try {
    store().stageDone(result);
  } catch (e) {
    // Recording failed (a bug): the stage sent ahead still runs in the worker; its answer is dropped, a failure caught.
    if (next) void next.reply.catch(() => {});
    throw e;
  }
  return { next };
}

/** Runs the next stage; false when there is none or it failed. */
export async function nextStage(): Promise<boolean> {
  return (await runStage(null, () => false)) !== false;
}

let whatIfSeq = 0;

/**
 * Recomputes the loss of this update's batch under the what-if's edits (config values in the trainer's names,
 * over the settings the update ran with, whatever the form holds now; no resampling, no forward) under `trainer`
 * (the update's, or another: src/bridge/settings.ts whatIfSettings); only the latest answer is shown.
 */
export async function runWhatIf(edits: Record<string, unknown>, trainer?: TrainerId): Promise<void> {
  const seq = ++whatIfSeq;
  const s = store();
  const ran = s.runSettings;
  if (!ran) return;
  const t = trainer ?? s.whatIfSettings?.trainer ?? ran.settings.trainer;
  store().setWhatIfSettings({ trainer: t, edits });
  try {
    const w = whatIfOf(s, t, edits)!;
    if ('error' in w) throw new StudioFailure('settings', `what-if: ${w.error}`);
    const r = await worker().request({ type: 'what-if', settings: w.settings });
    if (seq === whatIfSeq) store().setWhatIf(r);
  } catch (e) {
    if (seq === whatIfSeq) {
      store().setWhatIf(null);
      fail(e);
    }
  }
}

let mismatchSeq = 0;

/**
 * The train–inference mismatch of the batch on screen, computed in the worker (src/grpo/mismatch): its sampler
 * side against its trainer side, or (`recompute`) against the trainer side scored with the loaded model (and the
 * base, with its adapter off) under the settings the batch's numbers come from: the update's, or the import's
 * own. The answer is kept under the batch it was asked for; only the latest request's is shown.
 */
export async function runMismatch(recompute = false): Promise<void> {
  const s = store();
  const target = mismatchTarget(s);
  if (!target.key) return;
  const seq = ++mismatchSeq;
  const key = target.key;
  const shown = s.mismatch?.key === key ? s.mismatch.result : null;
  try {
    let settings;
    if (recompute) {
      const e = s.batchOrigin === 'step' && s.runSettings ? { settings: s.runSettings.settings } : effectiveOf(s);
      if ('error' in e) throw new StudioFailure('settings', e.error);
      settings = e.settings;
    }
    // The answer on screen stays while the next one is computed.
    s.setMismatch({ key, status: 'busy', recompute, result: shown });
    const result = await worker().request({ type: 'mismatch', of: target.of, ...(settings ? { recompute: settings } : {}) });
    if (seq === mismatchSeq) store().setMismatch({ key, status: 'ready', recompute, result });
  } catch (e) {
    if (seq !== mismatchSeq) return;
    store().setMismatch({ key, status: 'error', recompute, result: shown });
    fail(e);
  }
}

/** The latest request per correction id ('all': the first, unedited one): an older answer is not shown over a newer one. */
const correctionSeq = new Map<string, number>();
let correctionSeqNext = 0;

/**
 * What the corrections would do on the explorer's batch (computed in the worker, the loss on the GPU) against the
 * trainer side of the analysis on screen: every correction unedited, or (`edit`) one correction with the user's
 * values of its control rows. Answers merge by correction id into the analysis' corrections.
 */
export async function runCorrections(edit?: { id: string; edits: Record<string, unknown> }): Promise<void> {
  const s = store();
  const shown = mismatchShown(s);
  const target = mismatchTarget(s);
  const key = shown?.result;
  if (!key?.report || !target.key) return;
  const ids = edit ? [edit.id] : ['all'];
  const seq = ++correctionSeqNext;
  for (const id of ids) correctionSeq.set(id, seq);
  const before = s.mismatchCorrections?.key === key ? s.mismatchCorrections : { key, busy: [], table: [], effects: {}, edits: {} };
  const edits = edit ? { ...before.edits, [edit.id]: edit.edits } : before.edits;
  s.setMismatchCorrections({ ...before, edits, busy: [...new Set([...before.busy, ...ids])] });
  // The state of this analysis' corrections now (another may have merged meanwhile), with this request's ids settled.
  const settle = (change: (c: CorrectionsState) => Partial<CorrectionsState>) => {
    const c = store().mismatchCorrections;
    if (c?.key !== key || ids.some((id) => correctionSeq.get(id) !== seq)) return;
    store().setMismatchCorrections({ ...c, ...change(c), busy: c.busy.filter((id) => !ids.includes(id)) });
  };
  try {
    const r = await worker().request({ type: 'mismatch-corrections', of: target.of, variants: edit ? [edit] : 'all' });
    settle((c) => ({ table: r.table, effects: { ...c.effects, ...Object.fromEntries(r.effects.map((e) => [e.id, e])) } }));
  } catch (e) {
    settle(() => ({}));
    fail(e);
  }
}

/**
 * Opens the mismatch explorer with its log-ratio heat on the grid (the panel asks for the analysis of each batch
 * it is shown with), or closes it.
 */
export function openMismatch(open: boolean): void {
  store().setMismatchOpen(open);
  if (open) store().setHeat('log_ratio');
}

/** Re-samples the update's prompts with the same seed from the stepped weights and scores them. */
export async function runBeforeAfter(): Promise<void> {
  try {
    store().setBeforeAfter(await worker().request({ type: 'before-after' }));
  } catch (e) {
    fail(e);
  }
}

/**
 * Renders the prompt set with two chat-template variants in the worker (bounded) and shows their token diff.
 * A template that does not render (a parse error while it is being edited) is the form's problem, not the
 * page's: its message is returned for the form to show beside the template, and the last diff stays.
 */
export async function runTemplateDiff(variants: [TemplateVariant, TemplateVariant]): Promise<string | null> {
  try {
    store().setTemplateDiff(await worker().request({ type: 'template-diff', conversations: store().prompts.map(promptConversation), variants }));
    return null;
  } catch (e) {
    const f = e instanceof StudioFailure ? e : new StudioFailure('internal', e instanceof Error ? e.message : String(e));
    return f.detail ? `${f.message}: ${f.detail}` : f.message;
  }
}

/**
 * The memory plan of an update with the current prompt set, G and completion length (the plan before a
 * step). A plan asked for while another is on its way answers after it: the last request wins.
 */
export async function refreshPlan(): Promise<void> {
  if (store().modelStatus !== 'ready') return;
  try {
    // The update that will run: an imported batch's own rows and lengths when the step starts from it.
    const s = store();
    const b = s.stepFrom === 'import' ? s.imported?.batch : undefined;
    // A loop, not Math.max(...rows): a 200,000-row import would overflow the argument list.
    const longest = (rows: readonly ArrayLike<unknown>[]) => rows.reduce((m, r) => Math.max(m, r.length), 1);
    const batch = b && { B: b.completion_ids.length, P: longest(b.prompt_ids), C: longest(b.completion_ids) };
    store().setPlan(await worker().request({ type: 'plan', settings: settings(), batch }));
  } catch (e) {
    fail(e);
  }
}

/**
 * Makes the what-if's settings the next update's: its trainer, and that trainer's edits replaced by what gives the
 * what-if's values over the base (an edit made in the form after the update ran, which the what-if did not see,
 * goes). The results on screen then read as stale where the what-if changed something.
 */
export function applyWhatIf(): void {
  const s = store();
  const w = s.whatIfSettings && whatIfOf(s, s.whatIfSettings.trainer, s.whatIfSettings.edits);
  if (!w) return;
  if ('error' in w) return void s.pushError({ kind: 'settings', message: `what-if: ${w.error}` });
  s.setTrainerEdits(baseKindOf(s), w.settings.trainer, editsReaching(w.settings, baseOf(s)));
}

/** The Run-to-end loop that owns `running`: a loop left over from a dropped update must not stop a newer one. */
let runLoop: object | null = null;

export async function runToEnd(): Promise<void> {
  const mine = {};
  runLoop = mine;
  store().setRunning(true);
  const go = () => runLoop === mine && store().running;
  try {
    // Each stage's successor is posted the moment its result arrives (runStage's `ahead`), and then run.
    let r = await runStage(null, go);
    while (r && r.next) r = await runStage(r.next, go);
  } finally {
    if (runLoop === mine) {
      runLoop = null;
      store().setRunning(false);
    }
  }
}

/**
 * After a completed update, the next one: the page clears its results and the worker starts from the
 * stepped weights, or from the loaded ones (the weights setting); Reset would instead undo the step.
 */
export async function runNextUpdate(): Promise<void> {
  if (store().cursor >= STAGES.length) store().resetRun();
  await runToEnd();
}

/** Reset: drops the update and undoes its optimizer step, so the weights are those from before that step. */
export function resetStep(): Promise<void> {
  return dropRun(true);
}

/** Drops the update; undo: also its optimizer step, else its stepped weights stay for the next update. */
async function dropRun(undo: boolean): Promise<void> {
  const s = store();
  if (undo && s.stages.step.status === 'done') s.setPolicySteps(s.policySteps - 1);
  s.resetRun();
  try {
    await worker().request({ type: 'reset', undo });
  } catch (e) {
    fail(e);
  }
}

/** Chooses what the next update starts from (and drops the current one, keeping its stepped weights). */
export async function setStepFrom(from: 'prompts' | 'import'): Promise<void> {
  await dropRun(false);
  store().setStepFrom(from);
}

/**
 * Scores the batch on screen with the reward settings (without a model): the batch's completion_texts,
 * prompt_texts and each group's answer from the prompt set. Scored in the studio worker; JS rewards run
 * in the sandbox worker it starts.
 */
export async function scoreOnScreenBatch(): Promise<RewardTable | null> {
  const { batch, run, rewards, prompts } = store();
  const completions = batch?.completion_texts ?? run.sample?.completion_texts;
  if (!batch || !completions) {
    store().pushError({ kind: 'reward', message: 'rewards need completion texts: run the sample stage, or import a batch with completion_texts' });
    return null;
  }
  const G = batch.num_generations;
  const samples: RewardSample[] = completions.map((completion, i) => ({
    index: i,
    group: groupLabel(batch, i),
    prompt: batch.prompt_texts?.[i] ?? run.render?.prompt_texts[Math.floor(i / G)] ?? '',
    completion,
    answer: prompts[Math.floor(i / G)]?.answer ?? '',
    completion_ids: batch.completion_ids[i] ?? [],
  }));
  try {
    return await worker().request({ type: 'score-rewards', rewards, samples });
  } catch (e) {
    fail(e);
    return null;
  }
}
