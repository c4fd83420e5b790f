// KV-cache generation on the golden tiny models (tests/golden/models): greedy decoding with the
// cache against re-running the full forward at every step (same tokens, same last-position logits),
// seeds, per-row stopping, min_new_tokens, and the recorded sampling log-probs against the trainer's
// re-scoring of the generated batch (score_completions), the comparison the Doctor makes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleBatch, padBatch } from '../../src/grpo/batch.ts';
import { DEFAULT_GENERATE, generate, kvDecoder, type Decoder, type GenerateOptions } from '../../src/model/generate.ts';
import type { ForwardInputs } from '../../src/model/forward.ts';
import { CausalLM } from '../../src/model/model.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { closeReport, expectClose } from '../helpers/close.ts';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN } from '../helpers/golden.ts';


/** The golden batch's prompts: 3 prompts of lengths 2, 4, 5 (each stored once per completion, G = 2). */
function goldenPrompts(m: string): number[][] {
  const b = JSON.parse(readFileSync(join(GOLDEN, m, 'batch.json'), 'utf8')) as { prompt_ids: number[][]; num_generations: number };
  return b.prompt_ids.filter((_, i) => i % b.num_generations === 0);
}

async function load(m: string): Promise<CausalLM> {
  return CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), await testGpu());
}

/** The oracle: no cache, the whole (B, P + t) sequence through the model at every step. */
class FullDecoder implements Decoder {
  readonly vocab_size: number;
  private ids: number[][] = [];
  private pos: number[][] = [];
  constructor(private readonly model: CausalLM) {
    this.vocab_size = model.config.vocab_size;
  }
  async prefill(x: ForwardInputs & { max_len: number }) {
    const { B, T } = x;
    this.ids = Array.from({ length: B }, (_, b) => Array.from(x.input_ids.subarray(b * T, (b + 1) * T)));
    this.pos = Array.from({ length: B }, (_, b) => Array.from(x.position_ids.subarray(b * T, (b + 1) * T)));
    return this.run(x.attention_mask);
  }
  async step(tokens: Int32Array, position_ids: Int32Array, attention_mask: Int32Array) {
    tokens.forEach((t, b) => this.ids[b].push(t));
    position_ids.forEach((p, b) => this.pos[b].push(p));
    return this.run(attention_mask);
  }
  private async run(attention_mask: Int32Array): Promise<Float32Array> {
    const B = this.ids.length;
    const L = this.ids[0].length;
    const gpu = this.model.gpu;
    const rec = gpu.recorder('full forward');
    const { logits, V } = this.model.forward(rec, { B, T: L, input_ids: Int32Array.from(this.ids.flat()), attention_mask, position_ids: Int32Array.from(this.pos.flat()) });
    await rec.submit();
    const all = await gpu.readF32(logits, B * L * V); // (B, L, V)
    const out = new Float32Array(B * V); // (B, V) last position of each row
    for (let b = 0; b < B; b++) out.set(all.subarray((b * L + L - 1) * V, (b * L + L) * V), b * V);
    return out;
  }
  dispose() {}
}

const opts = (o: Partial<GenerateOptions> = {}): GenerateOptions => ({
  ...DEFAULT_GENERATE,
  eos_token_ids: [1],
  pad_token_id: 0,
  num_generations: 2,
  max_new_tokens: 10,
  seed: 1,
  ...o,
});

/** Runs generate and keeps every step's raw logits (B, V). */
async function run(decoder: Decoder, prompts: number[][], o: GenerateOptions) {
  const logits: Float32Array[] = [];
  const out = await generate(decoder, prompts, { ...o, on_step: (_, l) => logits.push(l.slice()) });
  return { out, logits };
}

