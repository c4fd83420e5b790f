// The passes verl's and OpenRLHF's objectives share: log-probs and entropy of the case's logits
// (logprob_gather_forward), then — once the trainer module has turned the read-back log-probs into its
// decisions (masks, importance weights, covariance selections, aggregation weights) — the fused per-token
// objective (ppo_loss_forward) and the gradient to the logits (logprob_gather_backward with ∂loss/∂entropy),
// on the GPU (withGpuBackend) or, in the tests, on the float64 twins of the same kernels.
// The decisions are read-back float32 log-probs compared with thresholds (every golden case keeps them
// ≥ 1e-3 away), so taking them on the CPU changes no number; each is a per-token input of the kernel.
import type { Gpu } from '../../gpu/context.ts';
import { SubmitGroup, type Seat } from '../../gpu/submit_group.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../kernels/logprob_gather.ts';
import { ppo_loss_forward } from '../../kernels/ppo_loss.ts';
import { CLIP_HIGH, CLIP_LOW, PPO_INPUTS, type PpoLossParams } from '../../kernels/types.ts';
import { SettingsError } from '../settings/types.ts';
import { checkScored, fieldOf, type ScoredLogps, type TrainerInputs, type TrainerLossCase, type TrainerLossOutputs } from './types.ts';

/** What the trainer module decides from the current log-probs and entropies ((B, T)). */
export interface PpoPlan {
  params: PpoLossParams;
  inputs: Float32Array; // (B, T, 8) in PPO_INPUTS order
}

type Floats = Float32Array | Float64Array;

/**
 * Where the numbers are computed: the GPU kernels (gpuBackend), or their float64 twins in the tests. The
 * trainer modules only decide; they never compute a per-token term themselves.
 */
export interface PpoBackend {
  /** Log-probs at `temperature` (0 where completion_mask = 0) and entropies at `entropyTemperature`, (B, T). */
  logprobs(temperature: number, entropyTemperature: number): Promise<{ logp: Floats; entropy: Floats }>;
  /** ppo_loss_forward on the last log-probs; with `backward`, dlogits through logprob_gather_backward. */
  objective(plan: PpoPlan, backward: boolean): Promise<{ out: { loss: Floats; kl: Floats; contrib: Floats; ratio?: Floats }; dlogits: Floats | null; grad?: PerTokenGrad | null }>;
}

/** ∂loss/∂per_token_logps and ∂loss/∂per_token_entropy, (B, T): what the gather backward turns into dlogits. */
export interface PerTokenGrad {
  dlogp: Floats;
  dentropy: Floats;
}

export interface PpoRun {
  logp: Floats; // (B, T), 0 where completion_mask = 0
  entropy: Floats; // (B, T)
  loss: Floats; // (B, T) policy term
  kl: Floats; // (B, T)
  /** The ratio the policy term used per token (the kernel's: token, sequence or GMPO ratio); null where the backend gives none. */
  ratio: Floats | null;
  /** The plan the objective ran (its aggregation weights and parameters: ppoOutputs' token weights and clip flags). */
  plan: PpoPlan;
  value: number; // the loss: Σ of the per-token shares, summed in float64
  dlogits: Floats | null; // (B, T, V)
  grad: PerTokenGrad | null; // read back by the scored backend only
}

/** The two passes of an objective: log-probs, the trainer's decisions on them (`plan`), the objective. */
export async function runPpo(
  be: PpoBackend,
  o: { temperature: number; entropyTemperature: number; backward: boolean; plan: (logp: Floats, entropy: Floats) => PpoPlan },
): Promise<PpoRun> {
  const { logp, entropy } = await be.logprobs(o.temperature, o.entropyTemperature);
  const plan = o.plan(logp, entropy);
  if (plan.inputs.length !== PPO_INPUTS.length * logp.length) throw new Error(`ppo inputs: expected ${PPO_INPUTS.length * logp.length} floats, got ${plan.inputs.length}`);
  const { out, dlogits, grad } = await be.objective(plan, o.backward);
  let value = 0;
  for (const v of out.contrib) value += v;
  return { logp, entropy, loss: out.loss, kl: out.kl, ratio: out.ratio ?? null, plan, value, dlogits, grad: grad ?? null };
}

