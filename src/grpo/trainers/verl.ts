// verl's actor objective on one optimizer step's rows (volcengine/verl b178a3c), from its own config names:
// the legacy worker's micro-batch loop (verl/workers/actor/dp_actor.py update_policy: pg_loss −
// entropy_coeff·entropy + kl_loss_coef·kl_loss, × the loop's loss scale, on-policy old-log-prob replacement)
// or the engine worker's ppo_loss (verl/workers/utils/losses.py: global batch normalisation), every registered
// policy loss (verl/trainer/ppo/core_algos.py), kl_penalty, agg_loss and rollout correction
// (verl/trainer/ppo/rollout_corr_helper.py). Decisions come from the read-back log-probs; every number from
// the GPU kernels (ppo_run.ts).
import { SettingsError } from '../settings/types.ts';
import { resolveSettings } from '../settings/resolve.ts';
import { trainerRefusal } from '../settings/rules.ts';
import { VERL_RUN, VERL_SETTINGS, type VERL_KL_TYPES, type VerlConfig, type VerlRun } from '../settings/verl.ts';
import type { PpoKl, PpoLossParams, PpoMode } from '../../kernels/types.ts';
import { aggregationWeights, consecutiveParts, microBatchWeights, packInputs, ppoOutputs, runPpo, withGpuBackend, type Aggregation, type PpoBackend } from './ppo_run.ts';
import { rolloutCorrection, type RolloutCorrectionSettings } from '../settings/verl_rollout.ts';
import { verlDynamicMicroBatches } from './verl_dynamic.ts';
import type { TrainerLoss, TrainerInputs, TrainerLossOutputs } from './types.ts';

const MODES: Record<string, PpoMode> = { vanilla: 'clip', gspo: 'gspo_token', sapo: 'sapo', cispo: 'cispo', gpg: 'pg', clip_cov: 'clip', kl_cov: 'kl_cov', geo_mean: 'geo_mean' };
const KLS: Record<(typeof VERL_KL_TYPES)[number], PpoKl> = { kl: 'k1', k1: 'k1', abs: 'abs', mse: 'k2', k2: 'k2', low_var_kl: 'k3', k3: 'k3' };

/**
 * verl's kl_penalty for a kl_loss_type (core_algos.py kl_penalty_forward): the estimator, low_var_kl / k3's inner
 * clamp of ref − logp to ±20 and its result clamped to ±10; the others unclamped. The objective's KL term and
 * `grpo-studio score`'s KL of a verl batch.
 */
export const verlKl = (klLossType: (typeof VERL_KL_TYPES)[number]): Pick<PpoLossParams, 'kl' | 'kl_inner' | 'kl_outer'> => {
  const kl = KLS[klLossType]; // the table's enum: "+" variants never reach here (refused as values)
  return { kl, kl_inner: 20, kl_outer: kl === 'k3' ? 10 : Infinity };
};

/** DataProto.chunk's refusal: rows that do not split evenly over the ranks (the legacy loop and the engine alike). */
const unevenChunks = (dp: number, B: number) => new SettingsError(`run.data_parallel_size: ${dp} ranks, but the batch's ${B} rows do not chunk evenly over them (DataProto.chunk)`);

function need(a: Float32Array | null, name: string, why: string): Float32Array {
  if (!a) throw new SettingsError(`${name}: required (${why})`);
  return a;
}

/**
 * use_dynamic_bsz: each rank's step rows packed by their prompt + response tokens (verl_dynamic.ts), as
 * dp_actor.py update_policy calls prepare_dynamic_batch with ppo_max_token_len_per_gpu ×
 * ulysses_sequence_parallel_size. Per rank, the micro-batches as lists of the rank's row offsets.
 */