describe('greedy decoding with the KV cache equals re-running the full forward', () => {
  for (const m of ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3']) {
    it(m, async () => {
      const model = await load(m);
      const prompts = goldenPrompts(m);
      // No EOS: every row runs the full 12 steps, so the cache is exercised to its capacity.
      const o = opts({ temperature: 0, eos_token_ids: [], max_new_tokens: 12 });
      const kv = kvDecoder(model);
      const cached = await run(kv, prompts, o);
      const full = await run(new FullDecoder(model), prompts, o);
      expect(cached.out.completion_ids).toEqual(full.out.completion_ids);
      expect(cached.logits.length).toBe(12);
      // Same float32 kernels on the same rows; the cached step sees Tk = P + t keys where the full
      // forward sees L with the later ones causally masked (exact zeros), so they usually agree bitwise —
      // but the golden logits tolerance (rtol 1e-4, atol 1e-4) is the contract.
      let worst = 0;
      cached.logits.forEach((l, t) => {
        worst = Math.max(worst, expectClose(l, full.logits[t], { rtol: 1e-4, atol: 1e-4, label: `${m} step ${t} logits` }).worst);
      });
      console.log(`${m}: cache vs full forward logits, worst fraction of tolerance ${worst.toExponential(2)}`);
      // Greedy rows of a group are the same.
      for (let b = 0; b < 6; b += 2) expect(cached.out.completion_ids[b]).toEqual(cached.out.completion_ids[b + 1]);
      kv.dispose();
      model.destroy();
    });
  }
});

