// Reads an imported batch file in a worker of its own, started by the studio worker for each import, so a
// huge file can be stopped: cancelling terminates that worker (a hung or 10-second parse included) while
// the studio worker, with the loaded model and its GPU device, carries on. `handleImportMessage` is the
// worker side (readAnyBatch, then the Doctor unless the studio worker checks with its tokenizer);
// `parseInWorker` the caller side.
import { diagnose } from '../doctor/index.ts';
import type { DoctorReport } from '../doctor/types.ts';
import { readAnyBatch } from '../io/formats/index.ts';
import type { ImportResult } from '../io/formats/common.ts';
import { Cancelled, errorInfo, StudioFailure } from './errors.ts';
import type { LoadProgress, WorkerErrorInfo } from './protocol.ts';

export interface ImportJob {
  bytes: Uint8Array;
  name: string;
  /** Run the Doctor here (false: the caller runs it with the model's tokenizer). */
  doctor: boolean;
}

export type ImportReply =
  | { progress: LoadProgress }
  | { ok: true; read: ImportResult; report: DoctorReport | null }
  | { ok: false; error: WorkerErrorInfo };

/** Worker side: one job in, progress and one answer out. */
export function handleImportMessage(job: ImportJob, post: (r: ImportReply) => void): void {
  try {
    post({ progress: { label: `parsing ${job.name}`, loaded: 0, total: job.bytes.byteLength } });
    const read = readAnyBatch(job.bytes, job.name);
    if (job.doctor) post({ progress: { label: 'Doctor checks', loaded: 0, total: read.batch.completion_ids.length } });
    post({ ok: true, read, report: job.doctor ? diagnose(read.batch) : null });
  } catch (e) {
    post({ ok: false, error: errorInfo(e) });
  }
}

/** What the caller needs from the worker (a DOM Worker in the browser). */
interface ImportWorker {
  postMessage(job: ImportJob, transfer: Transferable[]): void;
  terminate(): void;
  onmessage: ((ev: { data: ImportReply }) => void) | null;
  onerror: ((ev: { message?: string }) => void) | null;
}

const spawnImportWorker = (): ImportWorker =>
  new Worker(new URL('./import.worker.ts', import.meta.url), { type: 'module', name: 'import' }) as unknown as ImportWorker;

/** A started parse: its answer, and a cancel that terminates the worker and rejects with Cancelled. */
export interface ParseRun {
  done: Promise<{ read: ImportResult; report: DoctorReport | null }>;
  cancel(): void;
}

/** Caller side: parses `bytes` (transferred, not copied) in a fresh worker. */
export function parseInWorker(job: ImportJob, onProgress: (p: LoadProgress) => void, spawn: () => ImportWorker = spawnImportWorker): ParseRun {
  const w = spawn();
  let settle: { resolve(v: { read: ImportResult; report: DoctorReport | null }): void; reject(e: unknown): void };
  const done = new Promise<{ read: ImportResult; report: DoctorReport | null }>((resolve, reject) => (settle = { resolve, reject }));
  const end = (f: () => void) => {
    w.terminate();
    w.onmessage = null;
    w.onerror = null;
    f();
  };
  w.onmessage = ({ data }) => {
    if ('progress' in data) return onProgress(data.progress);
    if (data.ok) end(() => settle.resolve({ read: data.read, report: data.report }));
    else end(() => settle.reject(new StudioFailure(data.error.kind, data.error.message, data.error.detail)));
  };
  // An error event here is the worker dying (e.g. out of memory on a huge file), not a bad file.
  w.onerror = (ev) => end(() => settle.reject(new StudioFailure('internal', `the import worker stopped: ${ev.message || 'out of memory?'} (${job.name}, ${job.bytes.byteLength} bytes)`)));
  w.postMessage(job, [job.bytes.buffer]);
  return { done, cancel: () => end(() => settle.reject(new Cancelled())) };
}