function dynamicParts(c: TrainerInputs, ranges: readonly [number, number][], cfg: VerlConfig): number[][][] {
  const len = c.sequence_lengths;
  if (!len) throw new SettingsError('sequence_lengths: required with use_dynamic_bsz (verl packs the rows into micro-batches by their prompt + response tokens, attention_mask.sum(-1), and aggregates each on its own); give them, or run.micro_batch_loss_scale for a case that is one micro-batch');
  const sp = cfg.ulysses_sequence_parallel_size;
  return verlDynamicMicroBatches(ranges.map(([a, b]) => Array.from(len.subarray(a, b))), cfg.ppo_max_token_len_per_gpu * sp, `config.ppo_max_token_len_per_gpu: ${cfg.ppo_max_token_len_per_gpu} × ulysses_sequence_parallel_size ${sp}`, c.sequence_width);
}

/**
 * How far apart two of verl's covariances (A − Ā)(logp − l̄) must be for float32 to order them as float64 does:
 * core_algos.py forms them from float32 tensors, so each carries an error of a few float32 ulps of the products'
 * scale (all-equal advantages leave a float32 residue A − Ā ≈ 6e-8 that float64 computes as 0). Decisions closer
 * than this (a top-k tie, a bound) are refused rather than taken one way.
 */
function covarianceMargin(c: TrainerInputs, logp: ArrayLike<number>, M: ArrayLike<number>): number {
  let [sA, sL] = [0, 0];
  for (let i = 0; i < c.B * c.T; i++) if (M[i] > 0) [sA, sL] = [Math.max(sA, Math.abs(c.advantages[i])), Math.max(sL, Math.abs(logp[i]))];
  return 4e-6 * sA * sL;
}

/** clip_cov: candidates with lb < cov < ub that the clip did not already bind lose their gradient (corr = 0). */
function clipCovSelection(c: TrainerInputs, logp: ArrayLike<number>, old: ArrayLike<number>, M: ArrayLike<number>, cfg: VerlConfig, lo: number, hi: number): Float64Array {
  const N = c.B * c.T;
  let total = 0;
  let sa = 0;
  let sl = 0;
  for (let i = 0; i < N; i++) [total, sa, sl] = [total + M[i], sa + (M[i] ? c.advantages[i] * M[i] : 0), sl + (M[i] ? logp[i] * M[i] : 0)];
  const meanA = sa / (total + 1e-8);
  const meanL = sl / (total + 1e-8);
  const corr = new Float64Array(N).fill(1);
  const candidates: number[] = [];
  const margin = covarianceMargin(c, logp, M);
  for (let i = 0; i < N; i++) {
    const A = c.advantages[i];
    const r = Math.exp(logp[i] - old[i]);
    const clipped = -A * Math.min(Math.max(r, 1 - lo), 1 + hi) > -A * r;
    const cov = (A - meanA) * (logp[i] - meanL);
    if (M[i] > 0 && !clipped) {
      const bound = Math.abs(cov - cfg.clip_cov_lb) <= margin ? 'clip_cov_lb' : Math.abs(cov - cfg.clip_cov_ub) <= margin ? 'clip_cov_ub' : null;
      if (bound) throw new SettingsError(`config.${bound}: ${cfg[bound]}, and the covariance of sample ${Math.floor(i / c.T)}, position ${i % c.T} is ${cov} (within float32 rounding, ${margin.toExponential(1)}): verl decides it in float32, which the studio cannot say`);
      if (cov > cfg.clip_cov_lb && cov < cfg.clip_cov_ub) candidates.push(i);
    }
  }
  const clipNum = Math.max(Math.floor(cfg.clip_cov_ratio * total), 1);
  if (candidates.length > clipNum) {
    throw new SettingsError(`config.clip_cov_ratio: ${candidates.length} clip_cov candidates for ${clipNum} slots: verl draws them with torch.randperm, which the studio cannot reproduce`);
  }
  for (const i of candidates) corr[i] = 0;
  return corr;
}

