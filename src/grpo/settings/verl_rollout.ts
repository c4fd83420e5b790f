// verl's rollout correction (volcengine/verl verl/trainer/ppo/rollout_corr_helper.py): truncated importance
// weights (`rollout_is` token / sequence, optional batch normalisation) and rejection sampling (`rollout_rs`
// options that drop tokens or whole sequences from the response mask), from a log-ratio of the training
// policy to the rollout policy — old − rollout in decoupled mode (compute_rollout_correction_and_add_to_batch),
// current − rollout in bypass mode (compute_policy_loss_bypass_mode). Per-token decisions and detached
// weights: they enter the objective kernel as inputs. Beside the verl table (plain float64 over its rollout_*
// rows, no GPU): the verl reader checks a dump's own weights and rejected mask against these settings with it.
import { SettingsError } from './types.ts';

const SAFETY_BOUND = 20;
const RS_OPTIONS = ['token_k1', 'token_k2', 'token_k3', 'seq_sum_k1', 'seq_sum_k2', 'seq_sum_k3', 'seq_mean_k1', 'seq_mean_k2', 'seq_mean_k3', 'seq_max_k2', 'seq_max_k3'];

export interface RolloutCorrectionSettings {
  rollout_is: 'token' | 'sequence' | null;
  rollout_is_threshold: number;
  rollout_is_batch_normalize: boolean;
  rollout_rs: string | null;
  rollout_rs_threshold: string | null;
}

export interface RolloutCorrection {
  weights: Float64Array | null; // (B, T) rollout_is_weights, 0 on padding
  /** The weights before truncation at rollout_is_threshold and batch normalisation (the Doctor names them). */
  raw: Float64Array | null; // (B, T)
  mask: Float64Array; // (B, T) response_mask after rejection sampling
}

const clampSafe = (x: number): number => Math.min(Math.max(x, -SAFETY_BOUND), SAFETY_BOUND);

function isWeights(lr: ArrayLike<number>, M: ArrayLike<number>, B: number, T: number, s: RolloutCorrectionSettings): { w: Float64Array; raw: Float64Array } {
  const w = new Float64Array(B * T);
  const raws = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let sum = 0;
    for (let t = 0; t < T; t++) sum += M[b * T + t] ? lr[b * T + t] * M[b * T + t] : 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const raw = Math.exp(clampSafe(s.rollout_is === 'token' ? lr[i] : sum)) * M[i];
      raws[i] = raw;
      w[i] = Math.min(raw, s.rollout_is_threshold);
    }
  }
  if (s.rollout_is_batch_normalize) {
    let mean: number;
    if (s.rollout_is === 'token') {
      let num = 0;
      let den = 0;
      for (let i = 0; i < B * T; i++) [num, den] = [num + w[i] * M[i], den + M[i]];
      mean = num / (den + 1e-8);
    } else {
      let num = 0;
      let seqs = 0;
      for (let b = 0; b < B; b++) {
        let sw = 0;
        let n = 0;
        for (let t = 0; t < T; t++) [sw, n] = [sw + w[b * T + t] * M[b * T + t], n + M[b * T + t]];
        if (n > 0) [num, seqs] = [num + sw / (n + 1e-8), seqs + 1];
      }
      mean = num / Math.max(seqs, 1e-8);
    }
    if (mean > 1e-8) for (let i = 0; i < B * T; i++) w[i] /= mean;
  }
  return { w, raw: raws };
}

/**
 * A threshold's text as Python's float() reads it (verl's _parse_rollout_rs_thresholds calls float on each part):
 * surrounding spaces, a sign, inf / infinity / nan in any case, underscores between digits; undefined for text
 * float() refuses (JavaScript's Number would also take "0x10" and "", and not "inf").
 */
function pythonFloat(text: string): number | undefined {
  const t = text.trim();
  const named = /^([+-]?)(inf|infinity|nan)$/i.exec(t);
  if (named) return named[2].toLowerCase() === 'nan' ? NaN : named[1] === '-' ? -Infinity : Infinity;
  const plain = t.replace(/(\d)_(?=\d)/g, '$1');
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(plain) ? Number(plain) : undefined;
}

/** Parses rollout_rs / rollout_rs_threshold as verl's _parse_rollout_rs_thresholds does. */
function rsThresholds(rs: string, spec: string | null): Array<{ option: string; lower: number | null; upper: number }> {
  const options = [...new Set(rs.split(',').map((o) => o.trim()).filter(Boolean))];
  if (!options.length) throw new SettingsError('config.rollout_rs: must name at least one option');
  for (const o of options) if (!RS_OPTIONS.includes(o)) throw new SettingsError(`config.rollout_rs: unknown option ${o} (one of ${RS_OPTIONS.join(', ')})`);
  if (spec === null) throw new SettingsError('config.rollout_rs_threshold: required when rollout_rs is set');
  let specs = String(spec).split(',').map((p) => p.trim()).filter(Boolean);
  if (specs.length === 1) specs = options.map(() => specs[0]);
  if (specs.length !== options.length) throw new SettingsError(`config.rollout_rs_threshold: one threshold, or one per rollout_rs option (${options.length})`);
  return options.map((option, k) => {
    const sp = specs[k];
    const num = (x: string): number => {
      const v = pythonFloat(x);
      if (v === undefined || !(v > 0)) throw new SettingsError(`config.rollout_rs_threshold: '${sp}' for ${option} must be positive numbers${v !== undefined && Number.isNaN(v) ? ' (verl takes nan, and every comparison with it rejects the token: not reproduced)' : ''}`);
      return v;
    };
    if (option.endsWith('k1')) {
      // One bound u gives the lower 1/u, which verl checks too: 'inf' alone makes it 0, refused as verl refuses it.
      const [lo, hi] = sp.includes('_') ? [num(sp.slice(0, sp.indexOf('_'))), num(sp.slice(sp.indexOf('_') + 1))] : [num(String(1 / num(sp))), num(sp)];
      return { option, lower: Math.log(lo), upper: Math.log(hi) };
    }
    if (sp.includes('_')) throw new SettingsError(`config.rollout_rs_threshold: ${option} takes one upper bound, got '${sp}'`);
    return { option, lower: null, upper: num(sp) };
  });
}

