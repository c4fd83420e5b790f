// Why the sampler and the trainer disagree: one table of diagnoses, each a test on the compared tokens
// (analysis.ts) with its formula, its evidence in numbers and the rows it explains. They run in table
// order and a row explained by one is not offered to the next: a shifted or diverging row would otherwise
// also read as a stale policy. Only mismatched rows are candidates (mean |d| > tolerance, at least
// MIN_TOKENS compared tokens), so a clean batch — kernels and bf16 noise below the tolerance — gets none.
// docs/mismatch.md states each test with its thresholds. d = trainer − sampler (types.ts).
import { turnsOf, type Compared } from './compare.ts';
import type { Diagnosis, DiagnosisId, DiagnosisRow, MismatchInput, RowMismatch } from './types.ts';

export interface DiagnosisContext {
  input: MismatchInput;
  compared: Compared;
  /** The sampler against the trainer side recomputed without the adapter, when there is one. */
  base: Compared | null;
  per_row: RowMismatch[];
  tolerance: number;
}

/** What a diagnosis' test returns: its evidence and rows, or null when it does not fire. */
type Test = (ctx: DiagnosisContext, candidates: number[]) => { evidence: string; rows: DiagnosisRow[] } | null;

interface DiagnosisSpec {
  id: DiagnosisId;
  title: string;
  /** The test, as docs/mismatch.md states it. */
  formula: string;
  fix: string;
  test: Test;
}

const MIN_TOKENS = 3;
const MIN_KEPT = 0.05;
/** Tokens a temperature fit needs before its R² means anything. */
const MIN_FIT = 30;
const fmt = (x: number) => (Math.abs(x) >= 1e-3 || x === 0 ? Number(x.toPrecision(3)).toString() : x.toExponential(2));

/** Mean |trainer[p + s] − sampler[p]| over positions where both tokens are compared (NaN: fewer than MIN_TOKENS pairs). */
function shiftedMeanAbs(c: Compared, b: number, s: number): number {
  const i0 = c.rowStart[b];
  const i1 = c.rowStart[b + 1];
  let [sum, n] = [0, 0];
  // The compared tokens of a row are in position order: a two-pointer walk pairs p with p + s.
  let j = i0;
  for (let i = i0; i < i1; i++) {
    const want = c.pos[i] + s;
    while (j < i1 && c.pos[j] < want) j++;
    if (j < i1 && c.pos[j] === want) {
      sum += Math.abs(c.trainer[j] - c.sampler[i]);
      n++;
    }
  }
  return n >= MIN_TOKENS ? sum / n : NaN;
}

const adapterMissing: Test = ({ base, per_row, tolerance }, candidates) => {
  if (!base) return null;
  const rows: DiagnosisRow[] = [];
  let [withSum, baseSum, n] = [0, 0, 0];
  for (const b of candidates) {
    let [o, k] = [0, 0];
    for (let i = base.rowStart[b]; i < base.rowStart[b + 1]; i++) {
      o += Math.abs(base.d[i]);
      k++;
    }
    if (k < MIN_TOKENS) continue;
    const w = per_row[b].mean_abs;
    const baseMean = o / k;
    if (baseMean <= Math.min(tolerance, w / 4)) {
      rows.push({ sample: b, value: baseMean });
      [withSum, baseSum, n] = [withSum + w * per_row[b].tokens, baseSum + o, n + per_row[b].tokens];
    }
  }
  return rows.length ? { evidence: `on ${rows.length} mismatched rows the sampler matches the base model (mean |sampler − base| = ${fmt(baseSum / n)}) and not the policy with its LoRA adapter (mean |d| = ${fmt(withSum / n)})`, rows } : null;
};

const offByOne: Test = ({ compared: c, per_row, tolerance }, candidates) => {
  const rows: DiagnosisRow[] = [];
  let [before, after] = [0, 0];
  for (const b of candidates) {
    const a = per_row[b].mean_abs;
    const [plus, minus] = [shiftedMeanAbs(c, b, 1), shiftedMeanAbs(c, b, -1)];
    const s = !(minus < plus) ? 1 : -1;
    const best = s === 1 ? plus : minus;
    // A shift must explain the gap down to the noise, not just shave it: confident tokens (log-probs near 0) agree at any shift.
    if (best < a / 4 && best <= tolerance) {
      rows.push({ sample: b, value: s });
      [before, after] = [before + a, after + best];
    }
  }
  if (!rows.length) return null;
  const dirs = [...new Set(rows.map((r) => r.value))].map((s) => `sampler[t] ≈ trainer[t ${s > 0 ? '+' : '−'} 1]`).join(', ');
  return { evidence: `${dirs}: mean |d| ${fmt(before / rows.length)} → ${fmt(after / rows.length)} after a shift by one position, on ${rows.length} rows`, rows };
};

