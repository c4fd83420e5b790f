// Runs user-written JavaScript — a reward, or the tools of a multi-turn rollout — in a worker that can be
// killed: the code gets one item (a sample to score, a tool call to run) at a time and a time limit per item.
// A throw, a bad return value or a hang becomes that item's error (a NaN reward; TRL's `{'error': …}` tool
// result) and never freezes the page: on a timeout the worker is terminated and a fresh one carries on with the
// remaining items. `handleSandboxMessage` is the worker side (also driven by Node's worker_threads in tests);
// `runJsReward` and `runJsTools` are the caller side, over one shared runner.
import { checkRewardValue, compileUserReward, evalUserExpression, type RewardColumn, type RewardSample, type RewardSpec } from '../grpo/rewards.ts';
import { toolError, type PendingCall } from '../grpo/tool_loop.ts';

type JsSpec = Extract<RewardSpec, { kind: 'js' }>;

/** Caller → sandbox: score these samples with this reward source, or run these calls with this tools source, in order. */
export type SandboxRequest = { name: string; source: string; samples: RewardSample[] } | { tools: true; source: string; calls: IndexedCall[] };

/** A tool call with its place in the request (`sample` is the row it belongs to, `index` its answer's key). */
type IndexedCall = PendingCall & { index: number };

/** Sandbox → caller: one message per item (keyed by `sample`: the sample's or the call's index), or one compile error for all. */
export type SandboxReply = { ready: true } | { sample: number; value: number } | { sample: number; text: string } | { sample: number; error: string } | { compileError: string };

/** How long a sandbox may take to start and compile the source (module load included). */
const STARTUP_MS = 10_000;

/** What the runner needs from a worker (a DOM Worker or an adapter around worker_threads). */
export interface WorkerLike {
  postMessage(msg: SandboxRequest): void;
  terminate(): void;
  onmessage: ((ev: { data: SandboxReply }) => void) | null;
  onerror: ((ev: { message?: string }) => void) | null;
}

/** Globals a reward function has no business using; removed from the sandbox before user code runs. */
const BLOCKED_GLOBALS = ['fetch', 'XMLHttpRequest', 'WebSocket', 'EventSource', 'importScripts', 'indexedDB', 'caches', 'Worker', 'SharedWorker', 'BroadcastChannel', 'postMessage'];

/** Worker side. `post` sends a reply (bound before the globals are removed). */
export async function handleSandboxMessage(req: SandboxRequest, post: (r: SandboxReply) => void): Promise<void> {
  for (const g of BLOCKED_GLOBALS) {
    try {
      Object.defineProperty(globalThis, g, { value: undefined, configurable: false, writable: false });
    } catch {
      // Already locked by an earlier request in this worker.
    }
  }
  let run: (item: RewardSample | IndexedCall) => Promise<SandboxReply>;
  try {
    run = 'tools' in req ? toolRunner(compileTools(req.source)) : rewardRunner(compileUserReward(req.name, req.source));
  } catch (e) {
    post({ compileError: (e as Error).message });
    return;
  }
  post({ ready: true });
  for (const item of 'tools' in req ? req.calls : req.samples) {
    try {
      post(await run(item));
    } catch (e) {
      post({ sample: item.index, error: e instanceof Error ? `${e.name}: ${e.message}` : `threw ${String(e)}` });
    }
  }
}

const rewardRunner = (fn: ReturnType<typeof compileUserReward>) => async (s: RewardSample | IndexedCall): Promise<SandboxReply> => ({ sample: s.index, value: checkRewardValue(fn(s as RewardSample)) });

/**
 * A tool call's result as TRL makes it: the function called with the call's arguments (Python's
 * `fn(**arguments)`; a JS function takes them as one object), awaited, `str()`ed; an unknown name or a throw
 * is the `{'error': …}` result (src/grpo/tool_loop.ts toolError), not a failed item.
 */
const toolRunner = (tools: Record<string, unknown>) => async (item: RewardSample | IndexedCall): Promise<SandboxReply> => {
  const c = item as IndexedCall;
  const fn = Object.hasOwn(tools, c.name) ? tools[c.name] : undefined;
  if (typeof fn !== 'function') return { sample: c.index, text: toolError(`Tool ${c.name} not found.`) };
  try {
    const out: unknown = await fn(c.arguments);
    return { sample: c.index, text: typeof out === 'string' ? out : JSON.stringify(out) ?? String(out) };
  } catch (e) {
    return { sample: c.index, text: toolError(e instanceof Error ? e.message : String(e)) };
  }
};

