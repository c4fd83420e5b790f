// Where a checkpoint's files come from. The loader only ever asks a ModelSource for a JSON file or a
// file's bytes (with progress), so one loader serves a local folder (source_node.ts), a folder the
// user dropped into the browser (FileSource, here) and the Hugging Face Hub over HTTP (hub.ts).
import { ModelLoadError } from './config.ts';

/** Bytes received so far of one file, and its size when known (0 when not). */
export type ByteProgress = (loaded: number, total: number) => void;

export interface ModelSource {
  /** Shown in errors and progress ("./models/tiny-llama", "HuggingFaceTB/SmolLM2-135M@main"). */
  readonly name: string;
  exists(file: string): Promise<boolean>;
  readJSON(file: string): Promise<unknown>;
  readBytes(file: string, onProgress?: ByteProgress): Promise<Uint8Array>;
}

/** Parses JSON text from a source file, naming the file on failure. */
export function parseJSONFile(source: ModelSource, file: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelLoadError(`${source.name}: ${file} is not valid JSON (${(e as Error).message})`);
  }
}

/** Reads a stream into one buffer, reporting progress per chunk (total 0 when unknown: the buffer grows). */
export async function readStream(stream: ReadableStream<Uint8Array>, total: number, onProgress?: ByteProgress): Promise<Uint8Array> {
  const reader = stream.getReader();
  let buf = new Uint8Array(total > 0 ? total : 1 << 20);
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.byteLength > buf.byteLength) {
      const grown = new Uint8Array(Math.max(buf.byteLength * 2, loaded + value.byteLength));
      grown.set(buf.subarray(0, loaded));
      buf = grown;
    }
    buf.set(value, loaded);
    loaded += value.byteLength;
    onProgress?.(loaded, total);
  }
  return loaded === buf.byteLength ? buf : buf.subarray(0, loaded);
}

/** The parts of a FileSystemDirectoryHandle we use (showDirectoryPicker / a dropped directory entry). */
export interface DirectoryHandleLike {
  getFileHandle(name: string): Promise<{ getFile(): Promise<Blob> }>;
}

/** A folder in the browser: files dropped or picked (File objects), or a FileSystemDirectoryHandle. */
export class FileSource implements ModelSource {
  private constructor(
    readonly name: string,
    private readonly lookup: (file: string) => Promise<Blob | null>,
  ) {}

  /**
   * From dropped / picked files. A folder drop gives paths like "SmolLM2-135M/config.json"
   * (webkitRelativePath): the first path component is the folder and is dropped.
   */
  static fromFiles(files: Iterable<File>, name = 'dropped folder'): FileSource {
    const byName = new Map<string, Blob>();
    for (const f of files) {
      const rel = (f as File & { webkitRelativePath?: string }).webkitRelativePath || f.name;
      byName.set(rel.includes('/') ? rel.slice(rel.indexOf('/') + 1) : rel, f);
    }
    return new FileSource(name, async (file) => byName.get(file) ?? null);
  }

  static fromDirectoryHandle(handle: DirectoryHandleLike, name = 'folder'): FileSource {
    return new FileSource(name, async (file) => {
      try {
        return await (await handle.getFileHandle(file)).getFile();
      } catch {
        return null;
      }
    });
  }

  private async blob(file: string): Promise<Blob> {
    const b = await this.lookup(file);
    if (!b) throw new ModelLoadError(`${this.name}: no ${file}`);
    return b;
  }

  async exists(file: string): Promise<boolean> {
    return (await this.lookup(file)) !== null;
  }

  async readJSON(file: string): Promise<unknown> {
    return parseJSONFile(this, file, await (await this.blob(file)).text());
  }

  async readBytes(file: string, onProgress?: ByteProgress): Promise<Uint8Array> {
    const b = await this.blob(file);
    return readStream(b.stream() as ReadableStream<Uint8Array>, b.size, onProgress);
  }
}
