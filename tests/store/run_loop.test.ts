// The page's stage loop (src/store/controller.ts runToEnd / nextStage) against a scripted worker: Run to end
// posts each stage's successor the moment its result arrives, before the page records that result (recording
// re-renders the page synchronously, and the worker would otherwise wait for it), and still runs every stage
// exactly once, in order; Stop, a failure or a dropped update end the loop with no stage left in the worker that
// the page does not know of; Next runs one stage.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { STAGES, type StageId } from '../../src/bridge/protocol.ts';
import { pageWithWorker } from '../helpers/page_store.ts';

/** What the scripted worker and the store did, in order: `post:<stage>` and `done:<stage>` / `error:<stage>`. */
const events: string[] = [];
/** How the scripted worker answers a stage (default: a result without data, after a macrotask). */
let answer: (stage: StageId) => 'ok' | 'fail' = () => 'ok';
/** Called when a stage is posted; a click it schedules (a macrotask, as a user's) lands before the answer. */
let onPost: (stage: StageId) => void = () => {};
/** Called synchronously while the page records a stage's result (as a store subscriber or a sync effect would). */
let onDone: (stage: StageId) => void = () => {};

class ScriptedWorker {
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onerror: unknown = null;
  postMessage(msg: { id: number; request: { type: string; stage?: StageId } }): void {
    const { id, request } = msg;
    if (request.type !== 'run-stage') return void setTimeout(() => this.onmessage?.({ data: { id, ok: true, result: {} } }));
    const stage = request.stage!;
    events.push(`post:${stage}`);
    onPost(stage);
    setTimeout(() => {
      const reply =
        answer(stage) === 'ok'
          ? { id, ok: true, result: { id: stage, ms: 1, gpuBytes: 0, peakBytes: 0, data: null } }
          : { id, ok: false, error: { kind: 'internal', message: `${stage} failed` } };
      this.onmessage?.({ data: reply });
    });
  }
}

let controller: Awaited<ReturnType<typeof pageWithWorker>>['controller'];
let store: Awaited<ReturnType<typeof pageWithWorker>>['store'];

beforeAll(async () => {
  const page = await pageWithWorker(ScriptedWorker);
  ({ controller, store } = page);
  // Every stage's status change, as the page would render it.
  page.studio.subscribe((s, prev) => {
    for (const id of STAGES) {
      if (s.stages[id].status === prev.stages[id].status || (s.stages[id].status !== 'done' && s.stages[id].status !== 'error')) continue;
      events.push(`${s.stages[id].status}:${id}`);
      if (s.stages[id].status === 'done') onDone(id);
    }
  });
});

afterEach(() => {
  store().resetRun();
  events.length = 0;
  answer = () => 'ok';
  onPost = () => {};
  onDone = () => {};
});

const posted = () => events.filter((e) => e.startsWith('post:')).map((e) => e.slice(5));

describe('Run to end', () => {
  it('runs every stage once, in order, posting each one before the previous result is recorded', async () => {
    await controller.runToEnd();
    expect(posted()).toEqual([...STAGES]);
    for (let i = 1; i < STAGES.length; i++) expect(events.indexOf(`post:${STAGES[i]}`), STAGES[i]).toBeLessThan(events.indexOf(`done:${STAGES[i - 1]}`));
    expect(events.filter((e) => e.startsWith('done:')).map((e) => e.slice(5))).toEqual([...STAGES]);
    const s = store();
    expect(s.cursor).toBe(STAGES.length);
    expect(s.running).toBe(false);
    expect(s.stageRequests).toBe(0);
  });

  it('Stop while a stage runs: that stage is recorded and no later one reaches the worker', async () => {
    const k = STAGES.indexOf('loss');
    onPost = (stage) => {
      if (stage === 'loss') setTimeout(() => store().setRunning(false));
    };
    await controller.runToEnd();
    expect(posted()).toEqual(STAGES.slice(0, k + 1));
    expect(store().cursor).toBe(k + 1);
    expect(store().stages.loss.status).toBe('done');
    expect(STAGES.slice(k + 1).every((id) => store().stages[id].status === 'pending')).toBe(true);
    expect(store().stageRequests).toBe(0);
    // Run to end again goes on from the next stage, once each.
    await controller.runToEnd();
    expect(posted()).toEqual([...STAGES]);
  });

  it('a failed stage ends the loop: nothing after it is posted', async () => {
    answer = (stage) => (stage === 'backward' ? 'fail' : 'ok');
    await controller.runToEnd();
    const k = STAGES.indexOf('backward');
    expect(posted()).toEqual(STAGES.slice(0, k + 1));
    expect(store().stages.backward.status).toBe('error');
    expect(store().running).toBe(false);
    expect(store().errors.at(-1)?.message).toBe('backward failed');
  });

  it('an update dropped while a stage runs (Reset, an import): its answer is not recorded and nothing more is posted', async () => {
    onPost = (stage) => {
      if (stage === 'policy_forward') setTimeout(() => store().resetRun());
    };
    await controller.runToEnd();
    expect(posted()).toEqual(STAGES.slice(0, STAGES.indexOf('policy_forward') + 1));
    expect(store().cursor).toBe(0);
    expect(STAGES.every((id) => store().stages[id].status === 'pending')).toBe(true);
  });
});

describe('Run to end, when recording a result sets something off', () => {
  it('a Reset while the sent-ahead stage runs: that stage is awaited (the page stays busy) and not recorded; nothing more is posted', async () => {
    let busyWhileRunning: boolean | null = null;
    onDone = (stage) => {
      if (stage === 'assemble') store().resetRun();
    };
    onPost = (stage) => {
      if (stage === 'policy_forward') setTimeout(() => (busyWhileRunning = store().stageRequests > 0));
    };
    await controller.runToEnd();
    expect(posted()).toEqual(STAGES.slice(0, STAGES.indexOf('policy_forward') + 1));
    expect(busyWhileRunning).toBe(true);
    expect(store().cursor).toBe(0);
    expect(STAGES.every((id) => store().stages[id].status === 'pending')).toBe(true);
    expect(store().stageRequests).toBe(0);
    expect(store().running).toBe(false);
  });

  it('a Stop: the stage already sent ahead runs and is recorded, and the loop ends there', async () => {
    onDone = (stage) => {
      if (stage === 'assemble') store().setRunning(false);
    };
    await controller.runToEnd();
    const k = STAGES.indexOf('policy_forward');
    expect(posted()).toEqual(STAGES.slice(0, k + 1));
    expect(store().stages.policy_forward.status).toBe('done');
    expect(store().cursor).toBe(k + 1);
    expect(store().stageRequests).toBe(0);
  });
});

describe('Next', () => {
  it('runs exactly one stage', async () => {
    expect(await controller.nextStage()).toBe(true);
    expect(await controller.nextStage()).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    expect(posted()).toEqual(STAGES.slice(0, 2));
    expect(store().cursor).toBe(2);
  });
});
