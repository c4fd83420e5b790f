// Batches with a planted sampler–trainer mismatch, for the mismatch explorer's tests (CLI, page, report).
// Each position draws random logits z over a 60-token vocabulary (ids 4…63, so every tokenizer of ours can
// decode them); pad and EOS are the embedded tiny-adder's (<|endoftext|> 302, <|im_end|> 304, which never
// occurs: rows are truncated), so its tokenizer fits the batch. The trainer's log-prob is log softmax(z)[x]
// and the sampler's is what a broken setup would return for the same token:
//   clean        the same distribution, plus float noise (|Δ| ≈ 0.003, far below the 0.05 tolerance)
//   top_p        planted rows: a nucleus sampler with top_p ∈ [0.5, 0.8] per row — tokens drawn from the
//                kept set and scored log p − log S_t, S_t the mass it kept at that step
//   temperature  every row: tokens drawn from and scored by softmax(z / 0.7) on the sampler side only
//   off_by_one   planted rows: the sampler's value at t is the trainer's at t + 1 (a hook one position late)
//   divergence   two-turn rows (turn, tool response with tool_mask 0, turn); on planted rows the sampler's
//                logits differ from turn 2 on (z + N(0, 1.5²)), tokens drawn from the sampler
//   stale        every row: the sampler's logits are z + N(0, 0.8²) (other weights), tokens drawn from it
// Tokens are always drawn from the sampler's distribution, as in a real rollout. Nothing here calls the
// analysis: the planted rows are known by construction.
import type { DiagnosisId } from '../../src/grpo/mismatch/types.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { Rng } from '../../src/model/rng.ts';

export type Planted = 'clean' | 'top_p' | 'temperature' | 'off_by_one' | 'divergence' | 'stale';
export const PLANTED: readonly Planted[] = ['clean', 'top_p', 'temperature', 'off_by_one', 'divergence', 'stale'];
/** The diagnosis each planted pattern must get, on exactly its planted rows (clean: none). */
export const DIAGNOSIS_OF: Record<Exclude<Planted, 'clean'>, DiagnosisId> = {
  top_p: 'sampler-renormalised',
  temperature: 'temperature-one-side',
  off_by_one: 'off-by-one',
  divergence: 'divergence',
  stale: 'stale-policy',
};

const V = 60;
const FIRST_ID = 4;
const G = 4;
const NOISE = 0.003;
const PAD = 302;
const EOS = 304;

function logSoftmax(z: Float64Array): Float64Array {
  let m = -Infinity;
  for (const v of z) m = Math.max(m, v);
  let s = 0;
  for (const v of z) s += Math.exp(v - m);
  const lse = m + Math.log(s);
  return z.map((v) => v - lse);
}

function draw(logp: Float64Array, rng: Rng): number {
  let u = rng.next();
  for (let k = 0; k < logp.length; k++) {
    u -= Math.exp(logp[k]);
    if (u <= 0) return k;
  }
  return logp.length - 1;
}

/** Renormalised over the smallest most-likely set whose mass reaches p (−inf outside it). */
function nucleus(lt: Float64Array, p: number): Float64Array {
  return kept(lt, (_, mass) => mass < p);
}

/** Log-probs renormalised over the most likely tokens while `keep(rank, mass so far)` holds. */
function kept(lt: Float64Array, keep: (rank: number, mass: number) => boolean): Float64Array {
  const order = [...lt.keys()].sort((a, b) => lt[b] - lt[a]);
  const set = new Set<number>();
  let mass = 0;
  for (const [rank, k] of order.entries()) {
    if (!keep(rank, mass)) break;
    set.add(k);
    mass += Math.exp(lt[k]);
  }
  return lt.map((v, k) => (set.has(k) ? v - Math.log(mass) : -Infinity));
}

const logits = (rng: Rng, scale = 2) => Float64Array.from({ length: V }, () => rng.normal() * scale);

