// A model folder as the page sends a dropped directory (File objects with webkitRelativePath): a random tiny
// Qwen2 with the default task's tokenizer, for the StepRunner tests (tests/worker/step_runner.test.ts,
// tests/worker/trainer_view.test.ts).
import { copyFileSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseConfig } from '../../src/model/config.ts';
import { randomWeights, tempDir, writeModelFolder } from '../fixtures/models.ts';

const TOKENIZER_DIR = resolve(__dirname, '../../public/models/tiny-adder');

/** A model folder as the page sends it: File objects named like a dropped directory (random weights from `seed`; `extraVocab` pads the embedding). */
export function droppedFolder(name = 'tiny', seed = 9, extraVocab = 0): File[] {
  const vocab = JSON.parse(readFileSync(join(TOKENIZER_DIR, 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> }; added_tokens: { id: number }[] };
  const V = Math.max(...Object.values(vocab.model.vocab), ...vocab.added_tokens.map((t) => t.id)) + 1;
  const hf = {
    architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', vocab_size: V + extraVocab, hidden_size: 16, num_attention_heads: 2, num_key_value_heads: 1,
    num_hidden_layers: 2, intermediate_size: 24, rms_norm_eps: 1e-6, rope_theta: 1e6, max_position_embeddings: 128, tie_word_embeddings: true,
  };
  const dir = writeModelFolder(join(tempDir('runner'), name), hf, randomWeights(parseConfig(hf), seed));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(TOKENIZER_DIR, f), join(dir, f));
  return readdirSync(dir).map((f) => {
    const file = new File([readFileSync(join(dir, f))], f);
    Object.defineProperty(file, 'webkitRelativePath', { value: `${name}/${f}` });
    return file;
  });
}

