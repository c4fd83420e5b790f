// The train–inference mismatch analysis, float64 on the host and pure: for one batch, where the sampler's
// and the trainer's log-probs of the same sampled tokens disagree (distributions of d and k1/k2/k3 per token
// and per sequence, the worst tokens, which token classes carry it, how it varies with the sampler's
// probability) and why (diagnoses.ts). One pass to gather the compared tokens into typed arrays, three sorts
// for exact quantiles, everything else linear — a 1,024 × 2,560 batch stays within the CPU budget
// `npm run bench` reports. The CLI (`grpo-studio mismatch`), the page's worker and the offline report call
// these same functions, so the three show the same numbers. Conventions: types.ts.
import type { GrpoBatch } from '../../io/batch.ts';
import { InputError } from '../../io/validate.ts';
import { compare, turnsOf, type Compared } from './compare.ts';
import { diagnose } from './diagnoses.ts';
import type { ClassRow, Diagnosis, Distribution, Histogram, LogpSide, MismatchInput, MismatchOptions, MismatchReport, ProbabilityBin, RowMismatch, Statistic, Summary, TopToken } from './types.ts';

/** What a side of `batch` holds per token, by field; the sampler is always the batch's. */
const FIELD_NAMES = { sampling_per_token_logps: 'the sampler', old_per_token_logps: 'the trainer' } as const;

/**
 * The analysis input of an imported batch: sampler = sampling_per_token_logps, trainer = opts.trainer (a
 * recompute with the loaded model) or old_per_token_logps (the dump's). Throws InputError naming the field
 * a side lacks — without both sides there is nothing to compare.
 */
export function mismatchInputOf(batch: GrpoBatch, opts: { trainer?: LogpSide; base?: LogpSide; special_ids?: ReadonlySet<number>; tokenText?: (id: number) => string; source?: string } = {}): MismatchInput {
  const side = (field: keyof typeof FIELD_NAMES): LogpSide => {
    const logps = batch[field];
    if (!logps) throw new InputError(`${opts.source ? `${opts.source}: ` : ''}field "${field}" is absent: the mismatch explorer needs ${FIELD_NAMES[field]}'s log-probs of the sampled tokens${field === 'old_per_token_logps' ? ' (or --model to recompute them)' : ''}`);
    if (logps.length !== batch.completion_ids.length) throw new InputError(`${opts.source ? `${opts.source}: ` : ''}field "${field}" has ${logps.length} rows, completion_ids ${batch.completion_ids.length}`);
    return { source: field, logps };
  };
  const sampler = side('sampling_per_token_logps');
  const trainer = opts.trainer ?? side('old_per_token_logps');
  const tool = batch.tool_mask;
  const loss_mask = batch.completion_mask.map((m, b) => Array.from(m, (v, t) => (v === 1 && (tool?.[b]?.[t] ?? 1) !== 0 ? 1 : 0)));
  return {
    completion_ids: batch.completion_ids,
    loss_mask,
    tool_mask: tool,
    eos_token_ids: batch.eos_token_ids,
    special_ids: opts.special_ids,
    sampler,
    trainer,
    base: opts.base,
    tokenText: opts.tokenText,
  };
}

/** Per token d = trainer − sampler (NaN where not compared), ragged like completion_ids: the heat overlay. */
export function logRatioRows(x: MismatchInput): number[][] {
  return x.completion_ids.map((ids, b) => {
    const m = x.loss_mask[b] ?? [];
    const out = new Array<number>(ids.length).fill(NaN);
    for (let p = 0; p < ids.length; p++) if (m[p] === 1) out[p] = (x.trainer.logps[b]?.[p] ?? NaN) - (x.sampler.logps[b]?.[p] ?? NaN);
    return out;
  });
}

const k3 = (d: number) => Math.expm1(d) - d;
const Q = [['p1', 0.01], ['p5', 0.05], ['p25', 0.25], ['p50', 0.5], ['p75', 0.75], ['p95', 0.95], ['p99', 0.99]] as const;

