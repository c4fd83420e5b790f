// The sampler: pure logits processing and a counter-based RNG, so every sampled token can be replayed
// and its log-prob compared with what the trainer later computes (old_per_token_logps).
//
// `process_logits` turns one decode step's last-position logits (B, V) into the distribution each row
// is actually sampled from, in float64, in the order Hugging Face `generate` / vLLM apply them:
//   repetition penalty → presence / frequency penalties → min_new_tokens (EOS → −inf)
//   → temperature → top-k → top-p → min-p (HF's warper order; transformers generation/utils.py
//   _get_logits_processor appends MinPLogitsWarper after TopPLogitsWarper).
// Penalties count tokens within an explicit scope: 'completion' (the default, what the fixed trainer in
// seed 002 does) or 'prompt+completion' (what HF's RepetitionPenaltyLogitsProcessor does, and what
// caused seed 002's collapse: prompt words are penalised, EOS never is, so EOS gets relatively boosted).
// Greedy decoding (temperature 0 or do_sample false) skips the warpers (temperature, top-k, top-p, min-p) as
// HF does; its recorded log-prob is then the log-softmax of the penalised logits at temperature 1.
// This float64 sampler is the reference of the GPU one (shaders/sample_forward.wgsl, src/kernels/sample.ts),
// which generate() runs when it can: same settings, same RNG stream, same tie rules.

export type PenaltyScope = 'completion' | 'prompt+completion';

export interface SamplingSettings {
  do_sample: boolean;
  /** 0 means greedy. */
  temperature: number;
  /** 0 disables. Tokens tied with the k-th largest logit are kept (HF: `scores < kth` are removed). */
  top_k: number;
  /** 1 disables. Keeps the smallest set of most likely tokens whose probability sums to ≥ top_p. */
  top_p: number;
  /** 0 disables. HF MinPLogitsWarper: tokens with probability < min_p · (the top token's) are removed. */
  min_p: number;
  /** 1 disables. HF: a seen token's logit is divided by it if positive, multiplied if negative. */
  repetition_penalty: number;
  /** OpenAI / vLLM: logit −= presence_penalty if the token was seen. */
  presence_penalty: number;
  /** OpenAI / vLLM: logit −= frequency_penalty · (times the token was seen). */
  frequency_penalty: number;
  penalty_scope: PenaltyScope;
  /** EOS logits are −inf while fewer than this many tokens have been generated. */
  min_new_tokens: number;
  eos_token_ids: number[];
}

export const DEFAULT_SAMPLING: SamplingSettings = {
  do_sample: true,
  temperature: 1,
  top_k: 0,
  top_p: 1,
  min_p: 0,
  repetition_penalty: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  penalty_scope: 'completion',
  min_new_tokens: 0,
  eos_token_ids: [],
};

/** What one row has seen so far: its real prompt tokens (no padding) and its completion. */
export interface RowState {
  prompt_ids: ArrayLike<number>;
  completion_ids: ArrayLike<number>;
}

export class SamplingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SamplingError';
  }
}

function isGreedy(s: SamplingSettings): boolean {
  return !s.do_sample || s.temperature === 0;
}

/** Throws a SamplingError naming the first invalid field (against vocabulary size V when given). */
export function validateSampling(s: SamplingSettings, V?: number): void {
  const bad = (field: string, why: string): never => {
    throw new SamplingError(`sampling setting ${field} = ${JSON.stringify((s as unknown as Record<string, unknown>)[field])}: ${why}`);
  };
  if (!(s.temperature >= 0) || !Number.isFinite(s.temperature)) bad('temperature', 'must be a finite number ≥ 0');
  if (!Number.isInteger(s.top_k) || s.top_k < 0) bad('top_k', 'must be an integer ≥ 0 (0 disables)');
  if (!(s.top_p > 0 && s.top_p <= 1)) bad('top_p', 'must be in (0, 1] (1 disables)');
  if (!(s.min_p >= 0 && s.min_p <= 1)) bad('min_p', 'must be in [0, 1] (0 disables)');
  if (!(s.repetition_penalty > 0) || !Number.isFinite(s.repetition_penalty)) bad('repetition_penalty', 'must be a finite number > 0 (1 disables)');
  if (!Number.isFinite(s.presence_penalty)) bad('presence_penalty', 'must be finite');
  if (!Number.isFinite(s.frequency_penalty)) bad('frequency_penalty', 'must be finite');
  if (s.penalty_scope !== 'completion' && s.penalty_scope !== 'prompt+completion') bad('penalty_scope', "must be 'completion' or 'prompt+completion'");
  if (!Number.isInteger(s.min_new_tokens) || s.min_new_tokens < 0) bad('min_new_tokens', 'must be an integer ≥ 0');
  for (const id of s.eos_token_ids) {
    if (!Number.isInteger(id) || id < 0 || (V !== undefined && id >= V)) bad('eos_token_ids', `id ${id} is not a token of a ${V ?? '?'}-token vocabulary`);
  }
}

