// The studio worker holds the import the page shows, not the last one it parsed: an import the page cancels as
// its answer arrives is dropped in the worker too, so a later model load re-checks the batch on screen (with the
// tokenizer rules) instead of answering for another. A request for a batch the worker does not hold is an error
// the page shows, never an empty answer it ignores. The real worker module (src/worker/studio.worker.ts) runs in
// this thread on the software GPU; its import worker is the in-thread stand-in (tests/helpers/import_worker.ts).
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { nodeGpu } from '../../src/gpu/node.ts';
import type { Request, WorkerMessage } from '../../src/bridge/protocol.ts';
import { fakeWorker } from '../helpers/import_worker.ts';
import { memoryStorage } from '../helpers/page_store.ts';

vi.mock('../../src/gpu/browser.ts', () => ({ browserGpu: () => nodeGpu() }));

const MODEL = 'public/models/tiny-adder';
const A = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 302, eos_token_ids: [304],
  prompt_ids: [[16, 10, 17], [16, 10, 17], [18, 10, 19], [18, 10, 19]], completion_ids: [[18, 304], [19, 20, 304], [22, 304], [23, 304]],
  completion_mask: [[1, 1], [1, 1, 1], [1, 1], [1, 1]], rewards: [1, 0, 1, 0],
};
const B = { ...A, rewards: [0, 1, 0, 1] };
const fileOf = (name: string, obj: unknown) => new File([JSON.stringify(obj)], name);
const verdicts = (xs: { rule: string; severity?: string; reason?: string }[]) => xs.map((x) => `${x.rule}/${x.severity ?? x.reason}`).sort();

/** The studio worker module loaded afresh in this thread: its replies go to `reply` (a macrotask later, as a Worker's). */
async function loadWorker(reply: (msg: WorkerMessage) => void): Promise<(id: number, request: Request) => void> {
  vi.resetModules();
  vi.stubGlobal('Worker', class {
    onmessage: ((ev: { data: unknown }) => void) | null = null;
    private inner = fakeWorker('run').w;
    constructor() {
      this.inner.onmessage = (ev) => this.onmessage?.(ev);
    }
    postMessage(msg: never) {
      this.inner.postMessage(msg);
    }
    terminate() {}
  });
  const self = { postMessage: (msg: WorkerMessage) => setTimeout(() => reply(msg), 0), onmessage: null as ((ev: { data: unknown }) => void) | null };
  vi.stubGlobal('self', self);
  await import('../../src/worker/studio.worker.ts');
  return (id, request) => setTimeout(() => self.onmessage!({ data: { id, request } }), 0);
}

describe('the import the studio worker holds', () => {
  it('follows the page: a cancelled import is dropped, a held one replaces those before it, and a request for another is an error', async () => {
    const answers = new Map<number, (msg: WorkerMessage) => void>();
    const send = await loadWorker((msg) => 'id' in msg && 'ok' in msg && answers.get(msg.id)?.(msg));
    const ask = (id: number, request: Request) => new Promise<WorkerMessage>((resolve) => (answers.set(id, resolve), send(id, request)));
    const ok = (m: WorkerMessage) => 'ok' in m && m.ok;
    expect(ok(await ask(1, { type: 'import-batch', file: fileOf('a.json', A), name: 'a.json' }))).toBe(true);
    await ask(2, { type: 'hold-import', import: 1 });
    // B is answered, and the page cancels it as the answer arrives.
    expect(ok(await ask(3, { type: 'import-batch', file: fileOf('b.json', B), name: 'b.json' }))).toBe(true);
    await ask(4, { type: 'cancel', target: 3 });
    expect(ok(await ask(5, { type: 'tokenizer-checks', import: 1 }))).toBe(true);
    const cancelled = await ask(6, { type: 'tokenizer-checks', import: 3 });
    expect(ok(cancelled)).toBe(false);
    // A newer import taken by the page: the one before it is no longer held.
    expect(ok(await ask(7, { type: 'import-batch', file: fileOf('b.json', B), name: 'b.json' }))).toBe(true);
    await ask(8, { type: 'hold-import', import: 7 });
    expect(ok(await ask(9, { type: 'tokenizer-checks', import: 1 }))).toBe(false);
    expect(ok(await ask(10, { type: 'mismatch', of: { kind: 'import', import: 1 } }))).toBe(false);
    expect(ok(await ask(11, { type: 'tokenizer-checks', import: 7 }))).toBe(true);
  });

  it("on the page: import A, import B cancelled as it answers, load a model: A's report is re-checked with the model, as without the cancel", async () => {
    /** The page's controller and store over the worker module; returns what the page shows at the end. */
    async function page(cancelB: boolean) {
      let cancelAt: number | null = null;
      let armed = false;
      let port: { onmessage: ((ev: { data: unknown }) => void) | null } | null = null;
      let cancel: () => void = () => {};
      const send = await loadWorker((msg) => {
        // The page cancels B's import just as its answer reaches the page.
        if ('id' in msg && msg.id === cancelAt && 'ok' in msg) cancel();
        port?.onmessage?.({ data: msg });
      });
      const inner = globalThis.Worker as unknown as new () => object;
      vi.stubGlobal('localStorage', memoryStorage());
      vi.stubGlobal('Worker', class {
        onmessage: ((ev: { data: unknown }) => void) | null = null;
        onerror = null;
        private imports: { postMessage(m: unknown): void; onmessage: unknown } | null = null;
        constructor(_url: unknown, opts: { name?: string }) {
          if (opts?.name === 'import') {
            const imports = new inner() as { postMessage(m: unknown): void; onmessage: unknown };
            imports.onmessage = (ev: unknown) => this.onmessage?.(ev as never);
            this.imports = imports;
          } else port = this;
        }
        postMessage(msg: { id: number; request: Request }) {
          if (this.imports) return this.imports.postMessage(msg);
          if (armed && msg.request.type === 'import-batch') {
            armed = false;
            cancelAt = msg.id;
          }
          send(msg.id, msg.request);
        }
        terminate() {}
      });
      const controller = await import('../../src/store/controller.ts');
      const { studioStore } = await import('../../src/store/index.ts');
      const { importStore } = await import('../../src/store/import.ts');
      cancel = () => importStore.getState().cancel?.();
      await controller.importBatchFiles([fileOf('a.json', A)]);
      armed = cancelB;
      await controller.importBatchFiles([fileOf('b.json', B)]);
      const files = readdirSync(MODEL).map((f) => {
        const file = new File([readFileSync(join(MODEL, f))], f);
        Object.defineProperty(file, 'webkitRelativePath', { value: `tiny-adder/${f}` });
        return file;
      });
      await controller.loadModel({ kind: 'local', name: 'tiny-adder', files });
      // The re-check is asked after the load answers: wait for its answer to land.
      const s = () => studioStore().getState();
      await vi.waitFor(() => expect(s().imported?.report.skipped.some((k) => k.rule === 'template-mismatch')).toBe(false), { timeout: 10_000 });
      return { name: s().batchName, errors: s().errors.map((e) => e.message), findings: verdicts(s().findings), skipped: verdicts(s().skipped) };
    }
    const normal = await page(false);
    const raced = await page(true);
    expect(normal.name).toBe('b.json');
    expect(raced.name).toBe('a.json');
    expect(raced.errors).toEqual([]);
    // A and B differ only in their rewards: the same tokenizer verdicts, now with the model's tokenizer.
    expect({ findings: raced.findings, skipped: raced.skipped }).toEqual({ findings: normal.findings, skipped: normal.skipped });
  });
});
