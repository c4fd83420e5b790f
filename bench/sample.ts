// Benchmark suite `sample`: time per sampled token of KV-cache generation (prefill + batched decode steps,
// CPU logits processing included, as the studio's "sample" stage runs it) on every golden tiny model and a
// SmolLM2-135M-shaped Llama with random weights. EOS ids are left empty so every row runs the full
// max_new_tokens and the numbers do not depend on what the random weights happen to emit.
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Gpu } from '../src/gpu/context.ts';
import { CausalLM } from '../src/model/model.ts';
import { FolderSource } from '../src/model/source_node.ts';
import { DEFAULT_GENERATE, generate, kvDecoder } from '../src/model/generate.ts';
import { smolLM2, weights } from './model.ts';
import type { BenchOptions, Row } from './types.ts';

const GOLDEN = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/golden/models');
const TINY = ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3'];

async function measure(name: string, model: CausalLM, N: number, G: number, P: number, max_new_tokens: number): Promise<Row> {
  const V = model.config.vocab_size;
  const prompts = Array.from({ length: N }, (_, n) => Array.from({ length: P - n }, (_, t) => (3 + 7 * t + 11 * n) % V));
  const run = () =>
    generate(kvDecoder(model), prompts, { ...DEFAULT_GENERATE, num_generations: G, max_new_tokens, temperature: 1, top_k: 0, top_p: 1, pad_token_id: 0, eos_token_ids: [], seed: 1 });
  await run(); // warmup: pipelines, first touch of the cache buffers
  const t = (await run()).timings;
  return {
    model: name,
    B: N * G,
    prompt: P,
    new_tokens: t.steps,
    prefill_ms: t.prefill_ms,
    ms_per_step: t.ms_per_step,
    ms_per_token: t.ms_per_token,
    sampler_ms_per_step: t.sampler_ms / t.steps,
    tokens_per_s: t.tokens / ((t.prefill_ms + t.decode_ms) / 1000),
  };
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const m of TINY) {
    const model = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), gpu);
    rows.push(await measure(m, model, 3, 2, 5, opts.quick ? 8 : 32));
    model.destroy();
  }
  const cfg = smolLM2(opts.quick ? 2048 : 49152);
  const model = CausalLM.fromWeights(gpu, cfg, weights(cfg));
  rows.push(await measure(`SmolLM2-135M-shaped (V ${cfg.vocab_size})`, model, opts.quick ? 1 : 2, opts.quick ? 2 : 8, opts.quick ? 8 : 64, opts.quick ? 4 : 64));
  model.destroy();
  return rows;
}
