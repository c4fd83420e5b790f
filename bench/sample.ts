// Benchmark suite `sample`: time per sampled token of KV-cache generation (prefill + batched decode steps,
// sampling included, as the studio's "sample" stage runs it) on every golden tiny model and a
// SmolLM2-135M-shaped Llama with random weights (in f32, and packed bf16 as a LoRA base holds them), once
// with each sampler in the same run: the GPU one (src/kernels/sample.ts, ids fed back on the GPU, read every
// few steps) and the float64 CPU reference on read-back logits. EOS ids are left empty so every row runs the
// full max_new_tokens and the numbers do not depend on what the random weights happen to emit. Then the
// samplers alone on one step's random (B, V) logits at V up to Qwen2.5's 151,936, with the default settings
// and with top-k + top-p: ms per step each (the GPU's per submit, including its small read-back), the GPU's
// also at 256 threads a row (what GPUs ran for a vocabulary over 1,024 before they took up to 1,024 threads
// above 4,096: src/kernels/sample.ts ROW_THREADS).
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { statsSince, type Gpu } from '../src/gpu/context.ts';
import { CausalLM } from '../src/model/model.ts';
import { FolderSource } from '../src/model/source_node.ts';
import { DEFAULT_GENERATE, generate, kvDecoder } from '../src/model/generate.ts';
import { DEFAULT_SAMPLING, sample_step, type SamplingSettings } from '../src/model/sampler.ts';
import { sample_forward } from '../src/kernels/sample.ts';
import { Rng } from '../src/model/rng.ts';
import { smolLM2, weights } from './model.ts';
import { rates, type BenchOptions, type Peak, type Row } from './types.ts';

const GOLDEN = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/golden/models');
const TINY = ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3'];

async function measure(name: string, model: CausalLM, N: number, G: number, P: number, max_new_tokens: number, peak: Peak | null | undefined): Promise<Row[]> {
  const V = model.config.vocab_size;
  const prompts = Array.from({ length: N }, (_, n) => Array.from({ length: P - n }, (_, t) => (3 + 7 * t + 11 * n) % V));
  const rows: Row[] = [];
  for (const sampler of ['gpu', 'cpu'] as const) {
    const run = () =>
      generate(kvDecoder(model), prompts, { ...DEFAULT_GENERATE, num_generations: G, max_new_tokens, temperature: 1, top_k: 0, top_p: 1, pad_token_id: 0, eos_token_ids: [], seed: 1, sampler });
    await run(); // warmup: pipelines, first touch of the cache buffers
    const before = { ...model.gpu.stats };
    const t = (await run()).timings;
    const work = statsSince(model.gpu.stats, before);
    rows.push({
      model: name,
      sampler,
      B: N * G,
      prompt: P,
      new_tokens: t.steps,
      prefill_ms: t.prefill_ms,
      ms_per_step: t.ms_per_step,
      ms_per_token: t.ms_per_token,
      sampler_ms_per_step: sampler === 'cpu' ? t.sampler_ms / t.steps : null,
      tokens_per_s: t.tokens / ((t.prefill_ms + t.decode_ms) / 1000),
      // Generation reads every weight once per step: its rate is bandwidth's (prefill and decode together).
      ...rates(work, t.prefill_ms + t.decode_ms, peak),
    });
  }
  return rows;
}

/** The samplers alone: TRL's and the studio's defaults (temperature 1, nothing truncated), and top-k + top-p. */
const ALONE: [string, Partial<SamplingSettings>][] = [
  ['defaults', {}],
  ['top-k 50 + top-p 0.9', { temperature: 0.8, top_k: 50, top_p: 0.9 }],
];

/** One decode step's sampling alone on random (B, V) logits: the float64 CPU sampler vs sample_forward (one submit + read-back of the ids). */
async function samplerAlone(gpu: Gpu, B: number, V: number, reps: number, [what, o]: (typeof ALONE)[number]): Promise<Row> {
  const s: SamplingSettings = { ...DEFAULT_SAMPLING, ...o };
  const logits = new Rng(B * V).f32(B * V, 3);
  const states = Array.from({ length: B }, () => ({ prompt_ids: [0], completion_ids: [] }));
  const t = performance.now();
  for (let r = 0; r < reps; r++) sample_step(logits, states, s, 1, r);
  const cpu = (performance.now() - t) / reps;
  const buf = gpu.upload('bench.logits', logits);
  const eos = gpu.upload('bench.eos', new Uint32Array(1));
  const ids = gpu.createBuffer('bench.ids', reps * B * 4);
  const logps = gpu.createBuffer('bench.logps', reps * B * 4);
  const step = async (r: number, wg?: number) => {
    const rec = gpu.recorder('bench sample');
    sample_forward(rec, { logits: buf, counts: null, eos, n_eos: 0, eos_masked: false, ids, logps, B, V, seed: 1, step: r, params: { ...s, greedy: false }, wg });
    await rec.submit();
    await gpu.read(ids, B * 4, r * B * 4);
  };
  const timed = async (wg?: number) => {
    await step(0, wg); // warmup: the pipeline
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) await step(r, wg);
    return (performance.now() - t0) / reps;
  };
  const onGpu = await timed();
  const at256 = await timed(256); // every WebGPU device takes 256 invocations
  for (const b of [buf, eos, ids, logps]) b.destroy();
  return { model: `sampler alone, ${what} (V ${V})`, B, cpu_sampler_ms_per_step: cpu, gpu_sampler_ms_per_step: onGpu, gpu_256_threads_ms_per_step: at256 };
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const m of TINY) {
    const model = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), gpu);
    rows.push(...(await measure(m, model, 3, 2, 5, opts.quick ? 8 : 32, opts.peak)));
    model.destroy();
  }
  const cfg = smolLM2(opts.quick ? 2048 : 49152);
  // In f32 (a full fine-tune's policy), and packed bf16 as a LoRA base holds it (its projections and tied head
  // read bf16 weights: the few-row kernel on GPUs).
  for (const storage of ['f32', 'checkpoint'] as const) {
    const model = CausalLM.fromWeights(gpu, cfg, weights(cfg), storage);
    rows.push(...(await measure(`SmolLM2-135M-shaped (V ${cfg.vocab_size})${storage === 'checkpoint' ? ', bf16 weights' : ''}`, model, opts.quick ? 1 : 2, opts.quick ? 2 : 8, opts.quick ? 8 : 64, opts.quick ? 4 : 64, opts.peak)));
    model.destroy();
  }
  for (const V of opts.quick ? [328, 50257] : [328, 50257, 151936]) for (const a of ALONE) rows.push(await samplerAlone(gpu, opts.quick ? 4 : 16, V, opts.quick ? 3 : 10, a));
  return rows;
}
