// Runs a user-written JavaScript reward in a worker that can be killed: the function gets one sample at a
// time and a time limit per sample. A throw, a bad return value or a hang becomes that sample's error (NaN
// reward) and never freezes the page: on a timeout the worker is terminated and a fresh one carries on with
// the remaining samples. `handleSandboxMessage` is the worker side (also driven by Node's worker_threads in
// tests); `runJsReward` is the caller side.
import { checkRewardValue, compileUserReward, type RewardColumn, type RewardSample, type RewardSpec } from '../grpo/rewards.ts';

type JsSpec = Extract<RewardSpec, { kind: 'js' }>;

/** Caller → sandbox: score these samples with this source, in order. */
export interface SandboxRequest {
  name: string;
  source: string;
  samples: RewardSample[];
}

/** Sandbox → caller: one message per sample, or one compile error for all. */
export type SandboxReply = { ready: true } | { sample: number; value: number } | { sample: number; error: string } | { compileError: string };

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
export function handleSandboxMessage(req: SandboxRequest, post: (r: SandboxReply) => void): void {
  for (const g of BLOCKED_GLOBALS) {
    try {
      Object.defineProperty(globalThis, g, { value: undefined, configurable: false, writable: false });
    } catch {
      // Already locked by an earlier request in this worker.
    }
  }
  let fn;
  try {
    fn = compileUserReward(req.name, req.source);
  } catch (e) {
    post({ compileError: (e as Error).message });
    return;
  }
  post({ ready: true });
  for (const s of req.samples) {
    try {
      post({ sample: s.index, value: checkRewardValue(fn(s)) });
    } catch (e) {
      post({ sample: s.index, error: e instanceof Error ? `${e.name}: ${e.message}` : `threw ${String(e)}` });
    }
  }
}

/** The browser sandbox: a module worker built by Vite from reward_sandbox.worker.ts. */
export function browserSandbox(): WorkerLike {
  return new Worker(new URL('./reward_sandbox.worker.ts', import.meta.url), { type: 'module', name: 'reward-sandbox' }) as unknown as WorkerLike;
}

/**
 * Scores every sample with a user JS reward, `spec.timeout_ms` per sample. Samples are answered in
 * order, so on a timeout the first unanswered sample is the one that hung.
 */
export function runJsReward(spec: JsSpec, samples: readonly RewardSample[], spawn: () => WorkerLike = browserSandbox): Promise<RewardColumn> {
  const values = new Array<number>(samples.length).fill(NaN);
  const errors: RewardColumn['errors'] = [];
  const position = new Map(samples.map((s, i) => [s.index, i]));
  return new Promise((resolve) => {
    let next = 0; // first sample (position in `samples`) without an answer
    const start = () => {
      if (next >= samples.length) return resolve({ values, errors });
      const w = spawn();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const startup = setTimeout(() => {
        for (const s of samples.slice(next)) errors.push({ sample: s.index, message: `the sandbox did not start within ${STARTUP_MS} ms (does the source run a loop at the top level?)` });
        finish();
      }, STARTUP_MS);
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          w.terminate();
          errors.push({ sample: samples[next].index, message: `timed out after ${spec.timeout_ms} ms (the function did not return; its worker was stopped)` });
          next++;
          start();
        }, spec.timeout_ms);
      };
      const finish = () => {
        clearTimeout(startup);
        clearTimeout(timer);
        w.terminate();
        resolve({ values, errors });
      };
      w.onmessage = ({ data }) => {
        if ('ready' in data) {
          clearTimeout(startup);
          return arm();
        }
        if ('compileError' in data) {
          for (const s of samples.slice(next)) errors.push({ sample: s.index, message: data.compileError });
          return finish();
        }
        const i = position.get(data.sample) ?? next;
        if ('error' in data) errors.push({ sample: data.sample, message: data.error });
        else values[i] = data.value;
        next = i + 1;
        if (next >= samples.length) return finish();
        arm();
      };
      w.onerror = (ev) => {
        clearTimeout(startup);
        clearTimeout(timer);
        w.terminate();
        errors.push({ sample: samples[next].index, message: `sandbox error: ${ev.message ?? 'unknown'}` });
        next++;
        start();
      };
      w.postMessage({ name: spec.name, source: spec.source, samples: samples.slice(next) });
    };
    start();
  });
}