/** kl_cov: the top max(1, int(ratio·N)) tokens by (A − mean A)(logp − mean logp) over valid tokens. */
function klCovSelection(c: TrainerInputs, logp: ArrayLike<number>, M: ArrayLike<number>, ratio: number): Float64Array {
  const valid: number[] = [];
  for (let i = 0; i < c.B * c.T; i++) if (M[i] > 0) valid.push(i);
  const sel = new Float64Array(c.B * c.T);
  if (!valid.length) return sel;
  const meanA = valid.reduce((s, i) => s + c.advantages[i], 0) / valid.length;
  const meanL = valid.reduce((s, i) => s + logp[i], 0) / valid.length;
  const k = Math.max(1, Math.floor(valid.length * ratio));
  const cov = valid.map((i) => ({ i, v: (c.advantages[i] - meanA) * (logp[i] - meanL) }));
  cov.sort((x, y) => y.v - x.v);
  // torch.topk picks among equal values in no documented order: a tie (within float32 rounding) at the k-th place is not the studio's to break.
  if (k < cov.length && cov[k - 1].v - cov[k].v <= covarianceMargin(c, logp, M)) {
    throw new SettingsError(`config.kl_cov_ratio: ${ratio} selects the top ${k} of ${cov.length} tokens by covariance, and the covariances at places ${k} and ${k + 1} are equal within float32 rounding (${cov[k - 1].v} and ${cov[k].v}; all-equal advantages make every covariance 0): torch.topk's choice among them is not reproduced`);
  }
  for (const { i } of cov.slice(0, k)) sel[i] = 1;
  return sel;
}

/**
 * The run context of a step on a batch under verl's engine worker (use_legacy_worker_impl disable): verl's driver
 * always hands ppo_loss the mini-batch's row count as global_batch_size (ray_trainer.py _update_actor:
 * ppo_mini_batch_size × rollout.n, empty rows included), never None, and the batch a step runs on is that one
 * mini-batch (verlObjective refuses more rows). None — ppo_loss's own fallback, the micro-batch's non-empty rows —
 * is a loss case's, calling ppo_loss alone. The tokens stay the batch's own (batch_num_tokens null: all its trained
 * tokens, its rows taken as one rank).
 */
export function verlStepRun(config: Record<string, unknown>, run: Record<string, unknown>, B: number): Record<string, unknown> {
  const engine = config.use_legacy_worker_impl === 'disable';
  return engine && (run.global_batch_size === undefined || run.global_batch_size === null) ? { ...run, global_batch_size: B } : run;
}