/**
 * What a PPO-family trainer reports of a run: the terms it forms (null where it forms none) and the run's loss and
 * gradients, with the aggregation the kernel applied (ppo_loss_forward: contrib = w_pg·L + kl_coef·w_aux·KL −
 * ent_coef·w_aux·H): token_weight = ∂loss/∂L (w_pg; geo_mean's row value counts once, at t = 0), kl_weight =
 * ∂loss/∂KL (kl_coef·w_aux) where the KL is in the loss, the kernel's ratio and the clip flags it took.
 */
export function ppoOutputs(r: PpoRun, shown: { T: number; entropy: boolean; kl: boolean; loss: boolean; importance_sampling_ratio: Floats | null; loss_mask: Floats }): TrainerLossOutputs {
  const { params, inputs } = r.plan;
  const K = PPO_INPUTS.length;
  const N = r.logp.length;
  const col = (name: (typeof PPO_INPUTS)[number]) => PPO_INPUTS.indexOf(name);
  const [iW, iA, iM] = [col('w_pg'), col('advantages'), col('mask')];
  const rowStart = params.mode === 'geo_mean' ? Uint8Array.from({ length: N }, (_, i) => (i % shown.T === 0 ? 1 : 0)) : null;
  const token_weight = Float64Array.from({ length: N }, (_, i) => (rowStart && !rowStart[i] ? 0 : inputs[K * i + iW]));
  const kl_weight = shown.kl && params.kl_coef !== 0 ? Float64Array.from({ length: N }, (_, i) => params.kl_coef * inputs[K * i + col('w_aux')]) : null;
  const clip = r.ratio ? ppoClipFlags(r.ratio, (i) => inputs[K * i + iA], (i) => inputs[K * i + iM], params) : null;
  return {
    per_token_logps: r.logp,
    per_token_entropy: shown.entropy ? r.entropy : null,
    per_token_kl: shown.kl ? r.kl : null,
    importance_sampling_ratio: shown.importance_sampling_ratio,
    per_token_loss: shown.loss ? r.loss : null,
    loss_mask: shown.loss_mask,
    entropy_mask: null,
    off_policy_mask: null,
    loss: r.value,
    dlogits: r.dlogits,
    dlogp: r.grad?.dlogp ?? null,
    dentropy: r.grad?.dentropy ?? null,
    token_weight,
    kl_weight,
    per_token_loss_includes_kl: false,
    policy_ratio: r.ratio,
    clip,
  };
}

/**
 * The clip flags of a PPO-family policy term (CLIP_LOW | CLIP_HIGH, as the studio loss's): a masked token whose
 * ratio left [1 − ε_low, 1 + ε_high] on the side the clip binds (A < 0 below, A > 0 above), for the policy modes
 * that clip the ratio (clip, gspo_token, gspo_seq, cispo's weight); 0 for the others (pg, sapo, kl_cov, geo_mean).
 */
function ppoClipFlags(ratio: Floats, A: (i: number) => number, M: (i: number) => number, p: PpoLossParams): Uint32Array {
  const clips = p.mode === 'clip' || p.mode === 'gspo_token' || p.mode === 'gspo_seq' || p.mode === 'cispo';
  return Uint32Array.from({ length: ratio.length }, (_, i) => {
    if (!clips || M(i) === 0) return 0;
    const a = A(i);
    return (ratio[i] < 1 - p.eps_low && a < 0 ? CLIP_LOW : 0) | (ratio[i] > 1 + p.eps_high && a > 0 ? CLIP_HIGH : 0);
  });
}

