// Launchers for shaders/trl_loss_{forward,backward}.wgsl: TRL's per-token loss, masks and IS ratio, one
// invocation per row, and its gradient to the per-token log-probs and entropies. The loss type and its
// aggregation are uniforms (Params), so one pipeline per pass serves every column of the page's loss table;
// the other branches (IS level and vLLM mode, KL, masks) are override constants, fixed for a run's settings.
import type { ParamWord, Recorder } from '../gpu/context.ts';
import { TRL_GLOBAL_COUNT, type TrlLossParams, type VllmIsMode } from './types.ts';
import { bindAll } from './windows.ts';

const WG = 64;
/** Threads of each process's totals workgroup. */
const TOTALS_WG = 256;
/** Floats per row in `rows`: Σ L·M, n, Σ L, Σ H·M', Σ M', off_policy_mask, r_seq, φ. */
export const TRL_ROW_STATS = 8;

const LOSS_CODE = { cispo: 1, sapo: 2, vespo: 3 } as Record<string, number>;
const IS_CODE: Record<VllmIsMode, number> = { off: 0, token_truncate: 1, token_mask: 2, sequence_truncate: 3, sequence_mask: 4 };
const F32_MAX = 3.4e38;

/**
 * Aggregation code and divisor (see the backward shader's header). Over p.ranks processes the per-sequence
 * means and B-based divisors pooled over all rows already equal the mean of the ranks' (equal rows per rank);
 * a global token count is each rank's divisor, so the mean of the ranks' losses divides by it × ranks.
 */
export function trlAggregation(p: TrlLossParams): { agg: number; divisor: number; entGlobal: boolean } {
  const global = TRL_GLOBAL_COUNT.includes(p.loss_type);
  if (global) return { agg: 2, divisor: (Math.max(1, p.num_items_in_batch) / p.num_processes) * p.ranks, entGlobal: true };
  if (p.loss_type === 'dr_grpo') return { agg: 2, divisor: p.B * p.max_completion_length * p.gradient_accumulation_steps, entGlobal: false };
  return { agg: p.loss_type === 'bnpo' ? 1 : p.loss_type === 'luspo' ? 3 : 0, divisor: 1, entGlobal: false };
}

function params(p: TrlLossParams): ParamWord[] {
  const { divisor, agg, entGlobal } = trlAggregation(p);
  return [
    ['B', 'u32', p.B],
    ['T', 'u32', p.T],
    ['eps_low', 'f32', p.epsilon_low],
    ['eps_high', 'f32', p.epsilon_high],
    ['delta', 'f32', p.delta ?? 0],
    ['beta', 'f32', p.beta],
    ['is_min', 'f32', p.vllm_is_min ?? -F32_MAX],
    ['is_max', 'f32', p.vllm_is_max ?? F32_MAX],
    ['opsm_threshold', 'f32', p.off_policy_mask_threshold ?? 0],
    ['entropy_threshold', 'f32', p.entropy_threshold ?? 0],
    ['tau_pos', 'f32', p.sapo_temperature_pos],
    ['tau_neg', 'f32', p.sapo_temperature_neg],
    ['k_pos', 'f32', p.vespo_k_pos],
    ['lambda_pos', 'f32', p.vespo_lambda_pos],
    ['k_neg', 'f32', p.vespo_k_neg],
    ['lambda_neg', 'f32', p.vespo_lambda_neg],
    ['divisor', 'f32', divisor],
    ['gas', 'f32', p.gradient_accumulation_steps],
    ['entropy_coef', 'f32', p.entropy_coef],
    ['loss', 'u32', LOSS_CODE[p.loss_type] ?? 0],
    ['is_apply', 'u32', p.vllm_is_mode !== 'off' && p.loss_type !== 'vespo' ? 1 : 0],
    ['agg', 'u32', agg],
    ['ent_global', 'u32', entGlobal ? 1 : 0],
    ['rank_rows', 'u32', p.B / p.ranks],
  ];
}

/** The override constants both passes share. */
function common(p: TrlLossParams, hasOld: boolean) {
  return {
    WG,
    SEQUENCE: p.importance_sampling_level === 'sequence',
    HAS_OLD: hasOld,
    KL: p.beta !== 0,
    BIAS_KL: p.use_bias_correction_kl,
    DELTA: p.delta !== null,
  };
}

export interface TrlLossBuffers {
  logp: GPUBuffer; // (B, T) f32
  aux: GPUBuffer; // (B, T, 4) f32: old, ref, sampling, completion_mask × tool_mask
  advantages: GPUBuffer; // (B) f32
  tok: GPUBuffer; // (B, T, 4) f32: per_token_loss, per_token_kl, IS ratio, entropy_mask
  rows: GPUBuffer; // (B, 8) f32
  /** aux's old column is real (false: old = per_token_logps.detach()). */
  hasOld: boolean;
  hasSampling: boolean;
}

