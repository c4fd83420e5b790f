// Per-token heat overlays: which per-token array a metric reads (the step's results, or the imported
// batch's own log-probs), its colour range, and the colour of a value. Pure, so the grid, the inspector
// and the tests agree on what a cell's number is.
import type { GrpoBatch } from '../../io/batch.ts';
import type { BatchDiff } from '../../io/batch_diff.ts';
import type { HeatMetric, RunResults } from '../../store/session.ts';
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS } from '../../store/vocabulary.ts';
import type { MismatchResult, PackedLogRatio, WhatIfResult } from '../../bridge/protocol.ts';
import type { StudioState } from '../../store/index.ts';
import { batchDiff, mismatchShown } from '../../store/derived.ts';

export interface HeatSource {
  metric: HeatMetric;
  /** Value at completion position j of sample b, or undefined where there is none. */
  get(b: number, j: number): number | undefined;
  lo: number;
  hi: number;
  /** Diverging around `center` (blue below, red above) or sequential (dark → bright). */
  center: number | null;
  /** The values' unit, where they have one (the legend says it). */
  unit?: string;
}

export const HEAT_LABELS: Record<HeatMetric, string> = {
  none: 'none',
  logp: 'log-prob (policy)',
  old_logp: 'old log-prob',
  ref_logp: 'ref log-prob',
  sampling_logp: 'sampling log-prob',
  entropy: 'entropy',
  kl: 'KL',
  ratio: 'ratio',
  loss: 'per-token loss',
  weight: 'aggregation weight',
  clip: 'clip flags',
  dlogp: 'Δ log-prob after step',
  whatif_dloss: 'what-if Δ per-token loss',
  whatif_dgrad: 'what-if Δ ∂loss/∂logp',
  whatif_dweight: 'what-if Δ aggregation weight',
  diff: 'diff vs pinned batch (1 = token or mask changed)',
  trainer_loss: 'trainer per-token loss',
  trainer_dlogp: 'trainer ∂loss/∂logp',
  effective_mask: 'effective loss mask (trainer)',
  mask_factor: 'what removed the token (trainer)',
  is_weight: 'importance-sampling weight (trainer)',
  log_ratio: 'log ratio (trainer − sampler)',
};

/** The mask_factor overlay's colour per MASK_FACTORS index (kept, completion, truncation, tool, entropy, off-policy, IS, rejection). */
export const FACTOR_COLORS = ['rgb(40,44,56)', 'rgb(20,24,38)', 'rgb(190,90,255)', 'rgb(70,200,160)', 'rgb(255,196,64)', 'rgb(255,80,80)', 'rgb(70,130,255)', 'rgb(255,140,40)'];

/** Per-token data that lives beside the run: a what-if result, a diff against a pinned batch, the mismatch explorer's log ratios. */
export interface HeatExtras {
  whatIf?: WhatIfResult | null;
  diff?: BatchDiff | null;
  mismatch?: MismatchResult | null;
}

type Accessor = (b: number, j: number) => number | undefined;

/** A (B, C) per-token array of the step, C = the assembled batch's padded completion width. */
function fromGrid(run: RunResults, a: ArrayLike<number> | null | undefined): Accessor | undefined {
  const p = run.assemble?.padded;
  return a && p ? (b, j) => (j < p.C && b < p.B ? a[b * p.C + j] : undefined) : undefined;
}

const fromRows = (rows: number[][] | undefined): Accessor | undefined => (rows ? (b, j) => rows[b]?.[j] : undefined);

/** The explorer's packed log ratios; NaN (a token not compared: masked, tool output, a side not finite) reads as no value, dimmed like padding, not magenta. */
function fromPacked(p: PackedLogRatio | null | undefined): Accessor | undefined {
  if (!p) return undefined;
  const { values, offsets } = p;
  return (b, j) => {
    if (b + 1 >= offsets.length || j >= offsets[b + 1] - offsets[b]) return undefined;
    const v = values[offsets[b] + j];
    return Number.isNaN(v) ? undefined : v;
  };
}