/** Runs `f` with a GPU backend for case `c`; its buffers are freed afterwards. */
export async function withGpuBackend<R>(gpu: Gpu, c: TrainerLossCase, f: (be: PpoBackend) => Promise<R>): Promise<R> {
  const { B, T, V } = c;
  const N = B * T;
  const bufs: GPUBuffer[] = [];
  const keep = (b: GPUBuffer): GPUBuffer => (bufs.push(b), b);
  const buf = (label: string, bytes: number): GPUBuffer => keep(gpu.createBuffer(label, Math.max(16, bytes)));
  try {
    const rows = { logits: keep(gpu.upload('logits', c.logits)), ids: keep(gpu.upload('completion_ids', c.completion_ids)), mask: keep(gpu.upload('completion_mask', c.completion_mask)), N, V };
    const logp = buf('logp', 4 * N);
    const lse = buf('lse', 8 * N);
    const entropy = buf('entropy', 4 * N);
    let shown = entropy;
    let temperature = 1;
    const be: PpoBackend = {
      async logprobs(t, entropyT) {
        temperature = t;
        const rec = gpu.recorder('trainer logprobs');
        logprob_gather_forward(rec, { ...rows, temperature: t, logp, lse, entropy });
        // OpenRLHF takes the entropy of the untempered logits: a second pass for its entropy only.
        shown = entropyT === t ? entropy : buf('entropy_raw', 4 * N);
        if (shown !== entropy) logprob_gather_forward(rec, { ...rows, temperature: entropyT, logp: buf('logp_raw', 4 * N), lse: buf('lse_raw', 8 * N), entropy: shown });
        await rec.finish();
        return { logp: await gpu.readF32(logp, N), entropy: await gpu.readF32(shown, N) };
      },
      async objective(plan, backward) {
        const out = buf('ppo_out', 16 * N);
        const dlogp = buf('dlogp', 4 * N);
        const dentropy = buf('dentropy', 4 * N);
        const dlogits = backward ? buf('dlogits', 4 * N * V) : null;
        const inputs = keep(gpu.upload('ppo_inputs', plan.inputs));
        const seat = SubmitGroup.single(gpu, 'trainer objective');
        ppo_loss_forward(seat.recorder, { logp, entropy: shown, inputs, out, dlogp, dentropy, B, T, params: plan.params });
        if (dlogits) {
          const withEntropy = plan.params.ent_coef !== 0 ? { dentropy, entropy } : null;
          logprob_gather_backward(seat.recorder, { ...rows, temperature, lse, dlogp, dlogits, dentropy: withEntropy });
        }
        const [res, dl] = await seat.read([{ buf: out, byteSize: 16 * N }, ...(dlogits ? [{ buf: dlogits, byteSize: 4 * N * V }] : [])]);
        return { out: splitOut(new Float32Array(res)), dlogits: dlogits ? new Float32Array(dl) : null };
      },
    };
    return await f(be);
  } finally {
    for (const b of bufs) gpu.retire(b); // a seat's shared submit may still bind them (trl.ts)
  }
}

/**
 * A backend over log-probs the step's forward already scored (ScoredLogps): the same objective kernel, no
 * gather and no dlogits; the kernel's ∂loss/∂logp and ∂loss/∂entropy are read back instead (the per-token
 * gradient the trainer would take, shown by the page). `field` names the trainer's temperature setting,
 * which must be the forward's. With `seat` the objective joins a shared submit and readback (the loss table).
 */
