// Batched generation for GRPO: N prompts × G completions = B rows (a prompt's G rows consecutive),
// prompts left-padded as TRL does, one token per row per step, each row stopping at any EOS id or at
// max_new_tokens. The model side is a Decoder (prefill the prompts, then one step per token); the loop
// reads back only the last position's logits (B, V), processes them on the CPU with the sampler and
// records each sampled token's log-prob under the distribution it was drawn from
// (sampling_per_token_logps), which the Doctor compares with the trainer's old_per_token_logps.
import { positionIds } from './positions.ts';
import { KVCache } from './kv_cache.ts';
import type { ForwardInputs } from './forward.ts';
import type { CausalLM } from './model.ts';
import { DEFAULT_SAMPLING, SamplingError, sample_step, validateSampling, type RowState, type SamplingSettings } from './sampler.ts';

/** The model as the decode loop sees it. Rows are fixed for the whole generation. */
export interface Decoder {
  readonly vocab_size: number; // V
  /** Positions the model can embed (learned absolute positions, GPT-2); undefined: unbounded (RoPE). */
  readonly max_positions?: number;
  /**
   * Runs the left-padded prompts and returns the logits of their last position (B, V).
   * input_ids, attention_mask, position_ids: (B, P); max_len: P + the most tokens that will be stepped.
   */
  prefill(x: ForwardInputs & { max_len: number }): Promise<Float32Array>;
  /**
   * Appends one token per row (B) at position_ids (B) and returns the logits of that position (B, V).
   * attention_mask (B, P + t + 1) covers everything so far, the new token included.
   */
  step(tokens: Int32Array, position_ids: Int32Array, attention_mask: Int32Array): Promise<Float32Array>;
  /** Frees whatever the decoder holds (KV cache buffers). */
  dispose(): void;
}

export interface GenerateOptions extends SamplingSettings {
  num_generations: number; // G
  max_new_tokens: number;
  /** Left padding of prompts and the token fed to rows that already stopped (HF generate). */
  pad_token_id: number;
  seed: number;
  /** Called with each step's raw last-position logits (B, V), before processing (tests, the UI). */
  on_step?: (step: number, logits: Float32Array) => void;
}

export type FinishReason = 'eos' | 'length';

export interface GenerateOutput {
  B: number;
  G: number;
  prompt_ids: number[][]; // (N) one per group, unpadded
  completion_ids: number[][]; // (B, ragged) EOS included when hit
  sampling_per_token_logps: number[][]; // (B, ragged) float64 log-probs of the processed distribution
  finish_reason: FinishReason[]; // (B)
  timings: {
    prefill_ms: number;
    decode_ms: number; // all decode steps, sampler included
    sampler_ms: number; // CPU logits processing and sampling
    steps: number; // tokens per row at most (the loop's iterations)
    tokens: number; // Σ completion lengths
    ms_per_step: number; // (prefill + decode) / steps: one token for every live row
    ms_per_token: number; // (prefill + decode) / tokens
  };
}

export const DEFAULT_GENERATE: Omit<GenerateOptions, 'pad_token_id' | 'eos_token_ids'> = {
  ...DEFAULT_SAMPLING,
  num_generations: 1,
  max_new_tokens: 64,
  seed: 0,
};

/** The generation batch: prompts repeated G times (rows of a group consecutive) and left-padded to P. */
export function padPrompts(prompts: number[][], G: number, pad_token_id: number) {
  const B = prompts.length * G;
  const P = Math.max(...prompts.map((p) => p.length));
  const input_ids = new Int32Array(B * P).fill(pad_token_id); // (B, P)
  const attention_mask = new Int32Array(B * P); // (B, P)
  for (let b = 0; b < B; b++) {
    const p = prompts[Math.floor(b / G)];
    for (let i = 0; i < p.length; i++) {
      input_ids[b * P + P - p.length + i] = p[i];
      attention_mask[b * P + P - p.length + i] = 1;
    }
  }
  return { B, P, input_ids, attention_mask, position_ids: positionIds(attention_mask, B, P, 'from_attention_mask') };
}

function validate(prompts: number[][], o: GenerateOptions, V: number, maxPositions = Infinity): void {
  validateSampling(o, V);
  const bad = (msg: string): never => {
    throw new SamplingError(msg);
  };
  if (prompts.length === 0) bad('generate: no prompts');
  prompts.forEach((p, n) => {
    if (p.length === 0) bad(`generate: prompt ${n} is empty`);
    p.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= V) bad(`generate: prompt ${n} position ${i}: token ${id} is not in the ${V}-token vocabulary`);
    });
  });
  if (!Number.isInteger(o.num_generations) || o.num_generations < 1) bad(`generate: num_generations ${o.num_generations} must be an integer ≥ 1`);
  if (!Number.isInteger(o.max_new_tokens) || o.max_new_tokens < 1) bad(`generate: max_new_tokens ${o.max_new_tokens} must be an integer ≥ 1`);
  if (o.min_new_tokens > o.max_new_tokens) bad(`generate: min_new_tokens ${o.min_new_tokens} exceeds max_new_tokens ${o.max_new_tokens}`);
  if (!Number.isInteger(o.pad_token_id) || o.pad_token_id < 0 || o.pad_token_id >= V) bad(`generate: pad_token_id ${o.pad_token_id} is not in the ${V}-token vocabulary`);
  if (!Number.isSafeInteger(o.seed) || o.seed < 0) bad(`generate: seed ${o.seed} must be a non-negative safe integer`);
  // The last sampled token is never fed back, so the deepest position fed is len + max_new_tokens − 2.
  prompts.forEach((p, n) => {
    if (p.length + o.max_new_tokens - 1 > maxPositions) bad(`generate: prompt ${n} (${p.length} tokens) + max_new_tokens ${o.max_new_tokens} exceeds the model's ${maxPositions} positions`);
  });
}

