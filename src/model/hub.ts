// The Hugging Face Hub over HTTP: `{endpoint}/{id}/resolve/{revision}/{file}`, the URL layout the Hub
// and its mirrors serve. Responses go through the Cache API when the platform has one (browsers), so a
// model is downloaded once; elsewhere every read is a fetch.
import { ModelLoadError } from './config.ts';
import { parseJSONFile, readStream, type ByteProgress, type ModelSource } from './source.ts';

const CACHE_NAME = 'grpo-studio-models';

export interface HubOptions {
  revision?: string; // default "main"
  endpoint?: string; // default "https://huggingface.co"
  token?: string; // for gated / private repos
}

export class HubSource implements ModelSource {
  readonly name: string;
  private readonly revision: string;
  private readonly endpoint: string;
  private readonly headers: Record<string, string>;

  constructor(
    readonly id: string,
    opts: HubOptions = {},
  ) {
    this.revision = opts.revision ?? 'main';
    this.endpoint = (opts.endpoint ?? 'https://huggingface.co').replace(/\/+$/, '');
    this.headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
    this.name = `${id}@${this.revision}`;
  }

  url(file: string): string {
    return `${this.endpoint}/${this.id}/resolve/${encodeURIComponent(this.revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
  }

  private async cache(): Promise<Cache | null> {
    const caches = (globalThis as { caches?: CacheStorage }).caches;
    if (!caches) return null;
    try {
      return await caches.open(CACHE_NAME);
    } catch {
      return null; // e.g. an opaque origin: work uncached
    }
  }

  private async fetchFile(file: string, method: 'GET' | 'HEAD'): Promise<Response> {
    const url = this.url(file);
    const cache = await this.cache();
    const hit = await cache?.match(url);
    if (hit) return hit;
    let res: Response;
    try {
      res = await fetch(url, { method, headers: this.headers });
    } catch (e) {
      throw new ModelLoadError(`${this.name}: cannot fetch ${url} (${(e as Error).message})`);
    }
    if (res.ok && cache && method === 'GET') await cache.put(url, res.clone());
    return res;
  }

  private async get(file: string): Promise<Response> {
    const res = await this.fetchFile(file, 'GET');
    if (!res.ok) {
      const why = res.status === 404 ? 'not found' : res.status === 401 || res.status === 403 ? 'access denied (gated or private: set a token)' : res.statusText;
      throw new ModelLoadError(`${this.name}: ${file}: HTTP ${res.status} ${why}`);
    }
    return res;
  }

  async exists(file: string): Promise<boolean> {
    const res = await this.fetchFile(file, 'HEAD');
    if (res.ok) return true;
    if (res.status === 404) return false;
    throw new ModelLoadError(`${this.name}: ${file}: HTTP ${res.status} ${res.statusText}`);
  }

  async readJSON(file: string): Promise<unknown> {
    return parseJSONFile(this, file, await (await this.get(file)).text());
  }

  async readBytes(file: string, onProgress?: ByteProgress): Promise<Uint8Array> {
    const res = await this.get(file);
    const total = Number(res.headers.get('content-length') ?? 0);
    if (!res.body) return new Uint8Array(await res.arrayBuffer());
    return readStream(res.body as ReadableStream<Uint8Array>, total, onProgress);
  }
}
