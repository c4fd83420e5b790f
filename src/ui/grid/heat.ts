// Per-token heat overlays: which per-token array a metric reads (the step's results, or the imported
// batch's own log-probs), its colour range, and the colour of a value. Pure, so the grid, the inspector
// and the tests agree on what a cell's number is.
import type { GrpoBatch } from '../../io/batch.ts';
import type { HeatMetric, RunResults } from '../../store/session.ts';
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS } from '../../store/vocabulary.ts';

export interface HeatSource {
  metric: HeatMetric;
  /** Value at completion position j of sample b, or undefined where there is none. */
  get(b: number, j: number): number | undefined;
  lo: number;
  hi: number;
  /** Diverging around `center` (blue below, red above) or sequential (dark → bright). */
  center: number | null;
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
};

type Accessor = (b: number, j: number) => number | undefined;

/** A (B, C) per-token array of the step, C = the assembled batch's padded completion width. */
function fromGrid(run: RunResults, a: ArrayLike<number> | null | undefined): Accessor | undefined {
  const p = run.assemble?.padded;
  return a && p ? (b, j) => (j < p.C && b < p.B ? a[b * p.C + j] : undefined) : undefined;
}

const fromRows = (rows: number[][] | undefined): Accessor | undefined => (rows ? (b, j) => rows[b]?.[j] : undefined);

/** The accessor for a metric, or undefined when neither the run nor the batch has it. */
export function heatAccessor(metric: HeatMetric, batch: GrpoBatch | null, run: RunResults): Accessor | undefined {
  switch (metric) {
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
  }
}

/** Metrics with data for this batch / run. */
export function availableHeats(batch: GrpoBatch | null, run: RunResults): HeatMetric[] {
  return (Object.keys(HEAT_LABELS) as HeatMetric[]).filter((m) => m === 'none' || heatAccessor(m, batch, run) !== undefined);
}

const CENTERED: Partial<Record<HeatMetric, number>> = { ratio: 1, loss: 0, dlogp: 0 };

/**
 * The heat source over the cells that count (completion_mask = 1): range from those values only, so
 * padding with junk values does not wash out the scale.
 */
export function heatSource(metric: HeatMetric, batch: GrpoBatch | null, run: RunResults): HeatSource | null {
  const get = heatAccessor(metric, batch, run);
  if (!get || !batch) return null;
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

/** The colour of value v. Non-finite values are magenta: they must never look like a normal number. */
export function heatColor(src: HeatSource, v: number): string {
  if (src.metric === 'clip') return v & CLIP_LOW ? 'rgb(70,130,255)' : v & CLIP_HIGH ? 'rgb(255,140,40)' : v & DELTA_BINDS ? 'rgb(190,90,255)' : 'rgb(40,44,56)';
  if (!Number.isFinite(v)) return 'rgb(255,0,255)';
  const t = Math.min(1, Math.max(0, (v - src.lo) / (src.hi - src.lo || 1)));
  if (src.center === null) return mix(DARK, HOT, t);
  return t < 0.5 ? mix(BLUE, MID, t * 2) : mix(MID, RED, (t - 0.5) * 2);
}

/** Text colour readable on heatColor(src, v): dark on the bright end of the sequential scale. */
export function heatTextColor(src: HeatSource, v: number): string {
  if (src.center !== null || src.metric === 'clip' || !Number.isFinite(v)) return '#e6edf3';
  return (v - src.lo) / (src.hi - src.lo || 1) > 0.55 ? '#0d1117' : '#e6edf3';
}
