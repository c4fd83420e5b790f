// The import worker (src/worker/import_job.ts) without a Worker: a stand-in that runs the real worker side in
// this thread, never answers ('hang') or dies ('die'), for tests that drive parseInWorker in Node.
import { handleImportMessage, type ImportJob, type ImportReply } from '../../src/worker/import_job.ts';

export function fakeWorker(mode: 'run' | 'hang' | 'die') {
  const state = { terminated: false };
  const w = {
    onmessage: null as ((ev: { data: ImportReply }) => void) | null,
    onerror: null as ((ev: { message?: string }) => void) | null,
    terminate: () => void (state.terminated = true),
    postMessage(job: ImportJob) {
      if (mode === 'hang') return;
      queueMicrotask(() => (mode === 'die' ? w.onerror?.({ message: 'Out of memory' }) : void handleImportMessage(job, (r) => w.onmessage?.({ data: r }))));
    },
  };
  return { w, state };
}
