// Per-token heat overlays: which per-token array a metric reads (the step's results, or the imported
// batch's own log-probs), its unit and centre, its colour scale under the user's settings (the arithmetic is
// src/view/heat_scale.ts), and the colour of a value. Pure, so the grid, the inspector and the tests agree on
// what a cell's number is.
import type { GrpoBatch } from '../../io/batch.ts';
import type { BatchDiff } from '../../io/batch_diff.ts';
import type { HeatMetric, RunResults } from '../../store/session.ts';
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS } from '../../store/vocabulary.ts';
import type { MismatchResult, PackedLogRatio, WhatIfResult, WhatIfSide } from '../../bridge/protocol.ts';
import type { StudioState } from '../../store/index.ts';
import { batchDiff, mismatchShown, shownRun } from '../../store/derived.ts';
import { DEFAULT_SCALE, computeScale, resolvedMode, scalePosition, type MetricKind, type Scale, type ScaleSettings } from '../../view/heat_scale.ts';

export interface HeatSource {
  metric: HeatMetric;
  /** Value at completion position j of sample b, or undefined where there is none. */
  get(b: number, j: number): number | undefined;
  /** The range and ramp the values are shown over (src/view/heat_scale.ts). */
  scale: Scale;
  /** The values' unit, where they have one (the legend says it). */
  unit?: string;
}

/**
 * Every heat overlay: its menu label, and what its scale needs — the centre diverging colours split at (0 for
 * differences, 1 for ratios), whether it is positive (a log scale is offered), a bound log-probs never pass,
 * and the unit (nats for log-probs, their differences, entropy and KL; none for ratios, losses and weights).
 */
export const HEATS: Record<HeatMetric, { label: string; unit?: string } & Partial<MetricKind>> = {
  none: { label: 'none' },
  logp: { label: 'log-prob (policy)', unit: 'nats', ceiling: 0 },
  old_logp: { label: 'old log-prob', unit: 'nats', ceiling: 0 },
  ref_logp: { label: 'ref log-prob', unit: 'nats', ceiling: 0 },
  sampling_logp: { label: 'sampling log-prob', unit: 'nats', ceiling: 0 },
  entropy: { label: 'entropy', unit: 'nats', positive: true },
  kl: { label: 'KL', unit: 'nats', positive: true },
  ratio: { label: 'ratio', center: 1, positive: true },
  loss: { label: 'per-token loss', center: 0 },
  weight: { label: 'aggregation weight', positive: true },
  clip: { label: 'clip flags' },
  dlogp: { label: 'Δ log-prob after step', unit: 'nats', center: 0 },
  whatif_dloss: { label: 'what-if Δ per-token loss', center: 0 },
  whatif_dgrad: { label: 'what-if Δ ∂loss/∂logp', center: 0 },
  whatif_dweight: { label: 'what-if Δ aggregation weight', center: 0 },
  diff: { label: 'diff vs pinned batch (1 = token or mask changed)' },
  trainer_loss: { label: 'trainer per-token loss', center: 0 },
  trainer_dlogp: { label: 'trainer ∂loss/∂logp', center: 0 },
  effective_mask: { label: 'effective loss mask (trainer)' },
  mask_factor: { label: 'what removed the token (trainer)' },
  is_weight: { label: 'importance-sampling weight (trainer)', center: 1, positive: true },
  log_ratio: { label: 'log ratio (trainer − sampler)', unit: 'nats', center: 0 },
};

/** The scale's view of a metric. */
export const metricKind = (m: HeatMetric): MetricKind => ({ center: HEATS[m].center ?? null, positive: HEATS[m].positive ?? false, ceiling: HEATS[m].ceiling });

/** Categorical overlays: colours by flag or factor, no range (no scale controls). */
export const CATEGORICAL: ReadonlySet<HeatMetric> = new Set(['clip', 'mask_factor', 'diff', 'effective_mask']);

/**
 * The mask_factor overlay's colour per MASK_FACTORS index (kept, completion, truncation, tool, entropy, off-policy,
 * IS, rejection). "completion" (outside the completion mask) is a mid grey-blue: it was rgb(20,24,38), which
 * vanished against the panel (tests/ui/heat_scale.test.ts checks every removing factor's contrast).
 */
export const FACTOR_COLORS = ['rgb(40,44,56)', 'rgb(120,132,160)', 'rgb(190,90,255)', 'rgb(70,200,160)', 'rgb(255,196,64)', 'rgb(255,80,80)', 'rgb(70,130,255)', 'rgb(255,140,40)'];

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

/** The what-if's per-token terms the token inspector shows, by label: its weight, loss and gradient. */
export const WHATIF_TOKEN_TERMS = { weight: 'token_weight', loss: 'per_token_loss', '∂loss/∂logp': 'dlogp' } as const;

export interface WhatIfTokenTerm {
  term: keyof typeof WHATIF_TOKEN_TERMS | 'loss contribution';
  current: number | undefined; // under the update's settings
  whatif: number | undefined; // under the what-if's
}

/**
 * One completion token's terms on both sides of a what-if (null without one): the update's settings
 * (`current`, recomputed from the same log-probs) beside the what-if's, and the loss contribution
 * (loss × weight) on each side — what the inspector shows next to the update's own values.
 */