export function plantedBatch(pattern: Planted, opts: { seed?: number; B?: number; C?: number } = {}): { batch: GrpoBatch; planted: number[] } {
  const rng = new Rng(opts.seed ?? 7);
  const B = opts.B ?? 16;
  const Cmax = opts.C ?? 48;
  if (B % G !== 0) throw new Error(`plantedBatch: B = ${B} is not a multiple of num_generations = ${G}`);
  const every = pattern === 'off_by_one' ? 4 : 3;
  const planted = pattern === 'clean' ? [] : pattern === 'temperature' || pattern === 'stale' ? Array.from({ length: B }, (_, b) => b) : Array.from({ length: B }, (_, b) => b).filter((b) => b % every === 1);
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: G,
    pad_token_id: PAD,
    eos_token_ids: [EOS],
    prompt_ids: [],
    completion_ids: [],
    completion_mask: [],
    old_per_token_logps: [],
    sampling_per_token_logps: [],
    rewards: [],
    advantages: [],
    ...(pattern === 'divergence' ? { tool_mask: [] } : {}),
  };
  for (let b = 0; b < B; b++) {
    const on = planted.includes(b);
    const C = Cmax - rng.int(0, Math.floor(Cmax / 3));
    // divergence: turn 1 | tool response | turn 2
    const turn1 = Math.floor(C * 0.4);
    const toolLen = 6;
    const ids: number[] = [];
    const old: number[] = [];
    const samp: number[] = [];
    const tool: number[] = [];
    const topP = pattern === 'top_p' && on ? 0.5 + 0.3 * rng.next() : 1;
    // One more position than the row holds, for the off-by-one row's last value.
    for (let t = 0; t <= C; t++) {
      const z = logits(rng);
      const lt = logSoftmax(z);
      const isTool = pattern === 'divergence' && t >= turn1 && t < turn1 + toolLen;
      let ls = lt;
      if (topP < 1) ls = nucleus(lt, topP);
      else if (pattern === 'temperature') ls = logSoftmax(z.map((v) => v / 0.7));
      else if (pattern === 'stale') ls = logSoftmax(z.map((v) => v + rng.normal() * 0.8));
      else if (pattern === 'divergence' && on && t >= turn1 + toolLen) ls = logSoftmax(z.map((v) => v + rng.normal() * 1.5));
      const x = draw(ls, rng);
      ids.push(FIRST_ID + x);
      old.push(lt[x]);
      // TRL writes 0 as the sampling log-prob of tool output (it was not sampled).
      samp.push(isTool ? 0 : ls[x] + rng.normal() * NOISE);
      tool.push(isTool ? 0 : 1);
    }
    if (pattern === 'off_by_one' && on) for (let t = 0; t < C; t++) samp[t] = old[t + 1] + rng.normal() * NOISE;
    batch.prompt_ids.push(Array.from({ length: 5 }, () => FIRST_ID + rng.int(0, V - 1)));
    batch.completion_ids.push(ids.slice(0, C));
    batch.completion_mask.push(new Array<number>(C).fill(1));
    batch.old_per_token_logps!.push(old.slice(0, C));
    batch.sampling_per_token_logps!.push(samp.slice(0, C));
    batch.tool_mask?.push(tool.slice(0, C));
    batch.rewards!.push(rng.next() < 0.5 ? 1 : 0);
  }
  // Group-normalised advantages (TRL's estimator: (r − mean) / (std + 1e-4), std unbiased).
  for (let g = 0; g < B / G; g++) {
    const r = batch.rewards!.slice(g * G, g * G + G);
    const mean = r.reduce((a, v) => a + v, 0) / G;
    const std = Math.sqrt(r.reduce((a, v) => a + (v - mean) ** 2, 0) / (G - 1));
    for (const v of r) batch.advantages!.push((v - mean) / (std + 1e-4));
  }
  return { batch, planted };
}

/**
 * A sampler that really does what a broken setup does, on every row: `nucleus` renormalises over the top-p
 * set (p = param), `top_k` over the K = param most likely tokens, `tempered` divides the logits by
 * τ = param, `weights` adds N(0, param²) to them (other weights). `scale` is the logits' spread: 1 flat,
 * 4 sharp. The sampler returns log-probs of the distribution it sampled from, as vLLM's processed log-probs.
 */
export function realisticBatch(kind: 'nucleus' | 'top_k' | 'tempered' | 'weights', param: number, opts: { seed?: number; scale?: number; B?: number; C?: number } = {}): GrpoBatch {
  const rng = new Rng(opts.seed ?? 3);
  const [B, C] = [opts.B ?? 16, opts.C ?? 40];
  const batch: GrpoBatch = { format: 'grpo-batch/v1', num_generations: G, pad_token_id: PAD, eos_token_ids: [EOS], prompt_ids: [], completion_ids: [], completion_mask: [], old_per_token_logps: [], sampling_per_token_logps: [] };
  for (let b = 0; b < B; b++) {
    const [ids, old, samp] = [[] as number[], [] as number[], [] as number[]];
    for (let t = 0; t < C; t++) {
      const z = logits(rng, opts.scale ?? 2);
      const lt = logSoftmax(z);
      const ls =
        kind === 'nucleus' ? nucleus(lt, param)
        : kind === 'top_k' ? kept(lt, (rank) => rank < param)
        : kind === 'tempered' ? logSoftmax(z.map((v) => v / param))
        : logSoftmax(z.map((v) => v + rng.normal() * param));
      const x = draw(ls, rng);
      [ids.push(FIRST_ID + x), old.push(lt[x]), samp.push(ls[x])];
    }
    batch.prompt_ids.push([FIRST_ID]);
    batch.completion_ids.push(ids);
    batch.completion_mask.push(ids.map(() => 1));
    batch.old_per_token_logps!.push(old);
    batch.sampling_per_token_logps!.push(samp);
  }
  return batch;
}