/** The objective on any backend (GPU kernels, or their float64 twins in the tests). */
export async function verlObjective(be: PpoBackend, c: TrainerInputs, opts: { backward: boolean }): Promise<TrainerLossOutputs> {
  const cfg = resolveSettings<VerlConfig>(VERL_SETTINGS, c.config, 'config');
  const run = resolveSettings<VerlRun>(VERL_RUN, c.run, 'run');
  const refusal = trainerRefusal('verl', { ...cfg }, { ...run }); // verl_rules.ts: what verl itself refuses
  if (refusal) throw refusal;
  const { B, T } = c;
  const N = B * T;
  const legacy = cfg.use_legacy_worker_impl !== 'disable';
  const bypass: boolean = cfg.bypass_mode;
  // apply_bypass_mode replaces loss_mode by its own loss (vanilla against the rollout, or reinforce).
  const lossMode: string = bypass ? 'vanilla' : cfg.loss_mode;
  const rollout = c.sampling_per_token_logps;
  if (bypass && !rollout) throw new SettingsError('sampling_per_token_logps (rollout_log_probs): required by bypass_mode');
  // The objective is ONE optimizer step of dp_actor.py update_policy: one mini-batch, whose rows verl splits in
  // order into micro-batches of ppo_micro_batch_size_per_gpu, aggregating each on its own, × 1/GA
  // (microBatchWeights). A batch past ppo_mini_batch_size (a whole-batch dump: every rank's rows, every step)
  // holds several optimizer steps: run.mini_batch_index k names the one to take — on each of the
  // data_parallel_size ranks (DataProto.chunk: rank r holds the r-th B/dp rows) the k-th mini-batch of its rows,
  // the ranks' gradients averaged (FSDP), the other rows weighing 0 (k = 0 where each rank's rows are one
  // mini-batch) — else it is refused, as TRL's
  // steps_per_generation > 1 in the step (step_objective.ts). A case that states its micro-batch's scale
  // (run.micro_batch_loss_scale) is one micro-batch; use_dynamic_bsz packs each rank's rows into micro-batches by
  // their tokens (dynamicParts), each scaled by its rows ÷ ppo_mini_batch_size.
  const mini = cfg.ppo_mini_batch_size;
  let ranges: [number, number][] = [[0, B]]; // the rows of the step, per rank
  let parts: number[][][] | null = null; // per rank, its micro-batches' row offsets; null: one micro-batch
  if (run.mini_batch_index !== null && !legacy) throw new SettingsError(`run.mini_batch_index: ${run.mini_batch_index} selects a step of the legacy worker's mini-batch loop, and use_legacy_worker_impl is disable (the engine worker): leave it out`);
  if (run.mini_batch_index !== null && run.micro_batch_loss_scale !== null) throw new SettingsError(`run.mini_batch_index: ${run.mini_batch_index} with run.micro_batch_loss_scale ${run.micro_batch_loss_scale}: a case stating its scale is one micro-batch; leave one out`);
  if (legacy && run.micro_batch_loss_scale === null) {
    const dp = run.data_parallel_size;
    // A dump over several ranks (data_parallel_size > 1: the reader writes it from the config) holds every rank's
    // rows, so it is chunked over them whether or not a mini-batch is named: each rank forms its own loss over its
    // own rows, the gradients averaged. Taken as one rank's, its token counts would be pooled over all of them.
    if (run.mini_batch_index !== null || (dp !== null && dp > 1)) {
      // The ranks the rows are chunked over must be known (the reader writes them from the config): one rank assumed
      // would take the first rows of the whole dump for a multi-GPU run's step.
      if (dp === null) throw new SettingsError(`run.data_parallel_size: needed with run.mini_batch_index (the ranks the dump's rows are chunked over: trainer.nnodes × n_gpus_per_node ÷ ulysses_sequence_parallel_size, which the verl reader writes when the config has them)`);
      const k = run.mini_batch_index ?? 0;
      if (B % dp !== 0) throw unevenChunks(dp, B);
      const per = B / dp;
      if (run.mini_batch_index === null && per > mini) throw new SettingsError(`config.ppo_mini_batch_size: ${mini} rows per optimizer step (the actor's: × rollout.n ÷ data-parallel size), but each rank's ${per} rows (${B} over data_parallel_size ${dp}) hold ${Math.ceil(per / mini)} mini-batches: verl takes that many optimizer steps (dp_actor.py update_policy), the studio one; set run.mini_batch_index to 0 (the batch file's "run", or the page's trainer settings) to take verl's first, or set ppo_mini_batch_size to at least ${per}`);
      if (k * mini >= per) throw new SettingsError(`run.mini_batch_index: ${k}, but each rank's ${per} rows (${B} over data_parallel_size ${dp}) hold ${Math.ceil(per / mini)} mini-batch(es) of ppo_mini_batch_size ${mini} (0 … ${Math.ceil(per / mini) - 1})`);
      ranges = Array.from({ length: dp }, (_, r) => [r * per + k * mini, r * per + Math.min(per, (k + 1) * mini)]);
    } else if (B > mini) {
      throw new SettingsError(`config.ppo_mini_batch_size: ${mini} rows per optimizer step (the actor's: × rollout.n ÷ data-parallel size), but the batch holds ${B}: verl takes ${Math.ceil(B / mini)} optimizer steps over it (dp_actor.py update_policy), the studio one; set run.mini_batch_index to 0 (the batch file's "run", or the page's trainer settings) to take verl's first, the first ${mini} rows of each rank's, or set ppo_mini_batch_size to at least ${B}`);
    }
    const micro = cfg.ppo_micro_batch_size_per_gpu;
    if (cfg.use_dynamic_bsz) parts = dynamicParts(c, ranges, cfg);
    else if (micro !== null) parts = ranges.map(([a, b]) => consecutiveParts(b - a, micro));
  }
  if (!legacy) {
    // The engine worker (engine_workers.py train_mini_batch): an optimizer step per mini-batch of ppo_mini_batch_size
    // × rollout.n rows over all ranks (ray_trainer.py _update_actor), each rank's share in micro-batches of
    // ppo_micro_batch_size_per_gpu or packed by tokens under use_dynamic_bsz (engine/utils.py prepare_micro_batches,
    // the legacy loop's packing: dynamicParts). Its losses are normalised by the mini-batch's global counts, so the
    // split leaves them alone — but not a selection over a micro-batch's tokens.
    const dp = run.data_parallel_size ?? 1;
    if (B % dp !== 0) throw unevenChunks(dp, B);
    const perRank = B / dp;
    if (perRank > mini) throw new SettingsError(`config.ppo_mini_batch_size: ${mini} rows per optimizer step (the actor's: × rollout.n ÷ data-parallel size), but ${dp > 1 ? `each rank's ${perRank} rows (${B} over data_parallel_size ${dp})` : `the batch's ${B} rows`} hold ${Math.ceil(perRank / mini)} mini-batches: verl's engine worker takes that many optimizer steps (engine_workers.py train_mini_batch), the studio one; import one mini-batch's rows, or set ppo_mini_batch_size to at least ${perRank}`);
    const rankRanges = Array.from({ length: dp }, (_, r): [number, number] => [r * perRank, (r + 1) * perRank]);
    const micro = cfg.ppo_micro_batch_size_per_gpu;
    // Packed by tokens, the micro-batches are known from the rows' lengths (and verl's budget checked on them); a
    // case without its prompts gives none.
    const packed = cfg.use_dynamic_bsz && c.sequence_lengths ? dynamicParts(c, rankRanges, cfg) : null;
    const splitBy = cfg.use_dynamic_bsz
      ? !packed
        ? `config.use_dynamic_bsz: the engine packs each rank's rows into micro-batches of ppo_max_token_len_per_gpu ${cfg.ppo_max_token_len_per_gpu} tokens, and the rows' lengths (sequence_lengths) are not given`
        : packed.some((p) => p.length > 1) ? `config.ppo_max_token_len_per_gpu: ${cfg.ppo_max_token_len_per_gpu} tokens per dynamic micro-batch, and use_dynamic_bsz packs each rank's rows into ${packed[0].length}` : null
      : micro !== null && perRank > micro ? `config.ppo_micro_batch_size_per_gpu: ${micro} rows per micro-batch, of each rank's ${perRank}` : null;
    const acrossEngine = lossMode === 'clip_cov' || lossMode === 'kl_cov' ? `loss_mode ${lossMode} (its token selection)` : bypass && cfg.rollout_is_batch_normalize ? 'bypass_mode with rollout_is_batch_normalize (its normalisation)' : null;
    if (acrossEngine && splitBy) throw new SettingsError(`${splitBy}, and ${acrossEngine} spans each micro-batch's rows; the studio reproduces it on a batch of one micro-batch: import that micro-batch's rows alone`);
  }
  const rankParts = parts ?? ranges.map(([a, b]) => consecutiveParts(b - a, b - a));
  const stepRows = ranges.reduce((n, [a, b]) => n + b - a, 0);
  const split = rankParts.some((p) => p.length > 1);
  if (split || stepRows < B) {
    // Selections and normalisations over one micro-batch's tokens are not row-local: taken over every row of the
    // batch, so reproduced only when the batch is the one micro-batch.
    const across = lossMode === 'clip_cov' || lossMode === 'kl_cov' ? `loss_mode ${lossMode} (its token selection)` : bypass && cfg.rollout_is_batch_normalize ? 'bypass_mode with rollout_is_batch_normalize (its normalisation)' : null;
    const field = stepRows < B
      ? `run.mini_batch_index: ${run.mini_batch_index} takes ${stepRows} of the batch's ${B} rows`
      : cfg.use_dynamic_bsz
        ? `config.ppo_max_token_len_per_gpu: ${cfg.ppo_max_token_len_per_gpu} tokens per dynamic micro-batch, and use_dynamic_bsz packs the batch's ${B} rows into ${rankParts[0].length}`
        : `config.ppo_micro_batch_size_per_gpu: ${cfg.ppo_micro_batch_size_per_gpu} rows per micro-batch, of the batch's ${B}`;
    if (across) throw new SettingsError(`${field}, and ${across} spans each micro-batch's rows; the studio reproduces it on a batch of one micro-batch: import that micro-batch's rows alone`);
  }
  // on_policy: update_policy's own test, one mini-batch (of each rank's rows) and one epoch; use_rollout_log_probs
  // keeps the stored old log-probs whatever it says.
  const rankRows = ranges.length > 1 ? B / ranges.length : B;
  const onPolicy: boolean = legacy && !cfg.use_rollout_log_probs && (run.on_policy ?? (Math.max(run.num_mini_batches, Math.ceil(rankRows / mini)) === 1 && cfg.ppo_epochs === 1));
  if (!onPolicy && !bypass) need(c.old_per_token_logps, 'old_per_token_logps', 'old_log_probs of an off-policy update');
  if (cfg.use_kl_loss) need(c.ref_per_token_logps, 'ref_per_token_logps', 'use_kl_loss');
  // The loop's loss_scale_factor for a micro-batch of `rows`: its rows ÷ ppo_mini_batch_size under use_dynamic_bsz,
  // else 1 / gradient_accumulation (ppo_micro_batch_size_per_gpu set: verl_rules.ts refuses null without use_dynamic_bsz).
  const scaleOf = (rows: number): number => {
    if (!legacy) return 1;
    if (run.micro_batch_loss_scale !== null) return run.micro_batch_loss_scale;
    return cfg.use_dynamic_bsz ? rows / mini : 1 / Math.floor(mini / cfg.ppo_micro_batch_size_per_gpu!);
  };
  const epsLow: number = cfg.clip_ratio_low ?? cfg.clip_ratio;
  const epsHigh: number = cfg.clip_ratio_high ?? cfg.clip_ratio;
  const rc: RolloutCorrectionSettings = cfg;
  const M0 = Float64Array.from(c.completion_mask);
  // Decoupled mode: the trainer corrects once, with the stored old log-probs, before the actor runs.
  const decoupled = rollout && !bypass ? rolloutCorrection(Float64Array.from(need(c.old_per_token_logps, 'old_per_token_logps', 'rollout correction'), (o, i) => o - rollout[i]), M0, B, T, rc) : null;
  const entropyShown = cfg.calculate_entropy || cfg.entropy_coeff !== 0;
  const global = (mode: Aggregation['mode'], rows: number): Aggregation =>
    legacy
      ? { mode, dp: 1, tokens: null, seqs: null, norm: T, scale: scaleOf(rows) }
      : { mode, dp: run.dp_size, tokens: run.batch_num_tokens, seqs: run.global_batch_size, norm: cfg.loss_scale_factor ?? T, scale: 1 };
  // Each rank's step rows in micro-batches, each weighed alone, the ranks averaged; the other rows weigh 0.
  const ranks = ranges.length;
  const stepWeights = (mask: Float64Array, weigh: (mask: Float64Array, rows: number) => Float64Array) => {
    const w = new Float64Array(N);
    ranges.forEach(([a, b], k) => w.set(microBatchWeights(mask.subarray(a * T, b * T), T, rankParts[k], weigh).map((x) => x / ranks), a * T));
    return w;
  };
  const weights = (mask: Float64Array, mode: Aggregation['mode']) => stepWeights(mask, (m, rows) => aggregationWeights(m, rows, T, global(mode, rows)));
  // geo_mean: the mean of its micro-batch's sequence losses, every position of a row weighing alike.
  const geoWeights = () => stepWeights(M0, (_, rows) => new Float64Array(rows * T).fill(scaleOf(rows) / rows));
  const rangeOf = (b: number) => ranges.find(([a, e]) => b >= a && b < e);

  let isShown: Float64Array | null = decoupled?.weights ?? null;
  let lossMask: Float64Array = decoupled?.mask ?? M0;
  const r = await runPpo(be, {
    temperature: cfg.temperature,
    entropyTemperature: cfg.temperature,
    backward: opts.backward,
    plan: (logp) => {
      const current = Float64Array.from(logp);
      let old: ArrayLike<number> = onPolicy ? current : (c.old_per_token_logps ?? current);
      let isw: ArrayLike<number> | null = decoupled?.weights ?? null;
      let mode = MODES[lossMode];
      let auxMask: Float64Array = lossMask;
      if (bypass) {
        old = onPolicy ? current : rollout!;
        const inLoss = rolloutCorrection(Float64Array.from(current, (x, i) => x - old[i]), M0, B, T, rc);
        lossMask = inLoss.mask;
        auxMask = M0; // update_policy aggregates entropy and KL with the batch's response_mask
        if (cfg.loss_type === 'reinforce') {
          mode = 'pg';
          isw = inLoss.weights;
          isShown = inLoss.weights;
        } else isw = null;
      }
      let sel: Float64Array | null = null;
      if (lossMode === 'clip_cov') sel = clipCovSelection(c, current, old, lossMask, cfg, epsLow, epsHigh);
      if (lossMode === 'kl_cov') sel = klCovSelection(c, current, lossMask, cfg.kl_cov_ratio);
      const pgMode = lossMode === 'gspo' || lossMode === 'sapo' ? 'seq-mean-token-mean' : cfg.loss_agg_mode;
      // geo_mean: the mean over its micro-batch's rows.
      const wPg = mode === 'geo_mean' ? geoWeights() : weights(lossMask, pgMode);
      const wAux = weights(auxMask, cfg.loss_agg_mode);
      const klParams = verlKl(cfg.kl_loss_type);
      const kl: PpoKl = cfg.use_kl_loss ? klParams.kl : 'none';
      const params: PpoLossParams = {
        mode,
        kl,
        eps_low: epsLow,
        eps_high: epsHigh,
        dual_clip: lossMode === 'vanilla' && mode === 'clip' ? cfg.clip_ratio_c : 0,
        ratio_clamp: lossMode === 'clip_cov' || lossMode === 'kl_cov' ? 0 : 20,
        kl_inner: klParams.kl_inner,
        kl_outer: kl === 'none' ? Infinity : klParams.kl_outer,
        kl_coef: cfg.use_kl_loss ? cfg.kl_loss_coef : 0,
        ent_coef: cfg.entropy_coeff,
        tau_pos: cfg.tau_pos,
        tau_neg: cfg.tau_neg,
        kl_cov_coef: cfg.ppo_kl_coef,
        geo_seq_is: mode === 'geo_mean' && isw !== null,
      };
      const inputs = packInputs(
        N,
        { old, ref: c.ref_per_token_logps, advantages: c.advantages, isw, sel, mask: lossMask, w_pg: wPg, w_aux: cfg.use_kl_loss || params.ent_coef !== 0 ? wAux : null },
        { isw: 1, sel: 1 },
      );
      return { params, inputs };
    },
  });
  // The loss mask shown: the step's tokens (the other rows are in the batch, not in this optimizer step).
  const shown = stepRows === B ? lossMask : lossMask.map((x, i) => (rangeOf(Math.floor(i / T)) ? x : 0));
  return ppoOutputs(r, { T, entropy: entropyShown, kl: cfg.use_kl_loss, loss: lossMode !== 'geo_mean', importance_sampling_ratio: isShown, loss_mask: shown });
}

export const verlLoss: TrainerLoss = (gpu, c, opts) => withGpuBackend(gpu, c, (be) => verlObjective(be, c, opts));