/** The processed distributions of a step: (B, V) float64 log-probs (−inf where removed) and probs. */
export interface Processed {
  logprobs: Float64Array; // (B, V)
  probs: Float64Array; // (B, V)
}

/**
 * Applies penalties, min_new_tokens, temperature, top-k and top-p to last-position logits (B, V) and
 * returns each row's normalised distribution. Pure: depends only on its arguments.
 */
export function process_logits(logits: ArrayLike<number>, states: RowState[], s: SamplingSettings): Processed {
  const B = states.length;
  if (B === 0 || logits.length % B !== 0) throw new SamplingError(`logits has ${logits.length} values, not a multiple of ${B} rows`);
  const V = logits.length / B;
  validateSampling(s, V);
  const greedy = isGreedy(s);
  const logprobs = new Float64Array(B * V);
  const probs = new Float64Array(B * V);
  const z = new Float64Array(V); // (V) one row's working scores
  for (let b = 0; b < B; b++) {
    for (let v = 0; v < V; v++) {
      const x = logits[b * V + v];
      if (Number.isNaN(x) || x === Infinity) throw new SamplingError(`row ${b}: logit of token ${v} is ${x}`);
      z[v] = x;
    }
    applyPenalties(z, states[b], s, b);
    if (states[b].completion_ids.length < s.min_new_tokens) for (const e of s.eos_token_ids) z[e] = -Infinity;
    if (!greedy) {
      if (s.temperature !== 1) for (let v = 0; v < V; v++) z[v] /= s.temperature;
      if (s.top_k > 0 && s.top_k < V) topK(z, s.top_k);
      if (s.top_p < 1) topP(z, s.top_p);
      if (s.min_p > 0) minP(z, s.min_p);
    }
    logSoftmaxInto(z, logprobs.subarray(b * V, (b + 1) * V), b);
    for (let v = 0; v < V; v++) probs[b * V + v] = Math.exp(logprobs[b * V + v]);
  }
  return { logprobs, probs };
}

function applyPenalties(z: Float64Array, st: RowState, s: SamplingSettings, b: number): void {
  if (s.repetition_penalty === 1 && s.presence_penalty === 0 && s.frequency_penalty === 0) return;
  const V = z.length;
  const counts = new Map<number, number>();
  const count = (ids: ArrayLike<number>, what: string) => {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id >= V) throw new SamplingError(`row ${b}: ${what}[${i}] = ${id} is not a token of a ${V}-token vocabulary`);
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  };
  if (s.penalty_scope === 'prompt+completion') count(st.prompt_ids, 'prompt_ids');
  count(st.completion_ids, 'completion_ids');
  for (const [id, c] of counts) {
    let x = z[id];
    if (s.repetition_penalty !== 1) x = x < 0 ? x * s.repetition_penalty : x / s.repetition_penalty;
    z[id] = x - s.frequency_penalty * c - s.presence_penalty;
  }
}

/** HF TopKLogitsWarper: removes scores strictly below the k-th largest (ties with it survive). */
function topK(z: Float64Array, k: number): void {
  const kth = kthLargest(Float64Array.from(z), k);
  for (let v = 0; v < z.length; v++) if (z[v] < kth) z[v] = -Infinity;
}

/** The k-th largest value (1-based) by quickselect, average O(n): `a` is reordered. */
function kthLargest(a: Float64Array, k: number): number {
  const target = a.length - k; // index of the k-th largest in ascending order
  let lo = 0;
  let hi = a.length - 1;
  while (lo < hi) {
    const pivot = a[(lo + hi) >>> 1];
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        const t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (target <= j) hi = j;
    else if (target >= i) lo = i;
    else return a[target];
  }
  return a[target];
}

/**
 * HF TopPLogitsWarper: walking tokens from most to least likely (ties: lower id first), keep each token
 * while the probability mass before it is < top_p; the token that reaches top_p is kept, so at least
 * one token always survives. Only tokens with p ≥ (1 − top_p) / V are sorted: a token below that can
 * never be reached, since everything at or below it holds less than 1 − top_p of the mass.
 */
