// Batched generation for GRPO: N prompts × G completions = B rows (a prompt's G rows consecutive),
// prompts left-padded as TRL does, one token per row per step, each row stopping at any EOS id or at
// max_new_tokens. The model side is a Decoder (prefill the prompts, then one step per token). Each
// sampled token's log-prob under the distribution it was drawn from is recorded
// (sampling_per_token_logps), which the Doctor compares with the trainer's old_per_token_logps.
// Two samplers with the same semantics and RNG stream: on the GPU (src/kernels/sample.ts) when the decoder
// has a GPU side — the sampled ids feed the next step from a GPU buffer, each step is one submit (a long
// prefill is streamed in pieces: RecorderOptions.stream) and the ids and log-probs are read back every few
// steps to stop at EOS, so no (B, V) logits leave the GPU — and the float64 CPU sampler (src/model/sampler.ts, the reference) on read-back logits otherwise,
// or when asked to (sampler: 'cpu'), or when on_step wants every step's logits. The output says which ran and why.
import type { Gpu, Recorder } from '../gpu/context.ts';
import { SAMPLE_BAD_LOGIT, sample_forward, usesCounts } from '../kernels/sample.ts';
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
  /** The decoder's GPU side, when it has one: generate() then samples on the GPU. */
  readonly device?: DecoderDevice;
}

/** prefill / step recorded into the caller's recorder, returning the (B, V) logits buffer (filled once it is submitted). */
export interface DecoderDevice {
  readonly gpu: Gpu;
  recordPrefill(rec: Recorder, x: ForwardInputs & { max_len: number }): GPUBuffer;
  /** As step, with the tokens copied on the GPU from `idsFrom` (B i32) when given (`tokens` then placeholders). */
  recordStep(rec: Recorder, tokens: Int32Array, position_ids: Int32Array, attention_mask: Int32Array, idsFrom?: { buffer: GPUBuffer; offset: number }): GPUBuffer;
}

export interface GenerateOptions extends SamplingSettings {
  num_generations: number; // G
  max_new_tokens: number;
  /** Left padding of prompts and the token fed to rows that already stopped (HF generate). */
  pad_token_id: number;
  seed: number;
  /** Called with each step's raw last-position logits (B, V), before processing (tests): needs the CPU sampler. */
  on_step?: (step: number, logits: Float32Array) => void;
  /** 'cpu': the float64 reference sampler on read-back logits even when the decoder has a GPU side (default 'gpu'). */
  sampler?: 'gpu' | 'cpu';
}

export type FinishReason = 'eos' | 'length';

