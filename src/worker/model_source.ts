// Where the page's model comes from: a ModelChoice (the embedded default served over HTTP, a Hub id or a
// dropped folder) as a ModelSource, and the tokenizer (with its chat template) read from that source. Kept
// apart from the step runner (runner.ts), which only asks for a source and a tokenizer.
import { ModelLoadError } from '../model/config.ts';
import { HubSource } from '../model/hub.ts';
import { FileSource, parseJSONFile, readStream, type ModelSource } from '../model/source.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { ModelChoice } from '../bridge/protocol.ts';

/** A model folder served over plain HTTP (the embedded default under public/models/, at the URL the page resolved). */
class UrlSource implements ModelSource {
  constructor(
    readonly name: string,
    private readonly base: string,
  ) {}

  /**
   * The file, or null where it is missing. Static hosts with a single-page-app fallback (the Vite dev
   * server, many CDNs) answer a missing path with index.html and 200: no model file is ever HTML.
   */
  private async get(file: string, method: 'GET' | 'HEAD' = 'GET'): Promise<Response | null> {
    const res = await fetch(new URL(file, this.base), { method });
    return res.ok && !(res.headers.get('content-type') ?? '').startsWith('text/html') ? res : null;
  }

  private async need(file: string): Promise<Response> {
    const res = await this.get(file);
    if (!res?.body) throw new ModelLoadError(`${this.name}: no ${file} at ${new URL(file, this.base).href}`);
    return res;
  }

  async exists(file: string): Promise<boolean> {
    return (await this.get(file, 'HEAD')) !== null;
  }

  async readJSON(file: string): Promise<unknown> {
    return parseJSONFile(this, file, await (await this.need(file)).text());
  }

  async readBytes(file: string, onProgress?: (loaded: number, total: number) => void): Promise<Uint8Array> {
    const res = await this.need(file);
    return readStream(res.body!, Number(res.headers.get('content-length') ?? 0), onProgress);
  }
}

export function sourceOf(choice: ModelChoice): ModelSource {
  switch (choice.kind) {
    case 'embedded':
      return new UrlSource(choice.name, choice.url);
    case 'hub':
      return new HubSource(choice.id, { revision: choice.revision });
    case 'local':
      return FileSource.fromFiles(choice.files, choice.name);
  }
}

/**
 * tokenizer.json + tokenizer_config.json from the model's source (a chat_template.jinja beside them when
 * the config has none), and what to call it: the config's tokenizer_class and the tokenizer.json model type.
 * Null for a weights-only folder (no tokenizer.json): an id batch needs none, as `grpo-studio score`.
 */
export async function loadTokenizer(source: ModelSource): Promise<{ tokenizer: Tokenizer; kind: string } | null> {
  if (!(await source.exists('tokenizer.json'))) return null;
  const { Tokenizer } = await import('../tokenize/tokenizer.ts');
  const json = (await source.readJSON('tokenizer.json')) as { model?: { type?: string } };
  const config = (await source.readJSON('tokenizer_config.json')) as Record<string, unknown>;
  if (!config.chat_template && (await source.exists('chat_template.jinja'))) config.chat_template = new TextDecoder().decode(await source.readBytes('chat_template.jinja'));
  const kind = [config.tokenizer_class, json.model?.type].filter((x) => typeof x === 'string').join(', ') || 'tokenizer';
  return { tokenizer: await Tokenizer.fromJSON(json, config), kind };
}