export async function withScoredBackend<R>(gpu: Gpu, c: TrainerInputs, scored: ScoredLogps, field: string, f: (be: PpoBackend) => Promise<R>, seat?: Seat): Promise<R> {
  const { B, T } = c;
  const N = B * T;
  const bufs: GPUBuffer[] = [];
  const keep = (b: GPUBuffer): GPUBuffer => (bufs.push(b), b);
  // Both trainers multiply their log-probs by the response mask: 0 on padding, as the gather writes them.
  const logpHost = new Float32Array(N);
  for (let i = 0; i < N; i++) logpHost[i] = c.completion_mask[i] ? scored.per_token_logps[i] : 0;
  try {
    const logp = keep(gpu.upload('logp', logpHost));
    const entropy = keep(gpu.upload('entropy', scored.per_token_entropy));
    const be: PpoBackend = {
      async logprobs(t, entropyT) {
        checkScored(scored, N, t, field);
        if (entropyT !== t) throw new SettingsError(`${field}: the trainer takes its entropy at temperature ${entropyT} and its log-probs at ${t}; the forward scored both at ${t}`);
        return { logp: logpHost, entropy: scored.per_token_entropy };
      },
      async objective(plan, backward) {
        if (backward) throw new Error('a scored backend has no backward');
        const out = keep(gpu.createBuffer('ppo_out', 16 * N));
        const scratch = { dlogp: keep(gpu.createBuffer('dlogp', 4 * N)), dentropy: keep(gpu.createBuffer('dentropy', 4 * N)) };
        const inputs = keep(gpu.upload('ppo_inputs', plan.inputs));
        const s = seat ?? SubmitGroup.single(gpu, 'trainer objective (scored)'); // after the allocations (see trl.ts)
        ppo_loss_forward(s.recorder, { logp, entropy, inputs, out, ...scratch, B, T, params: plan.params });
        const [res, dlogp, dentropy] = (await s.read([{ buf: out, byteSize: 16 * N }, { buf: scratch.dlogp, byteSize: 4 * N }, { buf: scratch.dentropy, byteSize: 4 * N }])).map((b) => new Float32Array(b));
        return { out: splitOut(res), dlogits: null, grad: { dlogp, dentropy } };
      },
    };
    return await f(be);
  } finally {
    for (const b of bufs) gpu.retire(b); // a seat's shared submit may still bind them (trl.ts)
  }
}

/** ppo_loss_forward's out, (B, T, 4) interleaved, as its per-token policy term, KL, loss share and ratio. */
function splitOut(res: Float32Array): { loss: Float32Array; kl: Float32Array; contrib: Float32Array; ratio: Float32Array } {
  return { loss: fieldOf(res, 4, 0), kl: fieldOf(res, 4, 1), contrib: fieldOf(res, 4, 2), ratio: fieldOf(res, 4, 3) };
}

/** Sequences' token counts n_b under a (B, T) mask. */
export function rowCounts(mask: ArrayLike<number>, B: number, T: number): Float64Array {
  const n = new Float64Array(B);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) n[b] += mask[b * T + t];
  return n;
}

/** An aggregation of a (B, T) loss matrix under a mask, as verl's agg_loss and OpenRLHF's aggregate_loss form it. */
export interface Aggregation {
  mode: 'token-mean' | 'seq-mean-token-sum' | 'seq-mean-token-mean' | 'seq-mean-token-sum-norm';
  dp: number; // × dp_size (not in seq-mean-token-sum-norm)
  tokens: number | null; // token-mean divisor; null = Σ M
  seqs: number | null; // seq-mean-* divisor; null = #(n_b > 0)
  norm: number; // seq-mean-token-sum-norm divisor
  scale: number; // × the loop's loss scale
}

/** Per-token weights w with loss = Σ w ⊙ L (verl core_algos.py agg_loss; OpenRLHF loss.py aggregate_loss). */
export function aggregationWeights(mask: ArrayLike<number>, B: number, T: number, a: Aggregation): Float64Array {
  const n = rowCounts(mask, B, T);
  const total = n.reduce((x, y) => x + y, 0);
  const seqs = a.seqs ?? n.filter((x) => x > 0).length;
  const w = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let row: number;
    if (a.mode === 'token-mean') row = a.dp / (a.tokens ?? total);
    else if (a.mode === 'seq-mean-token-sum') row = n[b] > 0 ? a.dp / seqs : 0;
    else if (a.mode === 'seq-mean-token-mean') row = n[b] > 0 ? a.dp / ((n[b] + 1e-8) * seqs) : 0;
    else row = 1 / a.norm;
    for (let t = 0; t < T; t++) w[b * T + t] = mask[b * T + t] * row * a.scale;
  }
  return w;
}