function topP(z: Float64Array, topP: number): void {
  const V = z.length;
  let max = -Infinity;
  for (let v = 0; v < V; v++) if (z[v] > max) max = z[v];
  if (max === -Infinity) return; // nothing left to truncate (logSoftmaxInto reports it)
  let total = 0;
  for (let v = 0; v < V; v++) total += Math.exp(z[v] - max);
  const floor = max + Math.log(total) + Math.log((1 - topP) / V); // log of the smallest reachable weight
  const cand: number[] = [];
  for (let v = 0; v < V; v++) if (z[v] >= floor) cand.push(z[v]);
  const sorted = Float64Array.from(cand).sort(); // ascending: walk from the end
  let before = 0;
  let i = sorted.length - 1;
  for (; i > 0; i--) {
    before += Math.exp(sorted[i] - max) / total;
    if (before >= topP) break;
  }
  // Keep everything above the last kept value, and as many tokens equal to it as the walk took (lowest ids).
  const cut = sorted[i];
  let ties = 0;
  for (let j = i; j < sorted.length && sorted[j] === cut; j++) ties++;
  for (let v = 0; v < V; v++) {
    if (z[v] > cut) continue;
    if (z[v] === cut && ties > 0) ties--;
    else z[v] = -Infinity;
  }
}

/** HF MinPLogitsWarper: removes tokens whose probability is below min_p times the most likely one's. */
function minP(z: Float64Array, minP: number): void {
  let max = -Infinity;
  for (let v = 0; v < z.length; v++) if (z[v] > max) max = z[v];
  for (let v = 0; v < z.length; v++) if (Math.exp(z[v] - max) < minP) z[v] = -Infinity;
}

function logSoftmaxInto(z: Float64Array, out: Float64Array, b: number): void {
  let max = -Infinity;
  for (let v = 0; v < z.length; v++) if (z[v] > max) max = z[v];
  if (max === -Infinity) throw new SamplingError(`row ${b}: every token has logit −inf after processing (min_new_tokens masks the only finite tokens?)`);
  let sum = 0;
  for (let v = 0; v < z.length; v++) sum += Math.exp(z[v] - max);
  const lse = max + Math.log(sum);
  for (let v = 0; v < z.length; v++) out[v] = z[v] - lse;
}

// ---------------------------------------------------------------- RNG

/** lowbias32 (C. Wellons): a 32-bit integer hash with full avalanche. */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/**
 * Counter-based uniform in [0, 1) with 53 random bits: a pure function of (seed, row, step), so any
 * step of any row can be replayed without re-running the ones before it, and a row's draws do not
 * depend on how many other rows are in the batch. `seed` may be any integer up to 2^53.
 */
export function uniform(seed: number, row: number, step: number): number {
  const lo = seed >>> 0;
  const hi = Math.floor(seed / 4294967296) >>> 0;
  let k = mix32(lo ^ mix32(hi + 0x9e3779b9));
  k = mix32(k ^ mix32(row + 0x85ebca6b));
  k = mix32(k ^ mix32(step + 0xc2b2ae35));
  const a = mix32(k ^ 0x68e31da4) >>> 5; // 27 bits
  const c = mix32(k ^ 0x1b56c4e9) >>> 6; // 26 bits
  return (a * 67108864 + c) / 9007199254740992;
}

/**
 * Picks row b's token: argmax (lowest id on ties) when greedy, otherwise the inverse CDF at `u` over
 * the processed probabilities (never a token of probability 0).
 */
export function choose(p: Processed, b: number, V: number, greedy: boolean, u: number): number {
  const probs = p.probs.subarray(b * V, (b + 1) * V);
  if (greedy) {
    let best = 0;
    for (let v = 1; v < V; v++) if (p.logprobs[b * V + v] > p.logprobs[b * V + best]) best = v;
    return best;
  }
  let total = 0;
  for (let v = 0; v < V; v++) total += probs[v];
  const target = u * total;
  let acc = 0;
  let last = -1;
  for (let v = 0; v < V; v++) {
    if (probs[v] === 0) continue;
    acc += probs[v];
    last = v;
    if (acc > target) return v;
  }
  return last; // rounding left target ≥ the whole sum: the last token with mass
}

/**
 * One decode step: the chosen tokens and their log-probs under the processed distribution. `rows`
 * gives each state's row id for the RNG (default 0…B−1), so a subset of live rows draws what it
 * would have drawn in the full batch.
 */
export function sample_step(
  logits: ArrayLike<number>, // (B, V) last-position logits
  states: RowState[],
  s: SamplingSettings,
  seed: number,
  step: number,
  rows?: ArrayLike<number>, // (B)
): { tokens: Int32Array; logps: Float64Array } {
  const B = states.length;
  const V = logits.length / B;
  const p = process_logits(logits, states, s);
  const greedy = isGreedy(s);
  const tokens = new Int32Array(B);
  const logps = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    tokens[b] = choose(p, b, V, greedy, greedy ? 0 : uniform(seed, rows ? rows[b] : b, step));
    logps[b] = p.logprobs[b * V + tokens[b]];
  }
  return { tokens, logps };
}
