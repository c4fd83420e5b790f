// The studio worker: everything heavy runs here, off the page's thread — WebGPU (the only place that
// touches it), batch parsing and the Doctor, model loading and the one-step pipeline. It answers the
// requests of protocol.ts one message per request; typed arrays in results are transferred, not copied.
import { diagnose } from '../doctor/index.ts';
import { browserGpu } from '../gpu/browser.ts';
import { scoreRewards, type JsRewardRunner } from '../grpo/rewards.ts';
import { parseBatch } from '../io/batch.ts';
import { errorInfo, StudioFailure } from './errors.ts';
import type { CreateStepRunner, Request, RequestEnvelope, Responses, StagePayloads, StepRunner, WorkerMessage } from './protocol.ts';
import { runJsReward } from './reward_sandbox.ts';

/** The step pipeline, if this build has it (src/grpo/step.ts exports createStepRunner). */
const STEP_MODULES = import.meta.glob<{ createStepRunner: CreateStepRunner }>('../grpo/step.ts');

/** User JS rewards run in a sandbox worker started from this one, so a hang never blocks a stage. */
const runJs: JsRewardRunner = (spec, samples) => runJsReward(spec, samples);

const post = (msg: WorkerMessage, transfer: Transferable[] = []) => (self as unknown as Worker).postMessage(msg, transfer);

let runner: StepRunner | null = null;

async function stepRunner(): Promise<StepRunner> {
  if (runner) return runner;
  const load = STEP_MODULES['../grpo/step.ts'];
  if (!load) throw new StudioFailure('unsupported-model', 'this build of the studio has no step pipeline yet: import a batch to inspect it');
  const mod = await load();
  runner = mod.createStepRunner(await browserGpu(), { runJsReward: runJs });
  return runner;
}

/** Every ArrayBuffer under a result (typed arrays of per-token results), for the transfer list. */
function buffersOf(v: unknown, out: Set<ArrayBuffer> = new Set()): Set<ArrayBuffer> {
  if (ArrayBuffer.isView(v)) {
    if (v.buffer instanceof ArrayBuffer) out.add(v.buffer);
  } else if (Array.isArray(v)) {
    for (const x of v) if (x !== null && typeof x === 'object') buffersOf(x, out);
  } else if (v !== null && typeof v === 'object') {
    for (const x of Object.values(v)) if (x !== null && typeof x === 'object') buffersOf(x, out);
  }
  return out;
}

async function handle(req: Request): Promise<Responses[Request['type']]> {
  switch (req.type) {
    case 'init': {
      const g = await browserGpu();
      g.lost.then((info) => post({ event: 'device-lost', error: { kind: 'device-lost', message: `the GPU device was lost (${info.reason}): ${info.message || 'no message'}. Reload the page to start again.` } }));
      return { adapter: g.adapter };
    }
    case 'import-batch': {
      const batch = parseBatch(req.text, req.name);
      return { batch, report: diagnose(batch) };
    }
    case 'load-model': {
      const r = await stepRunner();
      return { model: await r.load(req.source, (progress) => post({ event: 'progress', progress })) };
    }
    case 'run-stage': {
      const result = await (await stepRunner()).runStage(req.stage, req.settings);
      if (result.stage === 'assemble') {
        const payload = result.payload as StagePayloads['assemble'];
        payload.report = diagnose(payload.batch);
      }
      return result;
    }
    case 'score-rewards':
      return scoreRewards(req.rewards, req.samples, runJs);
    case 'reset':
      await runner?.reset();
      return {};
  }
}

self.onmessage = async (ev: MessageEvent<RequestEnvelope>) => {
  const { id, request } = ev.data;
  try {
    const result = await handle(request);
    post({ id, ok: true, result }, [...buffersOf(result)]);
  } catch (e) {
    post({ id, ok: false, error: errorInfo(e) });
  }
};
