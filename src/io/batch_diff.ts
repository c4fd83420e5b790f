// Two batches compared token by token (two imports, or an update's batch against the one it started
// from): rows aligned by index, prompts aligned at their right end (they are left-padded onto the
// boundary), completions at their start; every changed id and mask entry by position, changed rewards
// and advantages, config keys that differ, and a summary of what differs. Pure: the page and the tests
// share it.
import type { GrpoBatch } from './batch.ts';

export interface RowDiff {
  sample: number;
  /** Prompt positions counted back from the boundary (1 = the last prompt token) whose id differs or exists on one side only. */
  prompt_from_end: number[];
  /** Completion positions whose id differs or exists on one side only. */
  completion: number[];
  /** Completion positions whose completion_mask entry differs (or exists on one side only). */
  completion_mask: number[];
  reward: [number | null, number | null] | null;
  advantage: [number | null, number | null] | null;
}

export interface BatchDiff {
  rows: [number, number]; // B of each side
  /** Rows present on both sides with at least one difference. */
  changed: RowDiff[];
  summary: { rows_changed: number; prompt_tokens: number; completion_tokens: number; mask_entries: number; rewards: number; advantages: number; config: string[]; only_in_one: number };
}

const same = (x: number | undefined, y: number | undefined) => x === y || (Number.isNaN(x) && Number.isNaN(y));

/** Positions where two rows differ; `fromEnd` aligns them at their last element. */
function rowDiff(a: readonly number[] | undefined, b: readonly number[] | undefined, fromEnd = false): number[] {
  const [x, y] = [a ?? [], b ?? []];
  const out: number[] = [];
  for (let k = 0; k < Math.max(x.length, y.length); k++) {
    const [u, v] = fromEnd ? [x[x.length - 1 - k], y[y.length - 1 - k]] : [x[k], y[k]];
    if (!same(u, v)) out.push(fromEnd ? k + 1 : k);
  }
  return out;
}

const pair = (a: number[] | undefined, b: number[] | undefined, i: number): [number | null, number | null] | null => {
  const [u, v] = [a?.[i], b?.[i]];
  return same(u, v) ? null : [u ?? null, v ?? null];
};

export function diffBatches(a: GrpoBatch, b: GrpoBatch): BatchDiff {
  const n = Math.min(a.completion_ids.length, b.completion_ids.length);
  const changed: RowDiff[] = [];
  const s = { rows_changed: 0, prompt_tokens: 0, completion_tokens: 0, mask_entries: 0, rewards: 0, advantages: 0, config: [] as string[], only_in_one: Math.abs(a.completion_ids.length - b.completion_ids.length) };
  for (let i = 0; i < n; i++) {
    const r: RowDiff = {
      sample: i,
      prompt_from_end: rowDiff(a.prompt_ids[i], b.prompt_ids[i], true),
      completion: rowDiff(a.completion_ids[i], b.completion_ids[i]),
      completion_mask: rowDiff(a.completion_mask[i], b.completion_mask[i]),
      reward: pair(a.rewards, b.rewards, i),
      advantage: pair(a.advantages, b.advantages, i),
    };
    if (r.prompt_from_end.length + r.completion.length + r.completion_mask.length === 0 && !r.reward && !r.advantage) continue;
    changed.push(r);
    s.rows_changed++;
    s.prompt_tokens += r.prompt_from_end.length;
    s.completion_tokens += r.completion.length;
    s.mask_entries += r.completion_mask.length;
    s.rewards += r.reward ? 1 : 0;
    s.advantages += r.advantage ? 1 : 0;
  }
  const ca = (a.config ?? {}) as Record<string, unknown>;
  const cb = (b.config ?? {}) as Record<string, unknown>;
  s.config = [...new Set([...Object.keys(ca), ...Object.keys(cb)])].filter((k) => JSON.stringify(ca[k]) !== JSON.stringify(cb[k])).sort();
  return { rows: [a.completion_ids.length, b.completion_ids.length], changed, summary: s };
}
