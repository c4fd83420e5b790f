// Benchmark suite `model`: forward (scoring: logits_to_keep = half the sequence) and forward + backward
// tokens per second of the GPU model, on every golden tiny model with its own batch shape and on a
// SmolLM2-135M-shaped Llama (30 layers, C 576, 9 / 3 heads, I 1536) with random weights and a vocabulary
// slice (the full 49152-row head would only add one big matmul). Wall time from submit to
// onSubmittedWorkDone, median of the repetitions after a warmup: model passes are hundreds of dispatches,
// more than the per-dispatch timestamp timer holds. GFLOP/s are the FLOPs the pass's dispatches declare (its GEMMs
// and attention: src/gpu/stats.ts Work), not 2 (or 6) × parameters × tokens: the head runs on the kept rows only.
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { statsSince, type Gpu, type Recorder } from '../src/gpu/context.ts';
import { countParams, numel, paramSpecs, parseConfig, type ModelConfig } from '../src/model/config.ts';
import type { ForwardInputs } from '../src/model/forward.ts';
import { CausalLM } from '../src/model/model.ts';
import { FolderSource } from '../src/model/source_node.ts';
import { rates, type BenchOptions, type Peak, type Row } from './types.ts';

const GOLDEN = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/golden/models');
const TINY = ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3', 'tiny-llama-bf16'];

export function smolLM2(V: number): ModelConfig {
  return parseConfig({
    architectures: ['LlamaForCausalLM'], vocab_size: V, hidden_size: 576, num_attention_heads: 9, num_key_value_heads: 3,
    num_hidden_layers: 30, intermediate_size: 1536, rms_norm_eps: 1e-5, rope_theta: 100000, max_position_embeddings: 8192, tie_word_embeddings: true,
  });
}

/** Deterministic pseudo-random weights (an LCG: generating 100M Gaussian values would dominate the run). */
export function weights(cfg: ModelConfig): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  let s = 1;
  for (const { name, shape } of paramSpecs(cfg)) {
    const a = new Float32Array(numel(shape));
    const norm = /norm\.weight$/.test(name);
    for (let i = 0; i < a.length; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      a[i] = norm ? 1 : ((s >>> 8) / (1 << 24) - 0.5) * 0.1;
    }
    out[name] = a;
  }
  return out;
}

/** B rows of T tokens, the first quarter of each row after row 0 left-padded (generation position ids). */
function inputs(cfg: ModelConfig, B: number, T: number): ForwardInputs {
  const x: ForwardInputs = { B, T, input_ids: new Int32Array(B * T), attention_mask: new Int32Array(B * T), position_ids: new Int32Array(B * T) };
  for (let b = 0; b < B; b++) {
    const pad = b === 0 ? 0 : Math.floor(T / 4);
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      x.input_ids[i] = t < pad ? 0 : (7 * i + 3) % cfg.vocab_size;
      x.attention_mask[i] = t < pad ? 0 : 1;
      x.position_ids[i] = t < pad ? 1 : t - pad;
    }
  }
  return x;
}

/** The median wall ms of `reps` runs after a warmup, and the FLOPs one run's dispatches declare. */
async function wall(gpu: Gpu, label: string, record: (rec: Recorder) => void, reps: number): Promise<{ ms: number; flops: number }> {
  let flops = 0;
  const once = async () => {
    const rec = gpu.recorder(label);
    const before = { ...gpu.stats };
    const t0 = performance.now();
    record(rec);
    flops = statsSince(gpu.stats, before).flops;
    await rec.finish();
    return performance.now() - t0;
  };
  await once(); // warmup: pipelines, first touch of every buffer
  const times: number[] = [];
  for (let i = 0; i < reps; i++) times.push(await once());
  return { ms: times.sort((a, b) => a - b)[Math.floor(reps / 2)], flops };
}

async function measure(gpu: Gpu, name: string, model: CausalLM, B: number, T: number, reps: number, peak: Peak | null | undefined): Promise<Row[]> {
  const x = inputs(model.config, B, T);
  const keep = Math.floor(T / 2);
  const V = model.config.vocab_size;
  const dlogits = gpu.createBuffer('bench dlogits', B * keep * V * 4);
  const rows: Row[] = [];
  const fwd = await wall(gpu, `${name} forward`, (rec) => model.forward(rec, x, { logits_to_keep: keep }), reps);
  const train = await wall(
    gpu,
    `${name} forward+backward`,
    (rec) => {
      model.forward(rec, x, { logits_to_keep: keep, save: true });
      model.backward(rec, dlogits);
    },
    reps,
  );
  const params = countParams(model.config);
  for (const [pass, { ms, flops }] of [['forward', fwd], ['forward+backward', train]] as const) {
    const { 'GFLOP/s': gflops, of_fma_peak } = rates({ flops, bytesMoved: 0 }, ms, peak);
    rows.push({ model: name, params, B, T, pass, ms, tokens_per_s: (B * T) / (ms / 1000), gflops, of_fma_peak });
  }
  dlogits.destroy();
  return rows;
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const reps = opts.quick ? 1 : 5;
  const rows: Row[] = [];
  for (const m of TINY) {
    const model = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), gpu);
    rows.push(...(await measure(gpu, m, model, 6, 11, reps, opts.peak)));
    model.destroy();
  }
  const cfg = smolLM2(opts.quick ? 2048 : 8192);
  const model = CausalLM.fromWeights(gpu, cfg, weights(cfg));
  // Quick sizes stay small: a software adapter runs this model at about 1 GFLOP/s.
  const shapes: [number, number][] = opts.quick ? [[1, 16]] : [[1, 256], [4, 256], [8, 256]];
  for (const [B, T] of shapes) rows.push(...(await measure(gpu, `SmolLM2-135M-shaped (V ${cfg.vocab_size})`, model, B, T, reps, opts.peak)));
  model.destroy();
  return rows;
}