export function whatIfToken(run: RunResults, w: WhatIfResult | null | undefined, b: number, j: number): WhatIfTokenTerm[] | null {
  if (!w) return null;
  const at = (side: WhatIfSide, k: keyof typeof WHATIF_TOKEN_TERMS) => fromGrid(run, side.terms[WHATIF_TOKEN_TERMS[k]])?.(b, j);
  const contribution = (side: WhatIfSide) => {
    const [l, wt] = [at(side, 'loss'), at(side, 'weight')];
    return l === undefined || wt === undefined ? undefined : l * wt;
  };
  const terms = (Object.keys(WHATIF_TOKEN_TERMS) as (keyof typeof WHATIF_TOKEN_TERMS)[]).map((term) => ({ term, current: at(w.current, term), whatif: at(w.whatif, term) }));
  return [...terms, { term: 'loss contribution', current: contribution(w.current), whatif: contribution(w.whatif) }];
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
  return (Object.keys(HEATS) as HeatMetric[]).filter((m) => m === 'none' || heatAccessor(m, batch, run, extra) !== undefined);
}

/** 1 where a completion token or its mask entry differs from the pinned batch, 0 elsewhere. */
function diffAccessor(diff: BatchDiff | null | undefined): Accessor | undefined {
  if (!diff) return undefined;
  const changed = new Map(diff.changed.map((r) => [r.sample, new Set([...r.completion, ...r.completion_mask])]));
  return (b, j) => (changed.get(b)?.has(j) ? 1 : 0);
}

/** Values a percentile range is computed from, at most: a larger batch is sampled with an even stride (a 2.6M-token batch sorts 262,144 values). */
const SCALE_SAMPLES = 1 << 18;

/**
 * The heat source over the cells that count (completion_mask = 1): its scale from those values only, so
 * padding with junk values does not wash it out; `settings`: the user's scale controls for this metric. A
 * percentile range reads an even sample of at most SCALE_SAMPLES values; min–max reads every value, exactly,
 * keeping only the extremes (the smallest positive one too, for a log scale).
 */
export function heatSource(metric: HeatMetric, batch: GrpoBatch | null, run: RunResults, extra: HeatExtras = {}, settings: ScaleSettings = DEFAULT_SCALE): HeatSource | null {
  const get = heatAccessor(metric, batch, run, extra);
  if (!get || !batch) return null;
  const kind = metricKind(metric);
  const percentile = resolvedMode(settings, kind) === 'percentile';
  let total = 0;
  for (const ids of batch.completion_ids) total += ids.length;
  const stride = percentile ? Math.max(1, Math.ceil(total / SCALE_SAMPLES)) : 1;
  const values: number[] = [];
  let lo = Infinity;
  let hi = -Infinity;
  let loPositive = Infinity;
  let k = 0;
  batch.completion_ids.forEach((ids, b) => {
    for (let j = (stride - (k % stride)) % stride; j < ids.length; j += stride) {
      if (batch.completion_mask[b]?.[j] !== 1) continue;
      const v = get(b, j);
      if (v === undefined || !Number.isFinite(v)) continue;
      if (percentile) {
        values.push(v);
        continue;
      }
      if (v < lo) lo = v;
      if (v > hi) hi = v;
      if (v > 0 && v < loPositive) loPositive = v;
    }
    k += ids.length;
  });
  const extremes = [lo, hi, loPositive].filter(Number.isFinite);
  return { metric, get, scale: computeScale(percentile ? values : extremes, kind, settings), unit: HEATS[metric].unit };
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
export function shownHeat(s: Pick<StudioState, 'heat' | 'batch' | 'run' | 'pass' | 'whatIf' | 'diffBase' | 'batchOrigin' | 'imported' | 'mismatch'>): { label: string; rows: number[][] } | null {
  const src = s.batch ? heatSource(s.heat, s.batch, shownRun(s), { whatIf: s.whatIf, diff: batchDiff(s), mismatch: mismatchShown(s)?.result }) : null;
  return src && s.batch ? { label: HEATS[src.metric].label, rows: s.batch.completion_ids.map((ids, b) => ids.map((_, j) => src.get(b, j) ?? NaN)) } : null;
}

/** The ramp's colour at position t ∈ [0, 1]: dark → amber (sequential), or blue → grey → red (diverging). */
export function rampColor(t: number, diverging: boolean): string {
  if (!diverging) return mix(DARK, HOT, t);
  return t < 0.5 ? mix(BLUE, MID, t * 2) : mix(MID, RED, (t - 0.5) * 2);
}

/** The colour of value v. Non-finite values are magenta: they must never look like a normal number. */
export function heatColor(src: HeatSource, v: number): string {
  if (src.metric === 'mask_factor') return FACTOR_COLORS[v] ?? 'rgb(255,0,255)';
  if (src.metric === 'clip') return v & CLIP_LOW ? 'rgb(70,130,255)' : v & CLIP_HIGH ? 'rgb(255,140,40)' : v & DELTA_BINDS ? 'rgb(190,90,255)' : 'rgb(40,44,56)';
  if (!Number.isFinite(v)) return 'rgb(255,0,255)';
  return rampColor(scalePosition(src.scale, v), src.scale.center !== null);
}

/** Text colour readable on heatColor(src, v): dark on the bright end of the sequential scale. */
export function heatTextColor(src: HeatSource, v: number): string {
  if (src.scale.center !== null || CATEGORICAL.has(src.metric) || !Number.isFinite(v)) return '#e6edf3';
  return scalePosition(src.scale, v) > 0.55 ? '#0d1117' : '#e6edf3';
}
