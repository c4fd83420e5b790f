// The adapter-missing-on-sampler case on the embedded tiny-adder, shared by the CLI and page tests: four
// completions of one addition prompt in the model's own chat format, and a PEFT adapter folder whose lora_B
// is nonzero (a fresh adapter's B = 0 would leave the model unchanged, and the sampler would match it).
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { parseConfig, type ModelConfig } from '../../src/model/config.ts';
import { initLoraWeights, saveLoraAdapter, type LoraWeights } from '../../src/model/lora.ts';
import { Rng } from '../../src/model/rng.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';

export const TINY_ADDER = resolve(import.meta.dirname, '../../public/models/tiny-adder');

export const tinyAdderConfig = (): ModelConfig => parseConfig(JSON.parse(readFileSync(join(TINY_ADDER, 'config.json'), 'utf8')));

/** Four completions of "What is 37 + 45?", one group, in tiny-adder's ChatML. */
export async function adderBatch(): Promise<GrpoBatch> {
  const tok = await loadTokenizerDir(TINY_ADDER);
  const prompt = tok.encode(tok.applyChatTemplate([{ role: 'user', content: 'What is 37 + 45?' }], { add_generation_prompt: true }));
  const completions = ['82<|im_end|>', 'The answer is 82.<|im_end|>', '812<|im_end|>', 'The sum is 83'].map((t) => tok.encode(t));
  return {
    format: 'grpo-batch/v1',
    num_generations: 4,
    pad_token_id: tok.pad_token_id!,
    eos_token_ids: [tok.eos_token_id!],
    prompt_ids: completions.map(() => prompt),
    completion_ids: completions,
    completion_mask: completions.map((c) => c.map(() => 1)),
    advantages: [1.5, -0.5, -0.5, -0.5],
  };
}

/** An all-linear r = 4 adapter for tiny-adder with lora_B drawn from a seed, written as a PEFT folder. */
export function nonzeroAdapter(): { weights: LoraWeights; dir: string } {
  const weights = initLoraWeights(tinyAdderConfig(), { r: 4, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear', seed: 5 }, TINY_ADDER);
  const rng = new Rng(11);
  for (const m of weights.modules) for (let i = 0; i < m.B.length; i++) m.B[i] = (rng.next() - 0.5) * 0.8;
  const dir = join(mkdtempSync(join(tmpdir(), 'adapter-')), 'adapter');
  mkdirSync(dir);
  for (const [name, data] of Object.entries(saveLoraAdapter(weights))) writeFileSync(join(dir, name), data);
  return { weights, dir };
}
