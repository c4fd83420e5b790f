// Node-only tokenizer loader: reads tokenizer.json and tokenizer_config.json from a local folder (a Hugging
// Face model directory) and builds the environment-neutral Tokenizer from them. Never touches the network.
// Kept apart from tokenizer.ts so the browser bundle never imports node:fs.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Tokenizer } from './tokenizer.ts';

export class TokenizerLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenizerLoadError';
  }
}

async function readJson(file: string): Promise<object> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new TokenizerLoadError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return JSON.parse(text) as object;
  } catch (e) {
    throw new TokenizerLoadError(`${file} is not valid JSON (${(e as Error).message})`);
  }
}

/**
 * Load a tokenizer from a folder holding tokenizer.json + tokenizer_config.json. A chat template stored
 * beside them (chat_template.jinja, or chat_template.json as newer transformers saves it) is used when the
 * config has none.
 */
export async function loadTokenizerDir(dir: string): Promise<Tokenizer> {
  const tokenizerJSON = await readJson(path.join(dir, 'tokenizer.json'));
  const config = (await readJson(path.join(dir, 'tokenizer_config.json'))) as Record<string, unknown>;
  if (!config.chat_template) {
    const jinja = await readFile(path.join(dir, 'chat_template.jinja'), 'utf8').catch(() => undefined);
    const fromJson = jinja ?? ((await readJson(path.join(dir, 'chat_template.json')).catch(() => ({}))) as { chat_template?: string }).chat_template;
    if (fromJson) config.chat_template = fromJson;
  }
  return Tokenizer.fromJSON(tokenizerJSON, config);
}