/** Linear-interpolated quantile of ascending `v` (numpy's default). */
function quantile(v: Float64Array, q: number): number {
  if (v.length === 0) return NaN;
  const h = (v.length - 1) * q;
  const i = Math.floor(h);
  return i + 1 < v.length ? v[i] + (h - i) * (v[i + 1] - v[i]) : v[i];
}

/** Summary and histogram of ascending values; symmetric: the histogram spans ±max(|p0.5|, |p99.5|). */
function distribution(sorted: Float64Array, bins: number, symmetric: boolean): Distribution {
  const n = sorted.length;
  let sum = 0;
  let sumAbs = 0;
  for (let i = 0; i < n; i++) {
    sum += sorted[i];
    sumAbs += Math.abs(sorted[i]);
  }
  const mean = n ? sum / n : NaN;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += (sorted[i] - mean) ** 2;
  const q = Object.fromEntries(Q.map(([k, p]) => [k, quantile(sorted, p)])) as Summary['q'];
  const summary: Summary = { n, mean, mean_abs: n ? sumAbs / n : NaN, std: n ? Math.sqrt(ss / n) : NaN, min: n ? sorted[0] : NaN, max: n ? sorted[n - 1] : NaN, q };
  let [lo, hi] = [quantile(sorted, 0.005), quantile(sorted, 0.995)];
  if (symmetric) [lo, hi] = [-Math.max(Math.abs(lo), Math.abs(hi)), Math.max(Math.abs(lo), Math.abs(hi))];
  if (!(hi > lo)) [lo, hi] = n ? [lo - 0.5, hi + 0.5] : [0, 1];
  const histogram: Histogram = { lo, hi, counts: new Array<number>(bins).fill(0), under: 0, over: 0 };
  const w = (hi - lo) / bins;
  for (let i = 0; i < n; i++) {
    const v = sorted[i];
    if (v < lo) histogram.under++;
    else if (v > hi) histogram.over++;
    else histogram.counts[Math.min(bins - 1, Math.floor((v - lo) / w))]++;
  }
  return { summary, histogram };
}

const ascending = (a: Float64Array) => Float64Array.from(a).sort();

/**
 * f over ascending d, ascending: f(0) = 0 and f grows with |d| on each side (|d|, d²/2, e^d − 1 − d), so the
 * negatives read from 0 outward and the positives are two ascending runs to merge — one sort serves every
 * statistic (a sort of 2.6M values is the analysis' largest cost).
 */
function mergeOutward(sd: Float64Array, f: (d: number) => number): Float64Array {
  const n = sd.length;
  let split = 0;
  while (split < n && sd[split] < 0) split++;
  const out = new Float64Array(n);
  let [i, j] = [split - 1, split];
  for (let k = 0; k < n; k++) {
    const a = i >= 0 ? f(sd[i]) : Infinity;
    const b = j < n ? f(sd[j]) : Infinity;
    out[k] = Math.min(a, b);
    if (a <= b) i--;
    else j++;
  }
  return out;
}

/** d, k1 = −d, k2 = d²/2, k3 = e^d − 1 − d of the given values, each as a distribution. */
function statistics(d: Float64Array, bins: number): Record<Statistic, Distribution> {
  const sd = ascending(d);
  const k1 = new Float64Array(sd.length);
  for (let i = 0; i < sd.length; i++) k1[i] = -sd[sd.length - 1 - i];
  return {
    log_ratio: distribution(sd, bins, true),
    k1: distribution(k1, bins, true),
    k2: distribution(mergeOutward(sd, (x) => 0.5 * x * x), bins, false),
    k3: distribution(mergeOutward(sd, k3), bins, false),
  };
}