const divergence: Test = ({ input, compared: c, tolerance }, candidates) => {
  const rows: DiagnosisRow[] = [];
  const words: string[] = [];
  for (const b of candidates) {
    const i0 = c.rowStart[b];
    const n = c.rowStart[b + 1] - i0;
    if (n < 2 * MIN_TOKENS) continue;
    // Suffix counts of tokens beyond the tolerance and suffix sums of |d|, then the first k whose prefix matches
    // and whose suffix stays off.
    const off = new Int32Array(n + 1);
    const abs = new Float64Array(n + 1);
    for (let k = n - 1; k >= 0; k--) {
      off[k] = off[k + 1] + (Math.abs(c.d[i0 + k]) > tolerance ? 1 : 0);
      abs[k] = abs[k + 1] + Math.abs(c.d[i0 + k]);
    }
    const minPrefix = Math.max(MIN_TOKENS, Math.ceil(0.1 * n));
    for (let k = minPrefix; k <= n - 2; k++) {
      if (!(Math.abs(c.d[i0 + k]) > tolerance)) continue;
      const prefixMean = (abs[0] - abs[k]) / k;
      if (prefixMean > tolerance) break; // the prefix only grows worse from here
      const m = n - k;
      if (off[k] >= 0.8 * m && abs[k] / m > 4 * tolerance) {
        const position = c.pos[i0 + k];
        const turn = turnsOf(input.tool_mask?.[b], position + 1)[position];
        rows.push({ sample: b, position, turn, value: abs[k] / m });
        const text = input.tokenText ? ` ${JSON.stringify(input.tokenText(input.completion_ids[b][position]))}` : '';
        if (words.length < 4) words.push(`sample ${b} from position ${position}${text} (turn ${turn}: mean |d| ${fmt(prefixMean)} before, ${fmt(abs[k] / m)} after)`);
        break;
      }
    }
  }
  return rows.length ? { evidence: `the sides agree, then part from one token on and stay apart: ${words.join('; ')}${rows.length > words.length ? '; …' : ''}`, rows } : null;
};

/** Least squares d ≈ κ·trainer + c over the candidates' tokens, with R². */
function fit(c: Compared, rows: number[]): { kappa: number; c0: number; r2: number; n: number } {
  let [n, sx, sy, sxx, sxy, syy] = [0, 0, 0, 0, 0, 0];
  for (const b of rows) {
    for (let i = c.rowStart[b]; i < c.rowStart[b + 1]; i++) {
      const x = c.trainer[i];
      const y = c.d[i];
      n++;
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
      syy += y * y;
    }
  }
  const vx = sxx - (sx * sx) / n;
  const vy = syy - (sy * sy) / n;
  const cov = sxy - (sx * sy) / n;
  const kappa = vx > 0 ? cov / vx : 0;
  return { kappa, c0: (sy - kappa * sx) / n, r2: vx > 0 && vy > 0 ? (cov * cov) / (vx * vy) : 0, n };
}

const temperature: Test = ({ compared: c, per_row }, candidates) => {
  const rows = candidates.filter((b) => per_row[b].tokens >= MIN_TOKENS);
  if (rows.length < 2) return null;
  const { kappa, c0, r2, n } = fit(c, rows);
  if (!(n >= MIN_FIT && r2 >= 0.5 && Math.abs(kappa) >= 0.03)) return null;
  // sampler ≈ (1 − κ)·trainer − c: log-probs scaled as by logits / τ on one side, τ_sampler / τ_trainer ≈ 1 / (1 − κ).
  return {
    evidence: `d ≈ ${fmt(kappa)}·trainer_logp ${c0 < 0 ? '−' : '+'} ${fmt(Math.abs(c0))} (R² = ${fmt(r2)} over ${n} tokens): the sampler's log-probs scale by ${fmt(1 - kappa)}, as logits divided by a temperature ratio τ_sampler / τ_trainer ≈ ${fmt(1 / (1 - kappa))}`,
    rows: rows.map((b) => ({ sample: b, value: per_row[b].mean })),
  };
};

const renormalised: Test = ({ compared: c, per_row, tolerance }, candidates) => {
  const rows: DiagnosisRow[] = [];
  for (const b of candidates) {
    const r = per_row[b];
    // A kept mass below MIN_KEPT is no top-p / top-k setting anyone trains with: a gap that large is another bug.
    if (!(r.mean < -tolerance && r.mean >= Math.log(MIN_KEPT))) continue;
    let [above, ss] = [0, 0];
    for (let i = c.rowStart[b]; i < c.rowStart[b + 1]; i++) {
      if (c.d[i] > tolerance) above++;
      ss += (c.d[i] - r.mean) ** 2;
    }
    // One-sided (the sampler above the trainer on ≥ 95% of tokens) and nearly constant: log p_s = log p_t − log S.
    if (above <= 0.05 * r.tokens && Math.sqrt(ss / r.tokens) <= 0.5 * Math.abs(r.mean)) rows.push({ sample: b, value: Math.exp(r.mean) });
  }
  if (!rows.length) return null;
  const S = rows.map((r) => r.value).sort((a, b) => a - b)[Math.floor(rows.length / 2)];
  return { evidence: `on ${rows.length} rows the sampler's log-probs sit log(1/S) above the trainer's on ≥ 95% of tokens (median kept mass S = exp(mean d) = ${fmt(S)}): the sampler renormalised over a top-p / top-k set`, rows };
};

