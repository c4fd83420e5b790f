// The studio worker: everything heavy runs here, off the page's thread — WebGPU (the only place that
// touches it), batch parsing and the Doctor, model loading and the one-step pipeline. It answers the
// requests of src/bridge/protocol.ts one message per request, and reports load progress and a lost device
// as events.
// An import is parsed in a worker of its own (import_job.ts) that a cancel terminates, and its batch goes
// to the page in row slices (src/bridge/rows.ts) so the page's thread is never held for long. The import it holds is
// judged again on request: with another model's tokenizer, or under the page's edited settings (tokenizer-checks).
import { browserGpu } from '../gpu/browser.ts';
import { scoreRewards, type JsRewardRunner } from '../grpo/rewards.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { ImportResult } from '../io/formats/common.ts';
import { errorInfo } from '../bridge/errors.ts';
import { parseInWorker, type ParseRun } from './import_job.ts';
import type { MismatchOf, Request, RequestEnvelope, Responses, StepRunner, WorkerMessage } from '../bridge/protocol.ts';
import { runJsReward } from './reward_sandbox.ts';
import { BATCH_ROW_FIELDS, rowPaths, streamRows } from '../bridge/rows.ts';
import { sandboxRenderer } from './template_sandbox.ts';
import { mismatchOf, transferOf } from './mismatch.ts';
import { withSettings } from '../bridge/batch_settings.ts';

/** User JS rewards run in a sandbox worker started from this one, so a hang never blocks a stage. */
const runJs: JsRewardRunner = (spec, samples) => runJsReward(spec, samples);

// Results are structured-cloned: the pipeline keeps reading the arrays it returned. Only the buffers of
// packed row parts (fresh copies, src/bridge/rows.ts) are transferred.
const post = (msg: WorkerMessage, transfer: Transferable[] = []) => (self as unknown as Worker).postMessage(msg, transfer);

let runner: Promise<StepRunner> | null = null;

/** The step pipeline is loaded on first use, so importing a batch never waits for it; a failed start is retried next time. */
function stepRunner(): Promise<StepRunner> {
  runner ??= Promise.all([import('./runner.ts'), gpu()])
    .then(([m, g]) => m.createStepRunner(g, { runJsReward: runJs, templateRenderer: (tok) => sandboxRenderer(tok) }))
    .catch((e: unknown) => {
      runner = null;
      throw e;
    });
  return runner;
}

let watching = false;

/** The shared device; the first caller starts watching for its loss (reported once, as an event). */
async function gpu() {
  const g = await browserGpu();
  if (!watching) {
    watching = true;
    void g.lost.then((info) =>
      post({ event: 'device-lost', error: { kind: 'device-lost', message: `the GPU device was lost (${info.reason}): ${info.message || 'no message'}. Reload the page to start again.` } }),
    );
  }
  return g;
}

/** Imports in flight, by request id: a cancel stops the parse (a later stage of a cancelled import is dropped by the page). */
const imports = new Map<number, ParseRun>();

/**
 * Imported batches by request id, kept for the requests that name them (deferred tokenizer checks, the mismatch
 * explorer): the one the page holds (hold-import), and any answered after it that the page has not taken or
 * dropped yet. A cancelled import is dropped even when its answer was already sent, so what the worker holds
 * follows what the page shows: the page never shows one batch while the worker checks another.
 */
const held = new Map<number, { batch: GrpoBatch; inferred: ImportResult['inferred'] }>();

/** The batch of import `id`, which the page names as the one it holds; an error (never an empty answer) when the worker does not hold it. */
function heldImport(id: number): { batch: GrpoBatch; inferred: ImportResult['inferred'] } {
  const h = held.get(id);
  if (!h) throw new Error(`import ${id} is not the batch the studio worker holds (it was cancelled or replaced): import it again`);
  return h;
}

