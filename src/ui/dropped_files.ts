// A dropped or picked folder as the worker reads it: File objects with their paths relative to the
// dropped directory (webkitRelativePath), for the model, reference and adapter folder inputs.
import type { ModelChoice } from '../bridge/protocol.ts';

/** Files of a dropped folder (recursively), with their relative paths. */
export async function droppedFiles(items: DataTransferItemList): Promise<File[]> {
  const out: File[] = [];
  const walk = async (entry: FileSystemEntry | null): Promise<void> => {
    if (!entry) return;
    if (entry.isFile) {
      const f = await new Promise<File>((res, rej) => (entry as FileSystemFileEntry).file(res, rej));
      Object.defineProperty(f, 'webkitRelativePath', { value: entry.fullPath.replace(/^\//, '') });
      out.push(f);
    } else {
      const reader = (entry as FileSystemDirectoryEntry).createReader();
      for (;;) {
        const batch = await new Promise<FileSystemEntry[]>((res, rej) => reader.readEntries(res, rej));
        if (batch.length === 0) break;
        for (const e of batch) await walk(e);
      }
    }
  };
  for (const item of Array.from(items)) await walk(item.webkitGetAsEntry());
  return out;
}

/** A picked or dropped folder as the worker loads it, named by its top directory. */
export function folderChoice(files: File[]): ModelChoice | null {
  if (files.length === 0) return null;
  return { kind: 'local', name: files[0].webkitRelativePath.split('/')[0] || 'local folder', files };
}