function rejectionMask(lr: ArrayLike<number>, M: ArrayLike<number>, B: number, T: number, rs: string, spec: string | null): Float64Array {
  const keep = Float64Array.from(M);
  for (const { option, lower, upper } of rsThresholds(rs, spec)) {
    const k = option.slice(-2);
    const stat = (i: number): number => {
      const l = clampSafe(lr[i]);
      return k === 'k1' ? -l : k === 'k2' ? 0.5 * l * l : Math.exp(l) - 1 - l;
    };
    const inside = (v: number): boolean => (lower === null ? v <= upper : v >= lower && v <= upper);
    for (let b = 0; b < B; b++) {
      let seqOk = true;
      if (!option.startsWith('token')) {
        let sum = 0;
        let n = 0;
        let max = -Infinity;
        for (let t = 0; t < T; t++) {
          const i = b * T + t;
          if (!M[i]) continue;
          sum += stat(i) * M[i];
          n += M[i];
          max = Math.max(max, stat(i));
        }
        const v = option.startsWith('seq_sum') ? sum : option.startsWith('seq_mean') ? sum / (n + 1e-8) : max === -Infinity ? 0 : max;
        seqOk = inside(v);
      }
      for (let t = 0; t < T; t++) {
        const i = b * T + t;
        if (!(option.startsWith('token') ? inside(stat(i)) : seqOk)) keep[i] = 0;
      }
    }
  }
  return keep;
}

/** IS weights and the rejection-sampled mask for log-ratio lr (B, T) under response mask M. */
export function rolloutCorrection(lr: ArrayLike<number>, M: ArrayLike<number>, B: number, T: number, s: RolloutCorrectionSettings): RolloutCorrection {
  let any = false;
  for (let i = 0; i < B * T; i++) any ||= M[i] !== 0;
  if (!any) throw new SettingsError('rollout correction: response_mask has no valid token (verl raises)');
  const is = s.rollout_is === null ? null : isWeights(lr, M, B, T, s);
  return {
    weights: is?.w ?? null,
    raw: is?.raw ?? null,
    mask: s.rollout_rs === null ? Float64Array.from(M) : rejectionMask(lr, M, B, T, s.rollout_rs, s.rollout_rs_threshold),
  };
}

/** Where verl's correction, done again over a batch it already corrected, departs from the batch's own. */
export interface RedoneGap {
  kind: 'rejected' | 'weight';
  b: number;
  t: number;
  /** weight: the batch's rollout_is_weights and the redone one at (b, t). */
  dumped?: number;
  redone?: number;
  /** weight: settings (of rollout_is, its threshold and batch normalisation) that do give the batch's weights. */
  matches?: Partial<RolloutCorrectionSettings>;
}

// The batch's weights are verl's float32 exp of float32 log-ratio sums.
const WEIGHT_ATOL = 1e-5;
const WEIGHT_RTOL = 1e-3;

/**
 * A verl dump is saved after compute_rollout_correction_and_add_to_batch (rollout_corr_helper.py): its response_mask
 * M is after rejection sampling and its rollout_is_weights are verl's. The step redoes both over M
 * (rolloutCorrection): exact when rejection drops nothing more and the redone weights are the batch's on every
 * trained token. Not so when verl decided over the mask before rejection in a way M no longer shows (sequence
 * weights or batch normalisation beside token rejection, sequence statistics beside token options) or when the
 * settings are not the run's: the first departure, for the reader to refuse; null when the redo is verl's.
 */
export function redoneCorrectionGap(lr: ArrayLike<number>, M: ArrayLike<number>, B: number, T: number, s: RolloutCorrectionSettings, dumped: ArrayLike<number> | null): RedoneGap | null {
  const r = rolloutCorrection(lr, M, B, T, s);
  for (let i = 0; i < B * T; i++) if (M[i] !== 0 && r.mask[i] === 0) return { kind: 'rejected', b: Math.floor(i / T), t: i % T };
  if (!dumped || !r.weights) return null;
  const gapOf = (w: Float64Array): number => {
    for (let i = 0; i < B * T; i++) if (r.mask[i] !== 0 && !(Math.abs(dumped[i] - w[i]) <= WEIGHT_ATOL + WEIGHT_RTOL * Math.abs(w[i]))) return i;
    return -1;
  };
  const i = gapOf(r.weights);
  if (i < 0) return null;
  // The settings that would give them: the other level and normalisation, at the threshold or at the largest weight
  // the batch holds (a run truncating at another threshold).
  let largest = 0;
  for (let k = 0; k < B * T; k++) if (r.mask[k] !== 0) largest = Math.max(largest, dumped[k]);
  const tries: Partial<RolloutCorrectionSettings>[] = [];
  for (const rollout_is of ['token', 'sequence'] as const) {
    for (const rollout_is_batch_normalize of [false, true]) for (const rollout_is_threshold of [s.rollout_is_threshold, largest]) tries.push({ rollout_is, rollout_is_threshold, rollout_is_batch_normalize });
  }
  const matches = tries.find((t) => {
    const w = rolloutCorrection(lr, M, B, T, { ...s, ...t, rollout_rs: null }).weights!;
    return gapOf(w) < 0;
  });
  return { kind: 'weight', b: Math.floor(i / T), t: i % T, dumped: dumped[i], redone: r.weights[i], matches };
}
