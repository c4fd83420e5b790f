// A checkpoint folder on disk (CLI, tests, benchmarks), read in chunks so big shards report progress.
// `openModelSource` also accepts a Hub id ("HuggingFaceTB/SmolLM2-135M") when no such folder exists.
import { existsSync, statSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { ModelLoadError } from './config.ts';
import { HubSource } from './hub.ts';
import { parseJSONFile, type ByteProgress, type ModelSource } from './source.ts';

const CHUNK = 64 << 20;

export class FolderSource implements ModelSource {
  readonly name: string;

  constructor(readonly dir: string) {
    this.name = dir;
    this.dir = resolve(dir);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new ModelLoadError(`${dir}: not a model folder`);
  }

  async exists(file: string): Promise<boolean> {
    return existsSync(this.inside(file));
  }

  /** `file` inside the folder; a name that resolves outside it (`../../etc/passwd`, an absolute path) is an error. */
  private inside(file: string): string {
    const p = resolve(this.dir, file);
    const rel = relative(this.dir, p);
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) throw new ModelLoadError(`${this.dir}: ${JSON.stringify(file)} is outside the model folder`);
    return p;
  }

  private path(file: string): string {
    const p = this.inside(file);
    if (!existsSync(p)) throw new ModelLoadError(`${this.dir}: no ${file}`);
    return p;
  }

  async readJSON(file: string): Promise<unknown> {
    return parseJSONFile(this, file, await readFile(this.path(file), 'utf8'));
  }

  async readBytes(file: string, onProgress?: ByteProgress): Promise<Uint8Array> {
    const fh = await open(this.path(file), 'r');
    try {
      const { size } = await fh.stat();
      const out = new Uint8Array(size);
      for (let off = 0; off < size; ) {
        const { bytesRead } = await fh.read(out, off, Math.min(CHUNK, size - off), off);
        if (bytesRead === 0) throw new ModelLoadError(`${this.dir}: ${file} ended after ${off} of ${size} bytes`);
        off += bytesRead;
        onProgress?.(off, size);
      }
      return out;
    } finally {
      await fh.close();
    }
  }
}

/** A local folder when one exists at `pathOrId`, else a Hub id ("org/name" or "org/name@revision"). */
export function openModelSource(pathOrId: string, opts: { endpoint?: string } = {}): ModelSource {
  if (existsSync(pathOrId)) return new FolderSource(resolve(pathOrId));
  const m = /^([\w.-]+\/[\w.-]+)(?:@([\w./-]+))?$/.exec(pathOrId);
  if (!m) throw new ModelLoadError(`${pathOrId}: no such folder, and not a Hub id like "org/name"`);
  return new HubSource(m[1], { revision: m[2], endpoint: opts.endpoint ?? process.env.HF_ENDPOINT, token: process.env.HF_TOKEN });
}
