// Reads an imported batch file in a worker of its own, started by the studio worker for each import, so a
// huge file can be stopped: cancelling terminates that worker (a hung or 10-second parse included) while
// the studio worker, with the loaded model and its GPU device, carries on. The file travels as a File
// handle (no bytes cross the page's thread) and is read here with progress. `handleImportMessage` is the
// worker side (read, importBatch, then the Doctor unless the studio worker checks with its tokenizer);
// `parseInWorker` the caller side. Several files of one step (TRL ranks, OpenRLHF experiences) travel in one job
// and are merged here exactly as the CLI merges them (importBatch).
import { diagnose, doctorOptions } from '../doctor/index.ts';
import type { DoctorReport } from '../doctor/types.ts';
import { importBatch } from '../io/formats/index.ts';
import type { ImportResult } from '../io/formats/common.ts';
import { Cancelled, errorInfo, StudioFailure } from '../bridge/errors.ts';
import { BATCH_ROW_FIELDS, packParts, rowPaths, unpackParts, type RowPart } from '../bridge/rows.ts';
import type { LoadProgress, WorkerErrorInfo } from '../bridge/protocol.ts';

export interface ImportJob {
  file: Blob;
  name: string;
  /** More files of the same step (several rank files dropped or selected at once), merged with `file` as the CLI merges them. */
  also?: { file: Blob; name: string }[];
  /** Run the Doctor here (false: the caller runs it with the model's tokenizer). */
  doctor: boolean;
}

export type ImportReply =
  | { progress: LoadProgress }
  /** The batch's rows travel packed in `parts` (src/bridge/rows.ts), their arrays emptied in `read`. */
  | { ok: true; read: ImportResult; report: DoctorReport | null; parts: RowPart[] }
  | { ok: false; error: WorkerErrorInfo };

/** Read progress is posted every this many bytes. */
const PROGRESS_BYTES = 4 << 20;

/** Reads a file into one buffer, reporting progress as it goes. */
async function readBlob(file: Blob, name: string, post: (r: ImportReply) => void): Promise<Uint8Array> {
  const out = new Uint8Array(file.size);
  const reader = file.stream().getReader();
  let n = 0;
  let shown = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (n + value.length > out.length) throw new StudioFailure('bad-file', `${name}: the file grew while it was read (${file.size} bytes at the start)`);
    out.set(value, n);
    n += value.length;
    if (n - shown >= PROGRESS_BYTES) {
      shown = n;
      post({ progress: { label: `reading ${name}`, loaded: n, total: file.size } });
    }
  }
  return n === out.length ? out : out.subarray(0, n);
}

/** Worker side: one job in, progress and one answer out. */
export async function handleImportMessage(job: ImportJob, post: (r: ImportReply, transfer?: Transferable[]) => void): Promise<void> {
  try {
    // Every file of the step, then the CLI's reader and merge (src/cli/args.ts readBatchFiles → importBatch): one
    // file is read as it is, several are merged by mergeImports with its agreement checks.
    const files: { name: string; bytes: Uint8Array }[] = [];
    for (const f of [{ file: job.file, name: job.name }, ...(job.also ?? [])]) files.push({ name: f.name, bytes: await readBlob(f.file, f.name, post) });
    const read = importBatch(files, {}, (_done, _total, name) => name && post({ progress: { label: `parsing ${name}`, loaded: 0, total: 0 } }));
    if (job.doctor) post({ progress: { label: 'Doctor checks', loaded: 0, total: 0 } });
    // No model here: the batch alone, as `grpo-studio doctor` without --tokenizer.
    const report = job.doctor ? diagnose(read.batch, doctorOptions(read.batch, undefined, read.inferred)) : null;
    // Transferred, not cloned: cloning the nested arrays cost both workers about as long as the parse.
    const { value, parts, transfer } = packParts({ read, report }, rowPaths(read.batch, BATCH_ROW_FIELDS, ['read', 'batch']));
    post({ ok: true, ...value, parts }, transfer);
  } catch (e) {
    post({ ok: false, error: errorInfo(e) });
  }
}

/** What the caller needs from the worker (a DOM Worker in the browser). */
interface ImportWorker {
  postMessage(job: ImportJob): void;
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

/** Caller side: reads and parses `job.file` in a fresh worker. */
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
    if (data.ok) end(() => settle.resolve(unpackParts({ read: data.read, report: data.report }, data.parts)));
    else end(() => settle.reject(new StudioFailure(data.error.kind, data.error.message, data.error.detail)));
  };
  // An error event here is the worker dying (e.g. out of memory on a huge file), not a bad file.
  w.onerror = (ev) => end(() => settle.reject(new StudioFailure('internal', `the import worker stopped: ${ev.message || 'out of memory?'} (${job.name}, ${job.file.size} bytes)`)));
  w.postMessage(job);
  return { done, cancel: () => end(() => settle.reject(new Cancelled())) };
}