/** what-if − current of one per-token term, (B, C) like the step's arrays. */
function whatIfDelta(run: RunResults, w: WhatIfResult | null | undefined, term: 'per_token_loss' | 'dlogp' | 'token_weight'): Accessor | undefined {
  if (!w) return undefined;
  const [a, b] = [w.whatif.terms[term], w.current.terms[term]];
  return fromGrid(run, Float32Array.from(a, (x, i) => x - b[i]));
}

/** The accessor for a metric, or undefined when neither the run nor the batch (nor a what-if) has it. */
export function heatAccessor(metric: HeatMetric, batch: GrpoBatch | null, run: RunResults, extra: HeatExtras = {}): Accessor | undefined {
  switch (metric) {
    case 'whatif_dloss':
      return whatIfDelta(run, extra.whatIf, 'per_token_loss');
    case 'whatif_dgrad':
      return whatIfDelta(run, extra.whatIf, 'dlogp');
    case 'whatif_dweight':
      return whatIfDelta(run, extra.whatIf, 'token_weight');
    case 'diff':
      return diffAccessor(extra.diff);
    case 'log_ratio':
      return fromPacked(extra.mismatch?.log_ratio);
    case 'none':
      return undefined;
    case 'logp':
      return fromGrid(run, run.policy_forward?.per_token_logps);
    case 'old_logp':
      return fromGrid(run, run.loss?.old_per_token_logps) ?? fromRows(batch?.old_per_token_logps);
    case 'ref_logp':
      return fromGrid(run, run.reference_forward?.ref_per_token_logps) ?? fromRows(batch?.ref_per_token_logps);
    case 'sampling_logp':
      return fromRows(batch?.sampling_per_token_logps);
    case 'entropy':
      return fromGrid(run, run.policy_forward?.per_token_entropy);
    case 'kl':
      return fromGrid(run, run.loss?.per_token_kl);
    case 'ratio':
      return fromGrid(run, run.loss?.importance_ratio);
    case 'loss':
      return fromGrid(run, run.loss?.per_token_loss);
    case 'weight':
      return fromGrid(run, run.loss?.token_weight);
    case 'clip':
      return fromGrid(run, run.loss?.clip);
    case 'dlogp':
      return fromGrid(run, run.re_evaluate?.delta_per_token_logps);
    case 'trainer_loss':
      return fromGrid(run, run.loss?.trainer?.terms?.per_token_loss);
    case 'trainer_dlogp':
      return fromGrid(run, run.loss?.trainer?.terms?.dlogp);
    case 'effective_mask':
      return fromGrid(run, run.loss?.trainer?.terms?.effective_loss_mask);
    case 'mask_factor':
      return fromGrid(run, run.loss?.trainer?.terms?.removed_by);
    case 'is_weight':
      return fromGrid(run, run.loss?.trainer?.terms?.importance_sampling_ratio);
  }
}

/** Metrics with data for this batch / run. */
export function availableHeats(batch: GrpoBatch | null, run: RunResults, extra: HeatExtras = {}): HeatMetric[] {
  return (Object.keys(HEAT_LABELS) as HeatMetric[]).filter((m) => m === 'none' || heatAccessor(m, batch, run, extra) !== undefined);
}

/** 1 where a completion token or its mask entry differs from the pinned batch, 0 elsewhere. */
function diffAccessor(diff: BatchDiff | null | undefined): Accessor | undefined {
  if (!diff) return undefined;
  const changed = new Map(diff.changed.map((r) => [r.sample, new Set([...r.completion, ...r.completion_mask])]));
  return (b, j) => (changed.get(b)?.has(j) ? 1 : 0);
}

const CENTERED: Partial<Record<HeatMetric, number>> = { ratio: 1, is_weight: 1, trainer_loss: 0, trainer_dlogp: 0, loss: 0, dlogp: 0, whatif_dloss: 0, whatif_dgrad: 0, whatif_dweight: 0 };

/**
 * The heat source over the cells that count (completion_mask = 1): range from those values only, so
 * padding with junk values does not wash out the scale.
 */