function perRow(c: Compared, B: number): RowMismatch[] {
  const out: RowMismatch[] = [];
  for (let b = 0; b < B; b++) {
    let [sum, abs, max, k] = [0, 0, 0, 0];
    for (let i = c.rowStart[b]; i < c.rowStart[b + 1]; i++) {
      const v = c.d[i];
      sum += v;
      abs += Math.abs(v);
      max = Math.max(max, Math.abs(v));
      k += k3(v);
    }
    const n = c.rowStart[b + 1] - c.rowStart[b];
    out.push({ sample: b, tokens: n, mean: n ? sum / n : 0, mean_abs: n ? abs / n : 0, max_abs: max, sum, k3: n ? k / n : 0 });
  }
  return out;
}

/** The `top` compared tokens with the largest |d| (ties: earlier first). */
function topTokens(x: MismatchInput, c: Compared, top: number): TopToken[] {
  const idx: number[] = [];
  let floor = -1;
  for (let i = 0; i < c.n; i++) {
    const a = Math.abs(c.d[i]);
    if (idx.length === top && a <= floor) continue;
    let j = idx.length;
    while (j > 0 && Math.abs(c.d[idx[j - 1]]) < a) j--;
    idx.splice(j, 0, i);
    if (idx.length > top) idx.pop();
    floor = idx.length === top ? Math.abs(c.d[idx[idx.length - 1]]) : -1;
  }
  return idx.map((i) => {
    const [b, p] = [c.row[i], c.pos[i]];
    const ids = x.completion_ids[b];
    const t: TopToken = { sample: b, position: p, id: ids[p], sampler_logp: c.sampler[i], trainer_logp: c.trainer[i], log_ratio: c.d[i], turn: turnsOf(x.tool_mask?.[b], p + 1)[p] };
    if (x.tokenText) {
      t.text = x.tokenText(ids[p]);
      const around: string[] = [];
      for (let q = Math.max(0, p - 4); q < Math.min(ids.length, p + 3); q++) around.push(q === p ? `⟦${x.tokenText(ids[q])}⟧` : x.tokenText(ids[q]));
      t.context = around.join('');
    }
    return t;
  });
}

const POSITION_BINS = [0, 16, 64, 256, 1024, Infinity];
const LOW_PROB = 0.1;
const LOG_LOW_PROB = Math.log(LOW_PROB);
const AFTER_TOOL = 3;

/** Which tokens carry the mismatch: first completion token, special / EOS, right after a tool response, low sampler probability, position bins. */
function classes(x: MismatchInput, c: Compared): ClassRow[] {
  const eos = new Set(x.eos_token_ids);
  const fixed = [
    { id: 'first', label: 'first completion token' },
    { id: 'special', label: 'special tokens and EOS' },
    { id: 'after_tool', label: `first ${AFTER_TOOL} tokens after a tool response` },
    { id: 'low_prob', label: `sampler probability < ${LOW_PROB}` },
  ];
  const bins = POSITION_BINS.slice(0, -1).map((lo, k) => {
    const hi = POSITION_BINS[k + 1];
    return { id: `pos_${lo}_${hi === Infinity ? 'end' : hi}`, label: hi === Infinity ? `positions ${lo}+` : `positions ${lo}–${hi - 1}` };
  });
  const defs = [...fixed, ...bins];
  const [n, sum, abs, max] = [0, 1, 2, 3].map(() => new Float64Array(defs.length));
  const add = (k: number, v: number) => {
    n[k]++;
    sum[k] += v;
    abs[k] += Math.abs(v);
    max[k] = Math.max(max[k], Math.abs(v));
  };
  let total = 0;
  // One pass; a class test per token is a comparison, not a closure call (2.6M tokens).
  for (let i = 0; i < c.n; i++) {
    const b = c.row[i];
    const p = c.pos[i];
    const v = c.d[i];
    total += Math.abs(v);
    const id = x.completion_ids[b][p];
    if (p === 0) add(0, v);
    if (eos.has(id) || x.special_ids?.has(id)) add(1, v);
    const tool = x.tool_mask?.[b];
    if (tool) for (let q = Math.max(0, p - AFTER_TOOL); q < p; q++) if (tool[q] === 0) { add(2, v); break; }
    if (c.sampler[i] < LOG_LOW_PROB) add(3, v);
    let k = 0;
    while (p >= POSITION_BINS[k + 1]) k++;
    add(fixed.length + k, v);
  }
  return defs.map(({ id, label }, k) => ({ id, label, tokens: n[k], mean: n[k] ? sum[k] / n[k] : 0, mean_abs: n[k] ? abs[k] / n[k] : 0, max_abs: max[k], share: total > 0 ? abs[k] / total : 0 }));
}

