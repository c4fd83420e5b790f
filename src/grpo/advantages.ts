// Group-relative advantages, as TRL's GRPOTrainer computes them (and verl's variant):
//   r_i = nansum_f(rewards_per_func[i, f] · reward_weights[f])
//   A_i = r_i − mean_group(r), divided by (std + ε) unless scale_rewards = "none"
// std is Bessel-corrected, per group ("group") or over the whole batch ("batch"). TRL: ε = 1e-4; verl:
// ε = 1e-6 and a single-sample group gets mean 0, std 1 (TRL: std 0, so A = 0). A group whose std is ~0 (TRL: isclose(std, 0))
// gets A = 0 everywhere, so it contributes nothing but the KL term to the loss — reported per group.
// Everything is float64 so the result is a reference for the float32 values a trainer wrote.
import type { ScaleRewards } from '../io/batch.ts';

export type AdvantageEstimator = 'trl' | 'verl';

export interface AdvantageOptions {
  num_generations: number;
  scale_rewards?: ScaleRewards; // default "group"
  estimator?: AdvantageEstimator; // default "trl"
  /** Rows of each group (from group labels); default: groups of num_generations consecutive rows. */
  groups?: readonly (readonly number[])[];
}

export interface GroupStats {
  group: number;
  mean: number;
  /** Bessel std of the group's rewards (what TRL logs as reward_std). */
  std: number;
  zero_std: boolean;
}

export interface AdvantageResult {
  advantages: Float64Array; // (B)
  groups: GroupStats[]; // (B / G)
  /** The std the advantages were divided by under "batch" scaling. */
  batch_std?: number;
  epsilon: number;
}

/** ε added to the std: TRL 1e-4, verl 1e-6. */
const ADVANTAGE_EPSILON: Record<AdvantageEstimator, number> = { trl: 1e-4, verl: 1e-6 };

/** torch.isclose(std, 0) with its default atol, which is how TRL counts zero-std groups. */
const ZERO_STD_ATOL = 1e-8;

/** TRL's combined reward: Σ_f rewards_per_func[i, f] · w_f, NaN terms skipped (nansum; all NaN → 0). */
export function combineRewards(rewardsPerFunc: readonly (readonly number[])[], weights?: readonly number[]): Float64Array {
  const out = new Float64Array(rewardsPerFunc.length); // (B)
  rewardsPerFunc.forEach((row, i) => {
    let s = 0;
    row.forEach((r, f) => {
      const term = r * (weights?.[f] ?? 1);
      if (!Number.isNaN(term)) s += term;
    });
    out[i] = s;
  });
  return out;
}

function meanStd(xs: ArrayLike<number>, rows: readonly number[]): { mean: number; std: number } {
  const n = rows.length;
  let sum = 0;
  for (const i of rows) sum += xs[i];
  const mean = sum / n;
  let ss = 0;
  for (const i of rows) ss += (xs[i] - mean) ** 2;
  return { mean, std: n > 1 ? Math.sqrt(ss / (n - 1)) : 0 }; // Bessel; one sample: 0, as TRL
}

const range = (lo: number, hi: number) => Array.from({ length: hi - lo }, (_, k) => lo + k);

/**
 * The rows of each group: from group labels (groups in order of first appearance, rows in batch order),
 * else ⌊i / G⌋. `complete` says whether the group holds all G of its rows (a rank's slice may not).
 */
export function groupRows(B: number, G: number, groupIds?: readonly number[]): { rows: number[][]; complete: boolean[] } {
  const rows: number[][] = [];
  if (groupIds) {
    const at = new Map<number, number>();
    groupIds.forEach((g, i) => {
      if (!at.has(g)) at.set(g, rows.push([]) - 1);
      rows[at.get(g)!].push(i);
    });
  } else {
    for (let g = 0; g * G < B; g++) rows.push(range(g * G, Math.min(B, (g + 1) * G)));
  }
  return { rows, complete: rows.map((r) => r.length === G) };
}

/**
 * Advantages for B = rewards.length samples, in groups of num_generations consecutive rows or the given
 * `groups`. Throws RangeError if B is not a multiple of G without explicit groups (the Doctor reports that
 * case before calling).
 */
export function computeAdvantages(rewards: ArrayLike<number>, opts: AdvantageOptions): AdvantageResult {
  const G = opts.num_generations;
  const B = rewards.length;
  if (!opts.groups && (G < 1 || B % G !== 0)) throw new RangeError(`computeAdvantages: ${B} rewards is not a multiple of num_generations = ${G}`);
  const rowsOf = opts.groups ?? groupRows(B, G).rows;
  const scale = opts.scale_rewards ?? 'group';
  const estimator = opts.estimator ?? 'trl';
  const eps = ADVANTAGE_EPSILON[estimator];
  const advantages = new Float64Array(B);
  const groups: GroupStats[] = [];
  const groupOf = new Int32Array(B);
  rowsOf.forEach((rows, g) => {
    let { mean, std } = meanStd(rewards, rows);
    if (estimator === 'verl' && rows.length === 1) [mean, std] = [0, 1];
    groups.push({ group: g, mean, std, zero_std: Math.abs(std) <= ZERO_STD_ATOL });
    for (const i of rows) {
      advantages[i] = rewards[i] - mean;
      groupOf[i] = g;
    }
  });
  let batch_std: number | undefined;
  if (scale !== 'none') {
    if (scale === 'batch') batch_std = meanStd(rewards, range(0, B)).std;
    for (let i = 0; i < B; i++) advantages[i] /= (batch_std ?? groups[groupOf[i]].std) + eps;
  }
  return { advantages, groups, batch_std, epsilon: eps };
}
