// Per-token heat overlays: which per-token array a metric reads (the step's results, or the imported
// batch's own log-probs), its colour range, and the colour of a value. Pure, so the grid, the inspector
// and the tests agree on what a cell's number is.
import type { GrpoBatch } from '../../io/batch.ts';
import type { HeatMetric, RunResults } from '../../store/session.ts';
import { CLIP_DELTA, CLIP_HIGH, CLIP_LOW, type PerTokenArray } from '../../worker/protocol.ts';

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

const fromArray = (a: PerTokenArray | undefined) => (a ? (b: number, j: number) => (j < a.C && b < a.B ? a.data[b * a.C + j] : undefined) : undefined);
const fromRows = (rows: number[][] | undefined) => (rows ? (b: number, j: number) => rows[b]?.[j] : undefined);

/** The accessor for a metric, or undefined when neither the run nor the batch has it. */
export function heatAccessor(metric: HeatMetric, batch: GrpoBatch | null, run: RunResults): ((b: number, j: number) => number | undefined) | undefined {
  switch (metric) {
    case 'none':
      return undefined;
    case 'logp':
      return fromArray(run.per_token_logps);
    case 'old_logp':
      return fromArray(run.old_per_token_logps) ?? fromRows(batch?.old_per_token_logps);
    case 'ref_logp':
      return fromArray(run.ref_per_token_logps) ?? fromRows(batch?.ref_per_token_logps);
    case 'sampling_logp':
      return fromArray(run.sampling_per_token_logps) ?? fromRows(batch?.sampling_per_token_logps);
    case 'entropy':
      return fromArray(run.entropy);
    case 'kl':
      return fromArray(run.per_token_kl);
    case 'ratio':
      return fromArray(run.importance_ratio);
    case 'loss':
      return fromArray(run.per_token_loss);
    case 'weight':
      return fromArray(run.token_weight);
    case 'clip': {
      const f = run.clip_flags;
      const C = run.per_token_loss?.C;
      return f && C ? (b, j) => (j < C ? f[b * C + j] : undefined) : undefined;
    }
    case 'dlogp': {
      const post = fromArray(run.post_per_token_logps);
      const pre = fromArray(run.per_token_logps);
      return post && pre ? (b, j) => { const x = post(b, j); const y = pre(b, j); return x === undefined || y === undefined ? undefined : x - y; } : undefined;
    }
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
  if (src.metric === 'clip') return v & CLIP_LOW ? 'rgb(70,130,255)' : v & CLIP_HIGH ? 'rgb(255,140,40)' : v & CLIP_DELTA ? 'rgb(190,90,255)' : 'rgb(40,44,56)';
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
