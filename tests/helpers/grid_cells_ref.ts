// A plain twin of the grid's cell classification (src/view/cells.ts classifyColumns), cell by cell with
// nothing shared or cached, written from the rules in that file's header: the oracle of the grid's property
// test. Encoding as RowCells: ids −1 where absent; mask bits −1 (no entry, or null), 0, 1, 2 (another value).
import type { GrpoBatch } from '../../src/io/batch.ts';
import { FLAG, REGION } from '../../src/view/cells.ts';

export interface RefCell {
  region: number;
  id: number;
  attention: number;
  completion: number;
  tool: number;
  flags: number;
}

const bitOf = (row: (number | null)[] | undefined, i: number) => {
  const v = row && i >= 0 && i < row.length ? row[i] : null;
  return v === null || v === undefined ? -1 : v === 0 || v === 1 ? v : 2;
};

/** Column `col` of sample `b`; the boundary P is the widest prompt (ids or mask), `special` the special ids. */
export function refCell(batch: GrpoBatch, special: Set<number>, b: number, col: number): RefCell {
  const P = Math.max(0, ...batch.prompt_ids.map((r) => r.length), ...(batch.prompt_mask ?? []).map((r) => r.length));
  const eos = new Set(batch.eos_token_ids);
  const isSpecial = (id: number) => special.has(id) || eos.has(id);
  if (col < P) {
    const ids = batch.prompt_ids[b] ?? [];
    const i = col - (P - ids.length);
    let pads = 0;
    while (pads < ids.length && ids[pads] === batch.pad_token_id) pads++;
    const region = i < 0 ? REGION.absent : i < pads ? REGION.pad : isSpecial(ids[i]) ? REGION.special : REGION.prompt;
    const pm = batch.prompt_mask?.[b] as (number | null)[] | undefined;
    const attention = pm ? bitOf(pm, col - (P - pm.length)) : i < 0 ? -1 : i < pads ? 0 : 1;
    let flags = 0;
    if (pm) {
      if (region !== REGION.absent && attention === -1) flags |= FLAG.mask_missing;
      if (region === REGION.absent && attention !== -1) flags |= FLAG.mask_extra;
      if (attention === 2) flags |= FLAG.non_binary;
      if (attention === 1 && region === REGION.pad) flags |= FLAG.mask_on_pad;
      if (attention === 0 && (region === REGION.prompt || region === REGION.special)) flags |= FLAG.mask_off_token;
    }
    return { region, id: i < 0 ? -1 : ids[i], attention, completion: -1, tool: -1, flags };
  }
  const j = col - P;
  const ids = batch.completion_ids[b] ?? [];
  // The EOS that ends the row: the first; in a multi-turn batch (tool_mask, or a conversation of several
  // assistant turns) the first from the start of the last run of trained tokens (completion_mask 1, tool_mask 1 or none).
  const cmRow = (batch.completion_mask[b] ?? []) as (number | null)[];
  const tmRow = batch.tool_mask?.[b] as (number | null)[] | undefined;
  const multiTurn = !!batch.tool_mask || !!batch.messages?.some((m) => m.filter((x) => x.role === 'assistant').length > 1);
  const trained = cmRow.map((m, t) => m === 1 && (tmRow?.[t] ?? 1) === 1);
  const lastRun = trained.lastIndexOf(true) < 0 ? 0 : trained.lastIndexOf(false, trained.lastIndexOf(true)) + 1;
  const firstEos = ids.findIndex((t, k) => k >= (multiTurn ? lastRun : 0) && eos.has(t));
  const region = j >= ids.length ? REGION.absent : firstEos >= 0 && j > firstEos ? REGION.after_eos : j === firstEos ? REGION.eos : isSpecial(ids[j]) ? REGION.special : REGION.completion;
  const completion = bitOf(batch.completion_mask[b] as (number | null)[] | undefined, j);
  const tm = batch.tool_mask?.[b] as (number | null)[] | undefined;
  const tool = tm ? bitOf(tm, j) : -1;
  let flags = 0;
  if (region !== REGION.absent && completion === -1) flags |= FLAG.mask_missing;
  if (region === REGION.absent && completion !== -1) flags |= FLAG.mask_extra;
  if (completion === 2) flags |= FLAG.non_binary;
  if (completion === 1 && (region === REGION.after_eos || region === REGION.absent)) flags |= FLAG.mask_on_pad;
  if (completion === 0 && region !== REGION.after_eos && region !== REGION.absent) flags |= FLAG.mask_off_token;
  if (tm && (region === REGION.absent) !== (tool === -1)) flags |= FLAG.tool_length;
  return { region, id: j < ids.length ? ids[j] : -1, attention: completion, completion, tool, flags };
}