async function importBatch(id: number, req: Extract<Request, { type: 'import-batch' }>): Promise<Responses['import-batch']> {
  const progress = (label: string, loaded = 0, total = 0) => post({ event: 'progress', id, progress: { label, loaded, total } });
  // Any supported trainer dump (grpo-batch/v1 JSON, TRL / verl / OpenRLHF safetensors, prime-rl JSONL).
  const job = parseInWorker({ file: req.file, name: req.name, ...(req.also?.length ? { also: req.also } : {}), doctor: !runner }, (p) => post({ event: 'progress', id, progress: p }));
  imports.set(id, job);
  let parsed;
  try {
    parsed = await job.done;
  } finally {
    imports.delete(id);
  }
  const { batch, format, trainer, notes, unknownKeys } = parsed.read;
  const read = { batch, format, trainer, notes: [...notes, ...(unknownKeys.length ? [`keys not read: ${unknownKeys.join(', ')}`] : [])] };
  // With a model loaded, its tokenizer decodes the grid's tokens now; its slow checks (retokenization,
  // chat template: a decode → encode of every row) run on request once the batch is on screen.
  if (!parsed.report) progress('Doctor checks');
  // The ids the reader inferred travel with the batch: the Doctor's findings that rest on them are warnings, as in the CLI.
  const inferred = parsed.read.inferred;
  held.set(id, { batch, inferred });
  const checked = parsed.report ? { report: parsed.report } : (await runner!).inspect(batch, { deferTokenizerRules: true, inferred });
  const result: Responses['import-batch'] = { import: id, ...read, report: checked.report, token_texts: checked.token_texts, tokenizer_checks: checked.deferred ? id : null, inferred };
  // token_texts (one string per distinct id) travels with the result.
  const paths = rowPaths(batch, BATCH_ROW_FIELDS, ['batch']);
  return streamRows(result, paths, (parts, transfer) => post({ event: 'rows', id, parts }, transfer), (done, total) => progress('sending rows to the page', done, total));
}

async function handle(id: number, req: Request): Promise<Responses[Request['type']]> {
  switch (req.type) {
    case 'init':
      return { adapter: (await gpu()).adapter };
    case 'import-batch':
      return importBatch(id, req);
    case 'cancel':
      imports.get(req.target)?.cancel();
      held.delete(req.target);
      return {};
    case 'hold-import':
      for (const id of held.keys()) if (id < req.import) held.delete(id);
      return {};
    case 'tokenizer-checks': {
      // Looked up before any wait: a hold-import that arrives meanwhile does not take the batch away.
      const { batch, inferred } = heldImport(req.import);
      if (!req.settings) {
        const { report, token_texts } = (await stepRunner()).inspect(batch, { inferred });
        return { report, token_texts };
      }
      // Under the page's edited settings: the batch its Export writes, judged with the options `grpo-studio doctor`
      // forms on that file (the loaded model's tokenizer where it fits). A settings edit starts no GPU: without a
      // step runner no model is loaded, and the batch alone is judged, as the import's own report was.
      const judged = withSettings(batch, req.settings);
      const r = runner ? await runner.catch(() => null) : null;
      const { report, token_texts } = r ? r.inspect(judged, { inferred }) : (await import('./inspect.ts')).inspectBatch(judged, null, { inferred });
      return { report, token_texts };
    }
    case 'load-model': {
      const r = await stepRunner();
      return { model: await r.load(req.source, (progress) => post({ event: 'progress', progress })) };
    }
    case 'load-reference': {
      const r = await stepRunner();
      return { model: await r.loadReference(req.source, (progress) => post({ event: 'progress', progress })) };
    }
    case 'load-adapter': {
      const r = await stepRunner();
      return { model: await r.loadAdapter(req.source, (progress) => post({ event: 'progress', progress })) };
    }
    case 'adapter-reference':
      return { model: await (await stepRunner()).adapterReference(req.reference) };
    case 'checkpointing':
      return { model: await (await stepRunner()).setCheckpointing(req.on) };
    case 'save-adapter':
      return { files: await (await stepRunner()).saveAdapter() };
    case 'run-stage':
      return (await stepRunner()).runStage(req.stage, req.settings, req.start);
    case 'before-after':
      return (await stepRunner()).beforeAfter();
    case 'template-diff':
      return (await stepRunner()).templateDiff(req.conversations, req.variants);
    case 'what-if':
      return (await stepRunner()).whatIf(req.settings);
    case 'plan':
      return (await stepRunner()).plan(req.settings, req.batch);
    case 'score-rewards':
      return scoreRewards(req.rewards, req.samples, runJs);
    case 'reset':
      if (runner) await (await runner).reset(req.undo);
      return {};
    case 'mismatch':
      return mismatch(req);
    case 'mismatch-corrections':
      return corrections(req);
  }
}