const stale: Test = ({ compared: c, per_row }, candidates) => {
  const withTokens = per_row.filter((r) => r.tokens >= MIN_TOKENS).length;
  const rows = candidates.filter((b) => per_row[b].tokens >= MIN_TOKENS);
  if (rows.length === 0 || rows.length < 0.5 * withTokens) return null;
  let [pos, n, abs] = [0, 0, 0];
  for (const b of rows) {
    for (let i = c.rowStart[b]; i < c.rowStart[b + 1]; i++) {
      if (c.d[i] > 0) pos++;
      n++;
      abs += Math.abs(c.d[i]);
    }
  }
  return {
    evidence: `${rows.length} of ${withTokens} rows are off (mean |d| = ${fmt(abs / n)}), in both directions (d > 0 on ${fmt((100 * pos) / n)}% of tokens), from the first token, with no shift, temperature or renormalisation pattern: the sampler's weights differ from the trainer's`,
    rows: rows.map((b) => ({ sample: b, value: per_row[b].mean_abs })),
  };
};

/** The diagnoses, in the order they claim rows. */
export const DIAGNOSES: readonly DiagnosisSpec[] = [
  {
    id: 'adapter-missing-on-sampler',
    title: 'The LoRA adapter never reached the sampler',
    formula: 'per mismatched row: mean |sampler − base| ≤ min(tolerance, mean |d| / 4), where base is the trainer side recomputed with the adapter disabled (needs --model and --adapter)',
    fix: 'Sync the adapter into the inference engine after each update (vLLM: load the LoRA or merge it before weight sync), or sample with the merged weights.',
    test: adapterMissing,
  },
  {
    id: 'off-by-one',
    title: 'The two sides are aligned one position apart',
    formula: 'per mismatched row: min over s ∈ {+1, −1} of mean_p |trainer[p + s] − sampler[p]| < min(mean |d| / 4, tolerance), over ≥ 3 pairs',
    fix: 'Align log-probs with the tokens they score: logits[:, P−1 : L−1] score completion_ids = input_ids[:, P:] (drop the last logit, not the first).',
    test: offByOne,
  },
  {
    id: 'divergence',
    title: 'The sides agree, then part from one token on',
    formula: 'per mismatched row: the first compared token k ≥ max(3, 10% of the row) with |d_k| > tolerance such that mean |d| over tokens < k ≤ tolerance, ≥ 80% of tokens ≥ k have |d| > tolerance and their mean |d| > 4·tolerance',
    fix: 'Compare the two token streams from the named token on: a re-tokenized turn, a tool response or template piece the sampler saw differently, a truncated or rebuilt context.',
    test: divergence,
  },
  {
    id: 'temperature-one-side',
    title: 'Temperature applied on one side only',
    formula: 'least squares d ≈ κ·trainer_logp + c over the mismatched rows (≥ 30 tokens): R² ≥ 0.5 and |κ| ≥ 0.03 (log softmax(z / τ) scales log-probs by about 1/τ)',
    fix: 'Divide the logits by the same temperature on both sides (TRL: temperature in GRPOConfig is applied to the training logits; verl: rollout.temperature; the sampler must return log-probs of the tempered distribution).',
    test: temperature,
  },
  {
    id: 'sampler-renormalised',
    title: 'The sampler renormalised over a top-p / top-k set',
    formula: 'per mismatched row: log 0.05 ≤ mean d < −tolerance, d ≤ tolerance on ≥ 95% of its tokens and std d ≤ |mean d| / 2 (log p_sampler = log p_trainer − log S, S ≤ 1 the kept mass)',
    fix: 'Have the sampler return log-probs of the full distribution (vLLM: logprobs-mode processed vs raw), or sample with top_p = 1, top_k = −1 / 0 for training.',
    test: renormalised,
  },
  {
    id: 'stale-policy',
    title: 'A stale policy: the sampler holds other weights',
    formula: 'the mismatched rows no earlier diagnosis explains are at least half of the rows (with ≥ 3 compared tokens)',
    fix: 'Check that the weights are synced to the sampler every step (and which step it last received); an async / off-policy setup needs an importance-sampling correction.',
    test: stale,
  },
];

/** Runs the table: candidates are the mismatched rows, each claimed by the first diagnosis that names it. */
export function diagnose(ctx: DiagnosisContext): Diagnosis[] {
  let candidates = ctx.per_row.filter((r) => r.tokens >= MIN_TOKENS && r.mean_abs > ctx.tolerance).map((r) => r.sample);
  const out: Diagnosis[] = [];
  for (const spec of DIAGNOSES) {
    if (!candidates.length) break;
    const hit = spec.test(ctx, candidates);
    if (!hit) continue;
    out.push({ id: spec.id, title: spec.title, evidence: hit.evidence, fix: spec.fix, rows: hit.rows });
    const claimed = new Set(hit.rows.map((r) => r.sample));
    candidates = candidates.filter((b) => !claimed.has(b));
  }
  return out;
}
