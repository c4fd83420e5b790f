// The grid's row order, derived from the user's sort / filter (src/store/layout.ts) and the batch on screen:
// one value per sample for each sort key, read from what the page already holds (the batch's rewards and
// advantages, the Doctor's findings, the loss stage's per-token loss and weights, the mismatch explorer's
// per-row mean |d|), then ordered by src/view/row_order.ts. Memoised on its inputs, so a selector returns the
// same order until one of them changes (a sort of 200,000 rows runs once, not per render).
import type { StudioState } from './index.ts';
import { SORT_KEYS, type SortKey } from './layout.ts';
import { mismatchShown } from './derived.ts';
import { rowOrder, type RowOrder } from '../view/row_order.ts';

type RowsState = Pick<StudioState, 'batch' | 'batchOrigin' | 'imported' | 'run' | 'mismatch' | 'findings' | 'rowSort'>;

/** What each key sorts by: the menu's short name, and what it means (the option's tooltip). */
export const SORT_LABELS: Record<SortKey, { label: string; title: string }> = {
  reward: { label: 'reward', title: "the sample's reward (weighted sum over the reward functions)" },
  advantage: { label: 'advantage', title: "the sample's advantage" },
  length: { label: 'length', title: 'completion length (tokens in completion_ids)' },
  findings: { label: 'findings', title: 'how many Doctor findings name the row' },
  loss: { label: 'loss', title: "the row's share of the loss: Σ per-token loss × aggregation weight" },
  mismatch: { label: 'mismatch', title: 'mean |trainer − sampler log-prob| over the compared tokens (the mismatch explorer)' },
};

function perSample(B: number, f: (b: number) => number): Float64Array {
  const out = new Float64Array(B);
  for (let b = 0; b < B; b++) out[b] = f(b);
  return out;
}

/**
 * The values `key` sorts by, as a thunk (computed only when the sort runs), or null when the batch on screen
 * has none of them: the menu offers a key without paying for its values.
 */
export function sortValues(s: RowsState, key: SortKey): (() => Float64Array) | null {
  const batch = s.batch;
  if (!batch) return null;
  const B = batch.completion_ids.length;
  switch (key) {
    case 'reward': {
      const r = batch.rewards;
      return r ? () => perSample(B, (b) => r[b] ?? NaN) : null;
    }
    case 'advantage': {
      const adv = batch.advantages ?? s.run.advantages?.advantages;
      return adv ? () => perSample(B, (b) => adv[b] ?? NaN) : null;
    }
    case 'length':
      return () => perSample(B, (b) => batch.completion_ids[b].length);
    case 'findings':
      return () => {
        const n = new Float64Array(B);
        for (const f of s.findings) if (f.sample !== undefined && f.sample < B) n[f.sample]++;
        return n;
      };
    case 'loss': {
      // The row's share of the loss: Σ_j per_token_loss · token_weight over its (padded) completion columns.
      const [loss, weight, C] = [s.run.loss?.per_token_loss, s.run.loss?.token_weight, s.run.assemble?.padded.C];
      if (!loss || !weight || !C) return null;
      return () =>
        perSample(B, (b) => {
          let sum = 0;
          for (let j = 0; j < C; j++) sum += loss[b * C + j] * weight[b * C + j];
          return sum;
        });
    }
    case 'mismatch': {
      const rows = mismatchShown(s)?.result?.report?.per_row;
      if (!rows) return null;
      return () => {
        const out = new Float64Array(B).fill(NaN);
        for (const r of rows) if (r.sample < B) out[r.sample] = r.mean_abs;
        return out;
      };
    }
  }
}

/** The sort keys the batch on screen has values for, comma-joined (a string: a stable selector result). */
export const sortKeysOf = (s: RowsState): string => SORT_KEYS.filter((k) => sortValues(s, k) !== null).join(',');

let last: { inputs: unknown[]; order: RowOrder | null } | null = null;

/** The grid's display order (null: the batch's own, with its group layout). */
export function rowOrderOf(s: RowsState): RowOrder | null {
  const { key, descending, findingsOnly } = s.rowSort;
  const inputs = [s.batch, s.run, s.findings, s.mismatch, key, descending, findingsOnly];
  if (last && last.inputs.every((x, i) => x === inputs[i])) return last.order;
  const B = s.batch?.completion_ids.length ?? 0;
  let order: RowOrder | null = null;
  if (s.batch && (key || findingsOnly)) {
    const named = findingsOnly ? new Set(s.findings.map((f) => f.sample)) : null;
    order = rowOrder(B, key ? (sortValues(s, key)?.() ?? null) : null, descending, named ? (b) => named.has(b) : null);
  }
  last = { inputs, order };
  return order;
}