describe('sampling on tiny-llama (KV cache, B = 6)', () => {
  let model: CausalLM;
  let kv: Decoder;
  const prompts = goldenPrompts('tiny-llama');
  beforeAll(async () => {
    model = await load('tiny-llama');
    kv = kvDecoder(model);
  });
  afterAll(() => {
    kv.dispose();
    model.destroy();
  });

  it('the same seed gives the same completions and log-probs; another seed differs', async () => {
    const o = opts({ temperature: 0.9, top_p: 0.95, top_k: 50, max_new_tokens: 12, eos_token_ids: [] });
    const a = await generate(kv, prompts, o);
    const b = await generate(kv, prompts, o);
    const c = await generate(kv, prompts, { ...o, seed: 2 });
    expect(b.completion_ids).toEqual(a.completion_ids);
    expect(b.sampling_per_token_logps).toEqual(a.sampling_per_token_logps);
    expect(c.completion_ids).not.toEqual(a.completion_ids);
    expect(a.completion_ids[0]).not.toEqual(a.completion_ids[1]); // two samples of one prompt
    const t = a.timings;
    console.log(
      `tiny-llama B=6 generate: prefill ${t.prefill_ms.toFixed(1)} ms, ${t.steps} steps, ${t.tokens} tokens, ` +
        `${t.ms_per_step.toFixed(2)} ms/step, ${t.ms_per_token.toFixed(2)} ms/token, sampler ${(t.sampler_ms / t.steps).toFixed(3)} ms/step`,
    );
  });

  it('stops each row at its own first EOS, leaving the other rows unchanged', async () => {
    // Row b's t-th draw depends only on (seed, b, t) and its own tokens, so a run with EOS ids must be the
    // run without, each row cut after its first EOS.
    const o = opts({ max_new_tokens: 16, eos_token_ids: [] });
    const free = await generate(kv, prompts, o);
    // Two EOS ids chosen among tokens the free run produced, so some rows stop and others may not.
    const seen = free.completion_ids.map((c) => c[5]);
    const eos = [seen[0], seen[3]];
    const out = await generate(kv, prompts, { ...o, eos_token_ids: eos });
    let stopped = 0;
    for (let b = 0; b < out.B; b++) {
      const f = free.completion_ids[b];
      const cut = f.findIndex((id) => eos.includes(id));
      const expected = cut < 0 ? f : f.slice(0, cut + 1);
      expect(out.completion_ids[b], `row ${b}`).toEqual(expected);
      expect(out.sampling_per_token_logps[b]).toEqual(free.sampling_per_token_logps[b].slice(0, expected.length));
      expect(out.finish_reason[b]).toBe(cut < 0 ? 'length' : 'eos');
      if (cut >= 0 && cut < 15) stopped++;
    }
    expect(stopped).toBeGreaterThanOrEqual(2);
    expect(new Set(out.completion_ids.map((c) => c.length)).size).toBeGreaterThan(1);
  });

  it('min_new_tokens keeps every EOS id out of the first tokens', async () => {
    const o = opts({ max_new_tokens: 10, eos_token_ids: [] });
    const free = await generate(kv, prompts, o);
    // EOS ids = the free run's first two tokens of every row: without the minimum every row stops at once.
    const eos = [...new Set(free.completion_ids.flatMap((c) => c.slice(0, 2)))];
    const early = await generate(kv, prompts, { ...o, eos_token_ids: eos });
    expect(early.completion_ids.every((c) => c.length <= 2)).toBe(true);
    const out = await generate(kv, prompts, { ...o, eos_token_ids: eos, min_new_tokens: 4 });
    for (let b = 0; b < out.B; b++) {
      const c = out.completion_ids[b];
      expect(c.length, `row ${b}`).toBeGreaterThanOrEqual(5);
      expect(c.slice(0, 4).some((id) => eos.includes(id)), `row ${b}: EOS before min_new_tokens`).toBe(false);
      expect(out.finish_reason[b]).toBe(eos.includes(c[c.length - 1]) ? 'eos' : 'length');
    }
  });

  it('the GPU sampler draws what the float64 CPU sampler draws from the same logits, under every setting', async () => {
    // Same model, same seed: the CPU loop reads back each step's logits and samples in float64, the GPU
    // loop samples on the device and feeds the ids back from a GPU buffer. Their tokens must agree (a
    // flip needs a uniform within f32 rounding of a CDF boundary: none in these draws) and their
    // log-probs within f32 of each other; EOS stops and min_new_tokens apply the same way.
    const settings: Partial<GenerateOptions>[] = [
      {},
      { temperature: 0.7, top_k: 20, top_p: 0.9 },
      { top_p: 0.6, min_p: 0.05 },
      { temperature: 0 },
      { repetition_penalty: 1.4, presence_penalty: 0.3, frequency_penalty: 0.2 },
      { repetition_penalty: 1.2, penalty_scope: 'prompt+completion', temperature: 0 },
      { eos_token_ids: [1, 2, 3], min_new_tokens: 3 },
    ];
    for (const o of settings) {
      const s = opts({ max_new_tokens: 9, seed: 4, eos_token_ids: [], ...o });
      const onGpu = await generate(kv, prompts, s);
      const onCpu = await generate(kv, prompts, { ...s, sampler: 'cpu' });
      const label = JSON.stringify(o);
      expect(onGpu.sampled_on, label).toEqual({ device: 'gpu' });
      expect(onCpu.sampled_on, label).toEqual({ device: 'cpu', reason: "sampler: 'cpu' asked for" });
      expect(onGpu.completion_ids, label).toEqual(onCpu.completion_ids);
      expect(onGpu.finish_reason, label).toEqual(onCpu.finish_reason);
      expectClose(onGpu.sampling_per_token_logps.flat(), onCpu.sampling_per_token_logps.flat(), { rtol: 1e-5, atol: 1e-5, label });
    }
  });

  it('says why it samples on the CPU', async () => {
    const out = await generate(kv, prompts, { ...opts({ max_new_tokens: 2 }), on_step: () => {} });
    expect(out.sampled_on).toEqual({ device: 'cpu', reason: "on_step reads every step's logits" });
  });

  it('sampling_per_token_logps equal the trainer re-scoring the generated batch (temperature 1, no truncation)', async () => {
    const out = await generate(kv, prompts, opts({ max_new_tokens: 8, seed: 9 }));
    const batch = padBatch(
      assembleBatch({ prompt_ids: out.prompt_ids, completion_ids: out.completion_ids, num_generations: 2, pad_token_id: 0, eos_token_ids: [1], sampling_per_token_logps: out.sampling_per_token_logps }),
    );
    const gpu = model.gpu;
    const rec = gpu.recorder('score');
    const scores = score_completions(rec, model, batch);
    await rec.submit();
    const logps = await gpu.readF32(scores.per_token_logps, batch.B * batch.C);
    scores.destroy();
    // Both sides are float32 forwards of the same tokens (cached vs full attention): the golden
    // per_token_logps tolerance (rtol 1e-4, atol 1e-5) applies.
    const r = closeReport(logps, batch.sampling_per_token_logps!, { rtol: 1e-4, atol: 1e-5, mask: batch.completion_mask });
    console.log(`sampling vs re-scored logps: worst fraction ${r.worst.toExponential(2)} over ${r.compared} tokens`);
    expectClose(logps, batch.sampling_per_token_logps!, { rtol: 1e-4, atol: 1e-5, mask: batch.completion_mask, label: 'sampling vs scored logps' });
  });
});