export function heatSource(metric: HeatMetric, batch: GrpoBatch | null, run: RunResults, extra: HeatExtras = {}): HeatSource | null {
  const get = heatAccessor(metric, batch, run, extra);
  if (!get || !batch) return null;
  const report = metric === 'log_ratio' ? extra.mismatch?.report : null;
  if (report) {
    // Symmetric around 0 over the compared tokens, from the worker's summary: no pass over a 2.6M-token batch here.
    const { min, max } = report.token.log_ratio.summary;
    const m = Math.max(Math.abs(min), Math.abs(max), 1e-12);
    return { metric, get, lo: -m, hi: m, center: 0, unit: 'nats' };
  }
  let lo = Infinity;
  let hi = -Infinity;
  batch.completion_ids.forEach((ids, b) => {
    for (let j = 0; j < ids.length; j++) {
      if (batch.completion_mask[b]?.[j] !== 1) continue;
      const v = get(b, j);
      if (v === undefined || !Number.isFinite(v)) continue;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
  });
  if (lo > hi) [lo, hi] = [0, 1];
  const center = metric in CENTERED ? CENTERED[metric]! : null;
  if (center !== null) {
    const m = Math.max(Math.abs(lo - center), Math.abs(hi - center), 1e-12);
    [lo, hi] = [center - m, center + m];
  }
  if (metric === 'logp' || metric.endsWith('_logp')) hi = Math.max(hi, 0);
  return { metric, get, lo, hi, center };
}

function mix(a: [number, number, number], b: [number, number, number], t: number): string {
  const c = a.map((x, i) => Math.round(x + (b[i] - x) * t));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

const DARK: [number, number, number] = [20, 24, 38];
const HOT: [number, number, number] = [255, 196, 64];
const BLUE: [number, number, number] = [70, 130, 255];
const RED: [number, number, number] = [255, 80, 80];
const MID: [number, number, number] = [40, 44, 56];

/** The heat the grid shows now, as rows over each completion (for the saved report), or null. */
export function shownHeat(s: Pick<StudioState, 'heat' | 'batch' | 'run' | 'whatIf' | 'diffBase' | 'batchOrigin' | 'imported' | 'mismatch'>): { label: string; rows: number[][] } | null {
  const src = s.batch ? heatSource(s.heat, s.batch, s.run, { whatIf: s.whatIf, diff: batchDiff(s), mismatch: mismatchShown(s)?.result }) : null;
  return src && s.batch ? { label: HEAT_LABELS[src.metric], rows: s.batch.completion_ids.map((ids, b) => ids.map((_, j) => src.get(b, j) ?? NaN)) } : null;
}

/** The colour of value v. Non-finite values are magenta: they must never look like a normal number. */
export function heatColor(src: HeatSource, v: number): string {
  if (src.metric === 'mask_factor') return FACTOR_COLORS[v] ?? 'rgb(255,0,255)';
  if (src.metric === 'clip') return v & CLIP_LOW ? 'rgb(70,130,255)' : v & CLIP_HIGH ? 'rgb(255,140,40)' : v & DELTA_BINDS ? 'rgb(190,90,255)' : 'rgb(40,44,56)';
  if (!Number.isFinite(v)) return 'rgb(255,0,255)';
  const t = Math.min(1, Math.max(0, (v - src.lo) / (src.hi - src.lo || 1)));
  if (src.center === null) return mix(DARK, HOT, t);
  return t < 0.5 ? mix(BLUE, MID, t * 2) : mix(MID, RED, (t - 0.5) * 2);
}

/** Text colour readable on heatColor(src, v): dark on the bright end of the sequential scale. */
export function heatTextColor(src: HeatSource, v: number): string {
  if (src.center !== null || src.metric === 'clip' || src.metric === 'mask_factor' || !Number.isFinite(v)) return '#e6edf3';
  return (v - src.lo) / (src.hi - src.lo || 1) > 0.55 ? '#0d1117' : '#e6edf3';
}