/** The batch a mismatch request names: the import the page holds (by its request id), or the current update's with its trainer side. */
async function mismatchBatch(of: MismatchOf): Promise<GrpoBatch> {
  if (of.kind === 'import') return heldImport(of.import).batch;
  const batch = (await stepRunner()).updateBatch();
  if (!batch) throw new Error('the mismatch explorer needs the update to reach its loss stage (the trainer side is the policy before the step)');
  return batch;
}

/**
 * The trainer side of the last analysis (the batch's, or recomputed), which the corrections weigh against the
 * sampler, and with an adapter the base's without it (the reference a step takes when the batch has none).
 */
let lastTrainerSide: { completion_ids: GrpoBatch['completion_ids']; logps: ArrayLike<number>[]; base: number[][] | null } | null = null;

/**
 * The mismatch explorer's analysis of the batch the request names, in this worker (never the page's thread: the
 * batch can be 1,024 × 2,560). The loaded model, where there is one, names the tokens and scores a recompute;
 * an imported batch needs none (its two sides are in the file).
 */
async function mismatch(req: Extract<Request, { type: 'mismatch' }>): Promise<Responses['mismatch']> {
  const batch = await mismatchBatch(req.of);
  const r = req.recompute ? await stepRunner() : runner ? await runner : null;
  const sides = req.recompute ? await r!.scoreSides(batch, req.recompute) : null;
  const result = mismatchOf(batch, { sides, tokenizer: r?.tokenizerFor(batch) ?? null });
  const logps = sides?.trainer ?? batch.old_per_token_logps;
  lastTrainerSide = result.report && logps ? { completion_ids: batch.completion_ids, logps, base: sides?.base ?? null } : null;
  return result;
}

/** What the asked corrections would do on the batch of the last analysis, against its trainer side (loss and gradient on the GPU). */
async function corrections(req: Extract<Request, { type: 'mismatch-corrections' }>): Promise<Responses['mismatch-corrections']> {
  const t0 = performance.now();
  const batch = await mismatchBatch(req.of);
  const trainer = lastTrainerSide;
  if (trainer?.completion_ids !== batch.completion_ids) throw new Error('the corrections weigh the trainer side of the last analysis: analyse this batch first');
  // Loaded on first use, as the step pipeline: the trainers' objectives are not needed to import a batch.
  const { CORRECTIONS, correctionEffects } = await import('../grpo/mismatch/corrections.ts');
  const variants = req.variants === 'all' ? CORRECTIONS.map((c) => ({ id: c.id })) : req.variants;
  const effects = await correctionEffects(await gpu(), batch, trainer.logps, variants, { reference: trainer.base ?? undefined });
  // The (B, T) weights and gradient factors stay here: the page shows the counts (two 21 MB arrays per correction on a big batch).
  return { table: CORRECTIONS, effects: effects.map(({ weights: _w, gradient_factor: _g, ...summary }) => summary), ms: performance.now() - t0 };
}

self.onmessage = async (ev: MessageEvent<RequestEnvelope>) => {
  const { id, request } = ev.data;
  try {
    const result = await handle(id, request);
    // The explorer's per-token log ratios (10 MB on a big batch) are transferred, not cloned on the page's thread.
    post({ id, ok: true, result }, request.type === 'mismatch' ? transferOf(result as Responses['mismatch']) : []);
  } catch (e) {
    post({ id, ok: false, error: errorInfo(e) });
  }
};
