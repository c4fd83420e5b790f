// The page's actions: start the worker, import / export batches, load a model and drive the stepper.
// Components call these; they talk to the worker through the typed client and write results to the
// store. Nothing here blocks the page: every heavy call is a worker request. It is part of the store
// layer because it is the one place that talks to the worker (ui → store → worker).
import { DEFAULT_MODEL_NAME, DEFAULT_MODEL_PATH } from '../grpo/default_task.ts';
import type { RewardSample, RewardTable } from '../grpo/rewards.ts';
import { groupLabel, serializeBatch } from '../io/batch.ts';
import { studioStore } from './index.ts';
import { StudioClient } from '../worker/client.ts';
import { StudioFailure } from '../worker/errors.ts';
import { STAGES, type ModelChoice, type StepSettings, type StepStart } from '../worker/protocol.ts';
import { lossSettingsOf } from '../worker/settings.ts';

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

/** The embedded default model (public/models/<name>/, served beside the page: works offline). */
export function loadDefaultModel(): Promise<void> {
  return loadModel({ kind: 'embedded', name: DEFAULT_MODEL_NAME, url: new URL(`${DEFAULT_MODEL_PATH}/`, document.baseURI).href });
}

/**
 * Reads a grpo-batch/v1 file, checks it in the worker (schema + Doctor) and shows it. Its config (TRL's
 * loss, optimizer and clipping fields) fills the loss settings, so stepping it replays that trainer's update.
 */
export async function importBatchFile(file: File): Promise<void> {
  try {
    const text = await file.text();
    const { batch, report } = await worker().request({ type: 'import-batch', text, name: file.name });
    await resetStep();
    store().setLoss(lossSettingsOf(batch.config));
    store().setImported({ batch, name: file.name, report });
  } catch (e) {
    fail(e);
  }
}

/** Downloads the batch on screen (with this step's results folded in) as grpo-batch/v1 JSON. */
export function exportBatch(): void {
  const { batch, run, batchName } = store();
  if (!batch) return;
  const out = { ...batch };
  // The assembled batch carries rewards and advantages; the log-probs the loss used come from later stages.
  const C = run.assemble?.padded.C ?? 0;
  const rows = (a: Float32Array | null | undefined) => a && batch.completion_ids.map((ids, b) => Array.from(a.subarray(b * C, b * C + ids.length)));
  out.old_per_token_logps = rows(run.loss?.old_per_token_logps) ?? batch.old_per_token_logps;
  out.ref_per_token_logps = rows(run.reference_forward?.ref_per_token_logps) ?? batch.ref_per_token_logps;
  const blob = new Blob([serializeBatch(out)], { type: 'application/json' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = (batchName || 'batch').replace(/\.json$/, '') + '.grpo-batch.json';
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

export async function loadModel(source: ModelChoice): Promise<void> {
  store().setModel('busy', null);
  store().setLoadProgress({ label: 'starting', loaded: 0, total: 0 });
  try {
    store().resetRun();
    const { model } = await worker().request({ type: 'load-model', source });
    store().setModel('ready', model);
  } catch (e) {
    store().setModel('error', null);
    fail(e);
  } finally {
    store().setLoadProgress(null);
  }
}

function settings(): StepSettings {
  const { prompts, sampling, rewards, loss } = store();
  return { prompts, sampling, rewards, loss };
}

/** Where a new update starts: the imported batch when the stepper is set to it, else the prompt set. */
function start(): StepStart {
  const { stepFrom, imported } = store();
  return stepFrom === 'import' && imported ? { kind: 'batch', batch: imported.batch } : { kind: 'prompts' };
}

/** Runs the next stage; false when there is none or it failed. */
export async function nextStage(): Promise<boolean> {
  const s = store();
  if (s.cursor >= STAGES.length) return false;
  const stage = STAGES[s.cursor];
  s.stageStarted(stage);
  try {
    const result = await worker().request({ type: 'run-stage', stage, settings: settings(), start: s.cursor === 0 ? start() : undefined });
    store().stageDone(result);
    return true;
  } catch (e) {
    store().stageFailed(stage);
    fail(e);
    return false;
  }
}

export async function runToEnd(): Promise<void> {
  store().setRunning(true);
  try {
    while (store().running && (await nextStage()));
  } finally {
    store().setRunning(false);
  }
}

export async function resetStep(): Promise<void> {
  store().resetRun();
  try {
    await worker().request({ type: 'reset' });
  } catch (e) {
    fail(e);
  }
}

/** Chooses what the next update starts from (and drops the current one). */
export async function setStepFrom(from: 'prompts' | 'import'): Promise<void> {
  await resetStep();
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