const PROBABILITY_EDGES = [0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1];

/** The mismatch against the sampler's probability exp(sampler), in fixed bins. */
function byProbability(c: Compared): ProbabilityBin[] {
  const K = PROBABILITY_EDGES.length - 1;
  const [n, sum, abs] = [new Array<number>(K).fill(0), new Array<number>(K).fill(0), new Array<number>(K).fill(0)];
  for (let i = 0; i < c.n; i++) {
    const p = Math.exp(c.sampler[i]);
    let k = 0;
    while (k < K - 1 && p >= PROBABILITY_EDGES[k + 1]) k++;
    n[k]++;
    sum[k] += c.d[i];
    abs[k] += Math.abs(c.d[i]);
  }
  return n.map((m, k) => ({ lo: PROBABILITY_EDGES[k], hi: PROBABILITY_EDGES[k + 1], tokens: m, mean: m ? sum[k] / m : 0, mean_abs: m ? abs[k] / m : 0 }));
}

/** The whole report: distributions, rows, top tokens, classes, probability bins and diagnoses. */
export function analyseMismatch(x: MismatchInput, opts: MismatchOptions = {}): MismatchReport {
  const tolerance = opts.tolerance ?? 0.05;
  const bins = opts.bins ?? 41;
  const B = x.completion_ids.length;
  const c = compare(x);
  const per_row = perRow(c, B);
  const seqRows = per_row.filter((r) => r.tokens > 0);
  const seq = (f: (r: RowMismatch) => number) => Float64Array.from(seqRows, f);
  // Per-sequence k statistics are row means of the per-token ones (verl's seq_mean_*).
  const rowMean = (f: (d: number) => number) =>
    seq((r) => {
      let s = 0;
      for (let i = c.rowStart[r.sample]; i < c.rowStart[r.sample + 1]; i++) s += f(c.d[i]);
      return s / r.tokens;
    });
  const base = x.base ? compare(x, x.base) : null;
  const adapter = base ? { with_adapter_mean_abs: meanAbs(c.d), base_mean_abs: meanAbs(base.d) } : undefined;
  return {
    sampler: x.sampler.source,
    trainer: x.trainer.source,
    rows: B,
    tokens: c.n,
    nonfinite: c.nonfinite,
    tolerance,
    token: statistics(c.d, bins),
    sequence: {
      log_ratio: distribution(ascending(seq((r) => r.mean)), bins, true),
      k1: distribution(ascending(seq((r) => -r.mean)), bins, true),
      k2: distribution(ascending(rowMean((d) => 0.5 * d * d)), bins, false),
      k3: distribution(ascending(seq((r) => r.k3)), bins, false),
      log_ratio_sum: distribution(ascending(seq((r) => r.sum)), bins, true),
    },
    per_row,
    top: topTokens(x, c, opts.top ?? 20),
    classes: classes(x, c),
    by_probability: byProbability(c),
    diagnoses: diagnose({ input: x, compared: c, base, per_row, tolerance }),
    ...(adapter ? { adapter } : {}),
  };
}

/** The diagnoses alone (linear: no sorts), for the Doctor's logprob-mismatch finding. */
export function diagnoseMismatch(x: MismatchInput, opts: MismatchOptions = {}): Diagnosis[] {
  const c = compare(x);
  return diagnose({ input: x, compared: c, base: x.base ? compare(x, x.base) : null, per_row: perRow(c, x.completion_ids.length), tolerance: opts.tolerance ?? 0.05 });
}

function meanAbs(a: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += Math.abs(a[i]);
  return a.length ? s / a.length : 0;
}