/** Compiles a tools source: an object expression of functions, e.g. `({ multiply: ({ a, b }) => a * b })`. */
export function compileTools(source: string): Record<string, unknown> {
  let tools: unknown;
  try {
    tools = evalUserExpression(source);
  } catch (e) {
    throw new Error(`the tools source does not compile: ${(e as Error).message}`);
  }
  if (typeof tools !== 'object' || tools === null || Array.isArray(tools)) throw new Error(`the tools source must be an object of functions, e.g. ({ multiply: ({ a, b }) => a * b }); got ${Array.isArray(tools) ? 'an array' : typeof tools}`);
  return tools as Record<string, unknown>;
}

/** The browser sandbox: a module worker built by Vite from reward_sandbox.worker.ts. */
export function browserSandbox(): WorkerLike {
  return new Worker(new URL('./reward_sandbox.worker.ts', import.meta.url), { type: 'module', name: 'reward-sandbox' }) as unknown as WorkerLike;
}

/** One answer per item, in order: the value, or why it has none. */
type ItemAnswer = { value: number } | { text: string } | { error: string };

/**
 * Runs `items` through the sandbox, `timeout_ms` per item. Items are answered in order, so on a timeout the
 * first unanswered item is the one that hung; a fresh worker carries on with the rest.
 */
function runSandboxed(items: readonly { index: number }[], request: (from: number) => SandboxRequest, timeout_ms: number, spawn: () => WorkerLike): Promise<ItemAnswer[]> {
  const answers: ItemAnswer[] = items.map(() => ({ error: 'not run' }));
  const position = new Map(items.map((s, i) => [s.index, i]));
  return new Promise((resolve) => {
    let next = 0; // first item (position in `items`) without an answer
    const start = () => {
      if (next >= items.length) return resolve(answers);
      const w = spawn();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const startup = setTimeout(() => {
        for (let i = next; i < items.length; i++) answers[i] = { error: `the sandbox did not start within ${STARTUP_MS} ms (does the source run a loop at the top level?)` };
        finish();
      }, STARTUP_MS);
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          w.terminate();
          answers[next] = { error: `timed out after ${timeout_ms} ms (the function did not return; its worker was stopped)` };
          next++;
          start();
        }, timeout_ms);
      };
      const finish = () => {
        clearTimeout(startup);
        clearTimeout(timer);
        w.terminate();
        resolve(answers);
      };
      w.onmessage = ({ data }) => {
        if ('ready' in data) {
          clearTimeout(startup);
          return arm();
        }
        if ('compileError' in data) {
          for (let i = next; i < items.length; i++) answers[i] = { error: data.compileError };
          return finish();
        }
        const i = position.get(data.sample) ?? next;
        answers[i] = 'error' in data ? { error: data.error } : 'text' in data ? { text: data.text } : { value: data.value };
        next = i + 1;
        if (next >= items.length) return finish();
        arm();
      };
      w.onerror = (ev) => {
        clearTimeout(startup);
        clearTimeout(timer);
        w.terminate();
        answers[next] = { error: `sandbox error: ${ev.message ?? 'unknown'}` };
        next++;
        start();
      };
      w.postMessage(request(next));
    };
    start();
  });
}

/** Scores every sample with a user JS reward, `spec.timeout_ms` per sample. */
export async function runJsReward(spec: JsSpec, samples: readonly RewardSample[], spawn: () => WorkerLike = browserSandbox): Promise<RewardColumn> {
  const answers = await runSandboxed(samples, (from) => ({ name: spec.name, source: spec.source, samples: samples.slice(from) }), spec.timeout_ms, spawn);
  return {
    values: answers.map((a) => ('value' in a ? a.value : NaN)),
    errors: answers.flatMap((a, i) => ('error' in a ? [{ sample: samples[i].index, message: a.error }] : [])),
  };
}

/** Runs tool calls with a user tools source, `timeout_ms` per call; a call that fails gives TRL's `{'error': …}` result. */
export async function runJsTools(source: string, calls: readonly PendingCall[], timeout_ms: number, spawn: () => WorkerLike = browserSandbox): Promise<string[]> {
  const indexed = calls.map((c, index) => ({ ...c, index }));
  const answers = await runSandboxed(indexed, (from) => ({ tools: true, source, calls: indexed.slice(from) }), timeout_ms, spawn);
  return answers.map((a) => ('text' in a ? a.text : toolError('error' in a ? a.error : `returned ${String((a as { value: number }).value)}`)));
}