/**
 * Per-token weights over micro-batches, each weighed on its own by `weigh` (its rows' mask, gathered in order, and
 * its row count) — verl's dp_actor.py update_policy: each micro-batch's loss formed alone (agg_loss; geo_mean's mean
 * over its rows) and scaled by the loop's factor: the loss of the loop is Σ w ⊙ L over every row. `parts` lists
 * each micro-batch's rows (consecutiveParts for mini_batch.split; verl_dynamic.ts for use_dynamic_bsz).
 */
export function microBatchWeights(mask: Float64Array, T: number, parts: readonly (readonly number[])[], weigh: (mask: Float64Array, rows: number) => Float64Array): Float64Array {
  const w = new Float64Array(mask.length);
  for (const rows of parts) {
    const m = new Float64Array(rows.length * T);
    rows.forEach((r, k) => m.set(mask.subarray(r * T, (r + 1) * T), k * T));
    const wm = weigh(m, rows.length);
    rows.forEach((r, k) => w.set(wm.subarray(k * T, (k + 1) * T), r * T));
  }
  return w;
}

/** mini_batch.split(micro): rows 0 … B − 1 in consecutive micro-batches of `micro` rows. */
export function consecutiveParts(B: number, micro: number): number[][] {
  const parts: number[][] = [];
  for (let r0 = 0; r0 < B; r0 += micro) parts.push(Array.from({ length: Math.min(B, r0 + micro) - r0 }, (_, k) => r0 + k));
  return parts;
}

/** Packs the per-token inputs of ppo_loss_forward; null arrays are filled with `fill`. */
export function packInputs(N: number, cols: Record<(typeof PPO_INPUTS)[number], ArrayLike<number> | null>, fill: Partial<Record<(typeof PPO_INPUTS)[number], number>> = {}): Float32Array {
  const K = PPO_INPUTS.length;
  const out = new Float32Array(K * N);
  PPO_INPUTS.forEach((name, k) => {
    const col = cols[name];
    const f = fill[name] ?? 0;
    for (let i = 0; i < N; i++) out[K * i + k] = col ? col[i] : f;
  });
  return out;
}

/**
 * A trainer's KL estimator alone on (logp, ref), (B, T): ppo_loss_forward's KL column with nothing weighed (the
 * objective's own kernel and clamps: verlKl, openrlhfKl), for what shows the KL outside a loss (`grpo-studio score`).
 */
export async function ppoKl(gpu: Gpu, logp: Float32Array, ref: Float32Array, mask: ArrayLike<number>, B: number, T: number, kl: Pick<PpoLossParams, 'kl' | 'kl_inner' | 'kl_outer'>): Promise<Float32Array> {
  const N = B * T;
  const bufs: GPUBuffer[] = [];
  const keep = (b: GPUBuffer): GPUBuffer => (bufs.push(b), b);
  try {
    const params: PpoLossParams = { mode: 'clip', ...kl, eps_low: 0.2, eps_high: 0.2, dual_clip: 0, ratio_clamp: 0, kl_coef: 0, ent_coef: 0, tau_pos: 1, tau_neg: 1, kl_cov_coef: 0, geo_seq_is: false };
    const inputs = packInputs(N, { old: logp, ref, advantages: null, isw: null, sel: null, mask, w_pg: null, w_aux: null }, { isw: 1, sel: 1 });
    const out = keep(gpu.createBuffer('ppo_out', 16 * N));
    const seat = SubmitGroup.single(gpu, 'trainer kl');
    ppo_loss_forward(seat.recorder, {
      logp: keep(gpu.upload('logp', logp)), entropy: keep(gpu.upload('entropy', new Float32Array(N))), inputs: keep(gpu.upload('ppo_inputs', inputs)),
      out, dlogp: keep(gpu.createBuffer('dlogp', 4 * N)), dentropy: keep(gpu.createBuffer('dentropy', 4 * N)), B, T, params,
    });
    const [res] = await seat.read([{ buf: out, byteSize: 16 * N }]);
    return fieldOf(new Float32Array(res), 4, 1);
  } finally {
    for (const b of bufs) gpu.retire(b);
  }
}
