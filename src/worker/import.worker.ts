// Entry of the import worker: one file in, progress and the parsed batch out (see import_job.ts).
import { handleImportMessage, type ImportJob, type ImportReply } from './import_job.ts';

const post = (r: ImportReply, transfer: Transferable[] = []) => self.postMessage(r, { transfer });
self.onmessage = (ev: MessageEvent<ImportJob>) => void handleImportMessage(ev.data, post);