/**
 * Generates G completions for each prompt. Row b's t-th token depends only on the logits, the settings
 * and uniform(seed, b, t), so the same seed gives the same completions and any step can be replayed.
 */
export async function generate(decoder: Decoder, prompts: number[][], o: GenerateOptions): Promise<GenerateOutput> {
  const V = decoder.vocab_size;
  validate(prompts, o, V, decoder.max_positions);
  const G = o.num_generations;
  const { B, P, input_ids, attention_mask: promptMask, position_ids } = padPrompts(prompts, G, o.pad_token_id);
  const states: RowState[] = [];
  const completion_ids: number[][] = [];
  const logps: number[][] = [];
  const finish: (FinishReason | null)[] = new Array(B).fill(null);
  const nextPos = new Int32Array(B); // (B) position of the next token: real prompt length + generated
  for (let b = 0; b < B; b++) {
    completion_ids.push([]);
    logps.push([]);
    states.push({ prompt_ids: prompts[Math.floor(b / G)], completion_ids: completion_ids[b] });
    nextPos[b] = prompts[Math.floor(b / G)].length;
  }

  const t0 = performance.now();
  let logits = await decoder.prefill({ B, T: P, input_ids, attention_mask: promptMask, position_ids, max_len: P + o.max_new_tokens - 1 });
  const prefill_ms = performance.now() - t0;
  let sampler_ms = 0;
  let steps = 0;
  const tokens = new Int32Array(B);
  for (let t = 0; t < o.max_new_tokens; t++) {
    o.on_step?.(t, logits);
    const ts = performance.now();
    // Only live rows are processed (finished rows are fed pad_token_id, as HF does).
    const live: number[] = [];
    for (let b = 0; b < B; b++) if (!finish[b]) live.push(b);
    const liveLogits = new Float32Array(live.length * V); // (live, V)
    live.forEach((b, i) => liveLogits.set(logits.subarray(b * V, (b + 1) * V), i * V));
    const s = sample_step(liveLogits, live.map((b) => states[b]), o, o.seed, t, live);
    sampler_ms += performance.now() - ts;
    steps++;
    tokens.fill(o.pad_token_id);
    live.forEach((b, i) => {
      tokens[b] = s.tokens[i];
      completion_ids[b].push(s.tokens[i]);
      logps[b].push(s.logps[i]);
      if (o.eos_token_ids.includes(s.tokens[i])) finish[b] = 'eos';
      else if (completion_ids[b].length === o.max_new_tokens) finish[b] = 'length';
    });
    if (finish.every((f) => f)) break;
    // The new column: every row attends to its new token (HF appends 1s for all rows, finished included).
    const L = P + t + 1;
    const mask = new Int32Array(B * L); // (B, L)
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < P; i++) mask[b * L + i] = promptMask[b * P + i];
      for (let i = P; i < L; i++) mask[b * L + i] = 1;
    }
    logits = await decoder.step(tokens, nextPos.slice(), mask);
    for (let b = 0; b < B; b++) nextPos[b]++;
  }
  const total = performance.now() - t0;
  const ntok = completion_ids.reduce((a, c) => a + c.length, 0);
  return {
    B,
    G,
    prompt_ids: prompts.map((p) => p.slice()),
    completion_ids,
    sampling_per_token_logps: logps,
    finish_reason: finish as FinishReason[],
    timings: {
      prefill_ms,
      decode_ms: total - prefill_ms,
      sampler_ms,
      steps,
      tokens: ntok,
      ms_per_step: total / steps,
      ms_per_token: total / Math.max(1, ntok),
    },
  };
}

/**
 * The KV-cache decoder over a CausalLM: the prefill writes the prompts' keys / values into a cache sized
 * for the whole generation, then each step runs the model on one token per row. Reusable: every
 * prefill starts a fresh cache; dispose() frees it.
 */
export function kvDecoder(model: CausalLM): Decoder {
  const gpu = model.gpu;
  let cache: KVCache | null = null;
  const run = async (x: ForwardInputs, kvCache: KVCache): Promise<Float32Array> => {
    const rec = gpu.recorder('generate');
    const { logits, rows, V } = model.forward(rec, x, { kvCache });
    await rec.submit();
    return gpu.readF32(logits, rows * V); // (B, V)
  };
  return {
    vocab_size: model.config.vocab_size,
    max_positions: model.config.rope_theta === null ? model.config.max_position_embeddings : undefined,
    async prefill({ max_len, ...x }) {
      cache?.destroy();
      cache = new KVCache(gpu, model.config, x.B, max_len);
      return run(x, cache);
    },
    async step(tokens, position_ids, attention_mask) {
      if (!cache) throw new Error('kvDecoder: step before prefill');
      const B = tokens.length;
      const L = attention_mask.length / B;
      const mask = new Int32Array(B); // (B, 1) the new column
      for (let b = 0; b < B; b++) mask[b] = attention_mask[b * L + L - 1];
      return run({ B, T: 1, input_ids: tokens, attention_mask: mask, position_ids }, cache);
    },
    dispose() {
      cache?.destroy();
      cache = null;
    },
  };
}