export interface GenerateOutput {
  B: number;
  G: number;
  prompt_ids: number[][]; // (N) one per group, unpadded
  completion_ids: number[][]; // (B, ragged) EOS included when hit
  sampling_per_token_logps: number[][]; // (B, ragged) float64 log-probs of the processed distribution
  finish_reason: FinishReason[]; // (B)
  /** Where the tokens were sampled, and why on the CPU when it was. */
  sampled_on: { device: 'gpu' } | { device: 'cpu'; reason: string };
  timings: {
    prefill_ms: number;
    decode_ms: number; // all decode steps, sampler included
    sampler_ms: number; // CPU logits processing and sampling (0 on the GPU: it runs inside the steps' submits)
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
 * The most steps between read-backs of the GPU sampler's ids. The interval starts at 1 and doubles up to
 * this while no row has finished, then drops back to 1: a long generation waits on few round trips, and
 * once rows start to stop, no step runs past the one where the last row stopped (on a software adapter
 * a wasted decode step costs far more than a round trip).
 */
const READ_EVERY_MAX = 8;

/** Why generate() samples on the CPU for these arguments, or null for the GPU. */
function cpuReason(decoder: Decoder, o: GenerateOptions, B: number): string | null {
  if (o.sampler === 'cpu') return "sampler: 'cpu' asked for";
  if (o.on_step) return "on_step reads every step's logits";
  const dev = decoder.device;
  if (!dev) return 'the decoder has no GPU side';
  const limit = dev.gpu.limits.maxStorageBufferBindingSize;
  if (B * decoder.vocab_size * 4 > limit) return `the (B, V) = (${B}, ${decoder.vocab_size}) logits exceed one storage binding (${limit} bytes)`;
  return null;
}

/** The rows of one generation and what they have produced so far. */
interface Rows {
  B: number;
  P: number;
  input_ids: Int32Array; // (B, P)
  promptMask: Int32Array; // (B, P)
  position_ids: Int32Array; // (B, P)
  states: RowState[];
  completion_ids: number[][];
  logps: number[][];
  finish: (FinishReason | null)[];
  nextPos: Int32Array; // (B) position of the next token: real prompt length + generated
}

/** Appends row b's sampled token and marks it finished at an EOS or at max_new_tokens. */
function record(r: Rows, o: GenerateOptions, b: number, token: number, logp: number): void {
  r.completion_ids[b].push(token);
  r.logps[b].push(logp);
  if (o.eos_token_ids.includes(token)) r.finish[b] = 'eos';
  else if (r.completion_ids[b].length === o.max_new_tokens) r.finish[b] = 'length';
}

/** The mask (B, P + t + 1) after step t: every row attends to its new token (HF appends 1s for all rows, finished included). */
function stepMask(r: Rows, t: number): Int32Array {
  const L = r.P + t + 1;
  const mask = new Int32Array(r.B * L); // (B, L)
  for (let b = 0; b < r.B; b++) {
    for (let i = 0; i < r.P; i++) mask[b * L + i] = r.promptMask[b * r.P + i];
    for (let i = r.P; i < L; i++) mask[b * L + i] = 1;
  }
  return mask;
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
  const r: Rows = { B, P, input_ids, promptMask, position_ids, states: [], completion_ids: [], logps: [], finish: new Array(B).fill(null), nextPos: new Int32Array(B) };
  for (let b = 0; b < B; b++) {
    r.completion_ids.push([]);
    r.logps.push([]);
    r.states.push({ prompt_ids: prompts[Math.floor(b / G)], completion_ids: r.completion_ids[b] });
    r.nextPos[b] = prompts[Math.floor(b / G)].length;
  }
  const reason = cpuReason(decoder, o, B);
  const t0 = performance.now();
  const run = reason === null ? await decodeOnGpu(decoder.device!, V, r, o) : await decodeOnCpu(decoder, V, r, o);
  const total = performance.now() - t0;
  const ntok = r.completion_ids.reduce((a, c) => a + c.length, 0);
  return {
    B,
    G,
    prompt_ids: prompts.map((p) => p.slice()),
    completion_ids: r.completion_ids,
    sampling_per_token_logps: r.logps,
    finish_reason: r.finish as FinishReason[],
    sampled_on: reason === null ? { device: 'gpu' } : { device: 'cpu', reason },
    timings: {
      prefill_ms: run.prefill_ms,
      decode_ms: total - run.prefill_ms,
      sampler_ms: run.sampler_ms,
      steps: run.steps,
      tokens: ntok,
      ms_per_step: total / run.steps,
      ms_per_token: total / Math.max(1, ntok),
    },
  };
}

interface Run {
  prefill_ms: number;
  sampler_ms: number;
  steps: number;
}

/** The reference loop: read back each step's logits (B, V) and sample the live rows in float64. */
async function decodeOnCpu(decoder: Decoder, V: number, r: Rows, o: GenerateOptions): Promise<Run> {
  const { B, P } = r;
  const t0 = performance.now();
  let logits = await decoder.prefill({ B, T: P, input_ids: r.input_ids, attention_mask: r.promptMask, position_ids: r.position_ids, max_len: P + o.max_new_tokens - 1 });
  const prefill_ms = performance.now() - t0;
  let sampler_ms = 0;
  let steps = 0;
  const tokens = new Int32Array(B);
  for (let t = 0; t < o.max_new_tokens; t++) {
    o.on_step?.(t, logits);
    const ts = performance.now();
    // Only live rows are processed (finished rows are fed pad_token_id, as HF does).
    const live: number[] = [];
    for (let b = 0; b < B; b++) if (!r.finish[b]) live.push(b);
    const liveLogits = new Float32Array(live.length * V); // (live, V)
    live.forEach((b, i) => liveLogits.set(logits.subarray(b * V, (b + 1) * V), i * V));
    const s = sample_step(liveLogits, live.map((b) => r.states[b]), o, o.seed, t, live);
    sampler_ms += performance.now() - ts;
    steps++;
    tokens.fill(o.pad_token_id);
    live.forEach((b, i) => {
      tokens[b] = s.tokens[i];
      record(r, o, b, s.tokens[i], s.logps[i]);
    });
    if (r.finish.every((f) => f)) break;
    logits = await decoder.step(tokens, r.nextPos.slice(), stepMask(r, t));
    for (let b = 0; b < B; b++) r.nextPos[b]++;
  }
  return { prefill_ms, sampler_ms, steps };
}

/**
 * The GPU loop: every step is one submit of the forward and sample_forward (the prefill's, streamed), which
 * writes the ids and log-probs into slot t of (max_new_tokens, B) buffers; the next step's forward copies
 * its tokens from that slot. Nothing waits between steps but the read-backs (READ_EVERY_MAX), and the loop
 * stops once every row has finished. Rows that finished keep being fed their own sampled
 * tokens instead of pad_token_id: rows never mix in the model, so live rows are unaffected, and what a
 * finished row draws is dropped. Every row draws with its own id, as the CPU loop's live subsets do.
 */
async function decodeOnGpu(dev: DecoderDevice, V: number, r: Rows, o: GenerateOptions): Promise<Run> {
  const { B, P } = r;
  const gpu = dev.gpu;
  const S = o.max_new_tokens;
  const greedy = !o.do_sample || o.temperature === 0;
  const params = { ...o, greedy };
  const ids = gpu.createBuffer('generate.ids', S * B * 4); // (S, B) i32
  const logps = gpu.createBuffer('generate.logps', S * B * 4); // (S, B) f32
  const eos = gpu.upload('generate.eos', Uint32Array.from(o.eos_token_ids.length ? o.eos_token_ids : [0]));
  let counts: GPUBuffer | null = null;
  if (usesCounts(params)) {
    // (B, V) tokens seen per row in the penalty scope; the sampler adds each token it draws.
    const h = new Uint32Array(B * V);
    if (o.penalty_scope === 'prompt+completion') r.states.forEach((st, b) => Array.from(st.prompt_ids).forEach((id) => h[b * V + id]++));
    counts = gpu.upload('generate.counts', h);
  }
  const placeholder = new Int32Array(B).fill(o.pad_token_id); // overwritten on the GPU by the sampled ids
  try {
    const t0 = performance.now();
    let rec = gpu.recorder('generate prefill', { stream: true });
    let logits = dev.recordPrefill(rec, { B, T: P, input_ids: r.input_ids, attention_mask: r.promptMask, position_ids: r.position_ids, max_len: P + S - 1 });
    let prefill_ms = 0;
    const submits: Promise<void>[] = [];
    let read = 0; // steps whose ids have been read back
    let every = 1; // steps per read-back (READ_EVERY_MAX)
    for (let t = 0; t < S; t++) {
      sample_forward(rec, { logits, counts, eos, n_eos: o.eos_token_ids.length, eos_masked: t < o.min_new_tokens, ids, logps, B, V, seed: o.seed, step: t, params });
      const submitted = rec.submit();
      submitted.catch(() => {}); // awaited below, with the others: no unhandled rejection meanwhile
      submits.push(submitted);
      if (t + 1 - read === every || t === S - 1) {
        await Promise.all(submits);
        const n = t + 1 - read;
        const [idBytes, lpBytes] = await gpu.readAll([{ buf: ids, byteSize: n * B * 4, byteOffset: read * B * 4 }, { buf: logps, byteSize: n * B * 4, byteOffset: read * B * 4 }]);
        const got = { ids: new Int32Array(idBytes), logps: new Float32Array(lpBytes) }; // (n, B)
        for (let k = 0; k < n; k++) {
          for (let b = 0; b < B; b++) {
            if (r.finish[b]) continue;
            const id = got.ids[k * B + b];
            if (id < 0) {
              throw new SamplingError(
                id === SAMPLE_BAD_LOGIT
                  ? `row ${b}, step ${read + k}: a logit is NaN or +inf`
                  : `row ${b}, step ${read + k}: every token has logit −inf after processing (min_new_tokens masks the only finite tokens?)`,
              );
            }
            record(r, o, b, id, got.logps[k * B + b]);
          }
        }
        if (read === 0) prefill_ms = performance.now() - t0; // the prefill and the first draw, read back (as on the CPU)
        read = t + 1;
        submits.length = 0;
        if (r.finish.every((f) => f)) return { prefill_ms, sampler_ms: 0, steps: read };
        every = r.finish.some((f) => f) ? 1 : Math.min(2 * every, READ_EVERY_MAX);
      }
      if (t === S - 1) break;
      rec = gpu.recorder('generate step');
      logits = dev.recordStep(rec, placeholder, r.nextPos.slice(), stepMask(r, t), { buffer: ids, offset: t * B * 4 });
      for (let b = 0; b < B; b++) r.nextPos[b]++;
    }
    return { prefill_ms, sampler_ms: 0, steps: read };
  } finally {
    for (const b of [ids, logps, eos, counts]) b?.destroy();
  }
}

/**
 * The KV-cache decoder over a CausalLM: the prefill writes the prompts' keys / values into a cache sized
 * for the whole generation, then each step runs the model on one token per row. Reusable: every
 * prefill starts a fresh cache; dispose() frees it.
 */
export function kvDecoder(model: CausalLM): Decoder {
  const gpu = model.gpu;
  let cache: KVCache | null = null;
  const device: DecoderDevice = {
    gpu,
    recordPrefill(rec, { max_len, ...x }) {
      cache?.destroy();
      cache = new KVCache(gpu, model.config, x.B, max_len);
      return model.forward(rec, x, { kvCache: cache }).logits;
    },
    recordStep(rec, tokens, position_ids, attention_mask, idsFrom) {
      if (!cache) throw new Error('kvDecoder: step before prefill');
      const B = tokens.length;
      const L = attention_mask.length / B;
      const mask = new Int32Array(B); // (B, 1) the new column
      for (let b = 0; b < B; b++) mask[b] = attention_mask[b * L + L - 1];
      return model.forward(rec, { B, T: 1, input_ids: tokens, attention_mask: mask, position_ids }, { kvCache: cache, idsFrom }).logits;
    },
  };
  const read = async (rec: Recorder, logits: GPUBuffer, B: number): Promise<Float32Array> => {
    await rec.submit();
    return gpu.readF32(logits, B * model.config.vocab_size); // (B, V)
  };
  return {
    vocab_size: model.config.vocab_size,
    max_positions: model.config.rope_theta === null ? model.config.max_position_embeddings : undefined,
    device,
    prefill(x) {
      const rec = gpu.recorder('generate');
      return read(rec, device.recordPrefill(rec, x), x.B);
    },
    step(tokens, position_ids, attention_mask) {
      const rec = gpu.recorder('generate');
      return read(rec, device.recordStep(rec, tokens, position_ids, attention_mask), tokens.length);
    },
    dispose() {
      cache?.destroy();
      cache = null;
    },
  };
}