export function trl_loss_forward(rec: Recorder, a: TrlLossBuffers & { entropy: GPUBuffer }, p: TrlLossParams): void {
  const kernel = 'trl_loss_forward';
  const N = p.B * p.T;
  rec.dispatch({
    kernel,
    shader: kernel,
    constants: {
      ...common(p, a.hasOld),
      IS_MODE: IS_CODE[p.vllm_is_mode],
      OPSM: p.off_policy_mask_threshold !== null,
      HAS_SAMPLING: a.hasSampling,
      EMASK: p.entropy_threshold !== null,
    },
    bindings: bindAll(rec.gpu, kernel, {
      logp: [a.logp, N],
      entropy: [a.entropy, N],
      aux: [a.aux, 4 * N],
      advantages: [a.advantages, p.B],
      tok: [a.tok, 4 * N],
      rows: [a.rows, TRL_ROW_STATS * p.B],
    }),
    params: params(p),
    workgroups: [Math.ceil(p.B / WG), 1],
  });
}

/**
 * The gradient: each process's totals first (shaders/trl_loss_totals.wgsl into `totals`, (ranks, 2) f32), then one
 * invocation per row.
 */
export function trl_loss_backward(rec: Recorder, a: TrlLossBuffers & { dlogp: GPUBuffer; dentropy: GPUBuffer; totals: GPUBuffer }, p: TrlLossParams): void {
  const kernel = 'trl_loss_backward';
  const N = p.B * p.T;
  rec.dispatch({
    kernel: 'trl_loss_totals',
    shader: 'trl_loss_totals',
    constants: { WG: TOTALS_WG },
    bindings: bindAll(rec.gpu, 'trl_loss_totals', { rows: [a.rows, TRL_ROW_STATS * p.B], totals: [a.totals, 2 * p.ranks] }),
    params: [
      ['B', 'u32', p.B],
      ['rank_rows', 'u32', p.B / p.ranks],
    ],
    workgroups: [p.ranks, 1],
  });
  rec.dispatch({
    kernel,
    shader: kernel,
    constants: common(p, a.hasOld),
    bindings: bindAll(rec.gpu, kernel, {
      logp: [a.logp, N],
      aux: [a.aux, 4 * N],
      advantages: [a.advantages, p.B],
      tok: [a.tok, 4 * N],
      rows: [a.rows, TRL_ROW_STATS * p.B],
      dlogp: [a.dlogp, N],
      dentropy: [a.dentropy, N],
      totals: [a.totals, 2 * p.ranks],
    }),
    params: params(p),
    workgroups: [Math.ceil(p.B / WG), 1],
  });
}

/** TRL's loss from the forward's per-row sums (float64 on the host: B·8 floats read back), the ranks' mean. */
export function trl_loss_value(rows: ArrayLike<number>, p: TrlLossParams): number {
  const { B, T, ranks } = p;
  const Br = B / ranks;
  const gas = p.gradient_accumulation_steps;
  const { divisor, entGlobal } = trlAggregation(p);
  let lm = 0;
  let seqMean = 0;
  let luspo = 0;
  let hm = 0;
  let bnpo = 0; // Σ over ranks of the rank's Σ L·M / max(1, N)
  let entMean = 0; // Σ over ranks of the rank's Σ H·M' / max(1, Σ M')
  for (let k = 0; k < ranks; k++) {
    let [lmk, Nk, hmk, mek] = [0, 0, 0, 0];
    for (let b = k * Br; b < (k + 1) * Br; b++) {
      const r = b * TRL_ROW_STATS;
      lmk += rows[r];
      Nk += rows[r + 1];
      seqMean += rows[r] / Math.max(1, rows[r + 1]);
      luspo += rows[r + 2] * rows[r + 1];
      hmk += rows[r + 3];
      mek += rows[r + 4];
    }
    lm += lmk;
    hm += hmk;
    bnpo += lmk / Math.max(1, Nk);
    entMean += hmk / Math.max(1, mek);
  }
  let loss: number;
  switch (p.loss_type) {
    case 'grpo':
    case 'sapo':
      loss = seqMean / B / gas;
      break;
    case 'bnpo':
      loss = bnpo / ranks / gas;
      break;
    case 'luspo':
      loss = luspo / (B * T) / gas;
      break;
    default:
      loss = lm / divisor;
  }
  if (p.entropy_coef !== 0) loss -= p.entropy_coef * (entGlobal ? hm / divisor : entMean / ranks / gas);
  return loss;
}
