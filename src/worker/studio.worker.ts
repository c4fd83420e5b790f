// The studio worker: everything heavy runs here, off the page's thread — WebGPU (the only place that
// touches it), batch parsing and the Doctor, model loading and the one-step pipeline. It answers the
// requests of src/bridge/protocol.ts one message per request, and reports load progress and a lost device
// as events.
// An import is parsed in a worker of its own (import_job.ts) that a cancel terminates, and its batch goes
// to the page in row slices (src/bridge/rows.ts) so the page's thread is never held for long.
import { browserGpu } from '../gpu/browser.ts';
import { scoreRewards, type JsRewardRunner } from '../grpo/rewards.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { ImportResult } from '../io/formats/common.ts';
import { errorInfo } from '../bridge/errors.ts';
import { parseInWorker, type ParseRun } from './import_job.ts';
import type { Request, RequestEnvelope, Responses, StepRunner, WorkerMessage } from '../bridge/protocol.ts';
import { runJsReward } from './reward_sandbox.ts';
import { BATCH_ROW_FIELDS, rowPaths, streamRows } from '../bridge/rows.ts';
import { sandboxRenderer } from './template_sandbox.ts';

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

/** The last imported batch, kept for its deferred tokenizer checks (a newer import replaces it). */
let lastImport: { id: number; batch: GrpoBatch; inferred: ImportResult['inferred'] } | null = null;

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
  lastImport = { id, batch, inferred };
  const checked = parsed.report ? { report: parsed.report } : (await runner!).inspect(batch, { deferTokenizerRules: true, inferred });
  const result: Responses['import-batch'] = { ...read, report: checked.report, token_texts: checked.token_texts, tokenizer_checks: checked.deferred ? id : null };
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
      return {};
    case 'tokenizer-checks': {
      if (lastImport?.id !== req.import) return { report: null };
      return { report: (await stepRunner()).inspect(lastImport.batch, { inferred: lastImport.inferred }).report };
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
      return (await stepRunner()).plan(req.settings);
    case 'score-rewards':
      return scoreRewards(req.rewards, req.samples, runJs);
    case 'reset':
      if (runner) await (await runner).reset(req.undo);
      return {};
  }
}

self.onmessage = async (ev: MessageEvent<RequestEnvelope>) => {
  const { id, request } = ev.data;
  try {
    post({ id, ok: true, result: await handle(id, request) });
  } catch (e) {
    post({ id, ok: false, error: errorInfo(e) });
  }
};
