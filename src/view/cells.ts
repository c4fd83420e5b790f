// The batch grid's model: every (sample, column) cell classified as the trainer sees it. Columns are the
// padded sequence prompt ⧺ completion: prompts right-aligned to the boundary column P (left padding),
// completions starting at P (right padding). The EOS that ends a row is its first, or in a multi-turn batch
// (every assistant turn ends with one) the first from the start of the last run of trained tokens. Unlike the
// trainer's padBatch, this view never refuses a batch: ids and each mask are aligned on their own, so a mask
// one token longer than its ids shows as an extra cell, and every cell where a mask disagrees with the region
// it covers is flagged.
// Pure (no React, no DOM) and in src/view/ so the page's canvas and the saved report classify every cell
// with the same code.
import { groupLabel, type GrpoBatch } from '../io/batch.ts';

/** What a cell holds. `absent`: no id here (the row is shorter than the grid). */
export const REGION = { absent: 0, pad: 1, prompt: 2, special: 3, completion: 4, eos: 5, after_eos: 6 } as const;
export type Region = (typeof REGION)[keyof typeof REGION];
export const REGION_NAMES = ['absent', 'pad', 'prompt', 'special', 'completion', 'eos', 'after EOS'] as const;

/** Disagreements between a mask and the ids / region it covers. */
export const FLAG = {
  mask_missing: 1, // an id with no mask entry (mask shorter than ids)
  mask_extra: 2, // a mask entry with no id (mask longer than ids)
  mask_on_pad: 4, // mask 1 on padding or after EOS: loss/attention on junk
  mask_off_token: 8, // mask 0 on a real prompt/completion token (before or at EOS)
  non_binary: 16, // a mask value other than 0/1
  tool_length: 32, // tool_mask length differs from completion_ids
} as const;

export const FLAG_TEXT: Record<keyof typeof FLAG, string> = {
  mask_missing: 'id has no mask entry (mask shorter than ids)',
  mask_extra: 'mask entry with no id (mask longer than ids)',
  mask_on_pad: 'mask is 1 on padding / after EOS',
  mask_off_token: 'mask is 0 on a real token',
  non_binary: 'mask value is not 0/1',
  tool_length: 'tool_mask length differs from completion_ids',
};

/** A mask bit as shown: 0, 1, a non-binary value, or null where the mask has no entry / does not exist. */
export type MaskBit = number | null;

export interface CellInfo {
  region: Region;
  side: 'prompt' | 'completion';
  /** Index into prompt_ids[b] / completion_ids[b]; negative or past the end when the cell holds no id. */
  index: number;
  id: number | null;
  /** prompt_mask (prompt side) or completion_mask (completion side): the attention_mask bit. */
  attention: MaskBit;
  /** completion_mask (completion side only). */
  completion: MaskBit;
  tool: MaskBit;
  flags: number;
}

/**
 * Per-batch facts the classification needs. The widths are computed once from the row lengths (O(B));
 * the per-row facts that scan a row's tokens are computed on first use, so a 200,000-row batch costs only
 * the rows that are drawn or inspected.
 */
export interface GridContext {
  batch: GrpoBatch;
  P: number; // boundary column
  C: number; // completion columns
  eos: Set<number>;
  special: Set<number>;
  /**
   * Index of the EOS that ends completion_ids[b] (−1: none, truncated): the first one, or in a multi-turn batch
   * (tool_mask, or conversations of several assistant turns in `messages`), where every assistant turn ends
   * with one, the first in or after the last trained run (completion_mask × tool_mask 1) — the earlier ones
   * end turns, not the sequence (a mask left on past that EOS is still flagged).
   */
  firstEos(b: number): number;
  /** Length of the leading run of pad_token_id in prompt_ids[b] (left padding kept in the data). */
  leadingPads(b: number): number;
}

/** A per-row integer computed on first use (−2 marks "not yet"). */
function lazyRows(B: number, compute: (b: number) => number): (b: number) => number {
  const memo = new Int32Array(B).fill(-2);
  return (b) => (memo[b] === -2 ? (memo[b] = compute(b)) : memo[b]);
}

export function gridContext(batch: GrpoBatch, specialIds: Iterable<number> = []): GridContext {
  const B = batch.completion_ids.length;
  const eos = new Set(batch.eos_token_ids);
  const lens = (rows: number[][] | undefined, b: number) => rows?.[b]?.length ?? 0;
  let P = 0;
  let C = 0;
  for (let b = 0; b < B; b++) {
    P = Math.max(P, lens(batch.prompt_ids, b), lens(batch.prompt_mask, b));
    C = Math.max(C, lens(batch.completion_ids, b), lens(batch.completion_mask, b), lens(batch.tool_mask, b));
  }
  const multiTurn = !!batch.tool_mask || !!batch.messages?.some((m) => Array.isArray(m) && m.filter((x) => x?.role === 'assistant').length > 1);
  const firstEos = lazyRows(B, (b) => {
    const ids = batch.completion_ids[b];
    let from = 0;
    if (multiTurn) {
      const [cm, tm] = [batch.completion_mask[b] ?? [], batch.tool_mask?.[b]];
      const trained = (t: number) => cm[t] === 1 && (tm?.[t] ?? 1) === 1;
      let t = cm.length - 1;
      while (t >= 0 && !trained(t)) t--;
      while (t > 0 && trained(t - 1)) t--;
      from = Math.max(0, t);
    }
    for (let t = from; t < ids.length; t++) if (eos.has(ids[t])) return t;
    return -1;
  });
  const leadingPads = lazyRows(B, (b) => {
    const p = batch.prompt_ids[b] ?? [];
    let n = 0;
    while (n < p.length && p[n] === batch.pad_token_id) n++;
    return n;
  });
  return { batch, P, C, eos, special: new Set([...specialIds, ...batch.eos_token_ids]), firstEos, leadingPads };
}

function maskBit(row: number[] | undefined, i: number): MaskBit {
  return row && i >= 0 && i < row.length ? row[i] : null;
}

/** Lengths of ids vs every mask / per-token field of one sample (the grid's per-row readout). */
export interface RowReadout {
  sample: number;
  group: number;
  prompt_ids: number;
  prompt_mask: number | null;
  completion_ids: number;
  completion_mask: number;
  tool_mask: number | null;
  old_per_token_logps: number | null;
  ref_per_token_logps: number | null;
  first_eos: number; // −1: no EOS (truncated)
  /** Real completion tokens the loss sees: Σ completion_mask. */
  masked_tokens: number;
  mismatch: boolean;
}

/** The lengths of one sample's per-token fields (null: the batch has no such field). O(1): no token is read. */
function rowLengths(bt: GrpoBatch, b: number) {
  const len = (rows: unknown[][] | undefined) => (rows ? (rows[b]?.length ?? 0) : null);
  return {
    prompt_ids: bt.prompt_ids[b]?.length ?? 0,
    prompt_mask: len(bt.prompt_mask),
    completion_ids: bt.completion_ids[b].length,
    completion_mask: bt.completion_mask[b]?.length ?? 0,
    tool_mask: len(bt.tool_mask),
    old_per_token_logps: len(bt.old_per_token_logps),
    ref_per_token_logps: len(bt.ref_per_token_logps),
  };
}

/** Whether any of sample b's fields is not as long as its ids (the grid marks the row). */
export function rowMismatch(ctx: GridContext, b: number): boolean {
  const r = rowLengths(ctx.batch, b);
  const c = r.completion_ids;
  return (
    (r.prompt_mask !== null && r.prompt_mask !== r.prompt_ids) ||
    [r.completion_mask, r.tool_mask, r.old_per_token_logps, r.ref_per_token_logps].some((n) => n !== null && n !== c)
  );
}

export function rowReadout(ctx: GridContext, b: number): RowReadout {
  const bt = ctx.batch;
  return {
    sample: b,
    group: groupLabel(bt, b),
    ...rowLengths(bt, b),
    first_eos: ctx.firstEos(b),
    masked_tokens: (bt.completion_mask[b] ?? []).reduce((s, m) => s + (m === 1 ? 1 : 0), 0),
    mismatch: rowMismatch(ctx, b),
  };
}

/** Cells of one sample as the canvas draws them: index k is column c0 + k of the columns classified. */
export interface RowCells {
  region: Uint8Array;
  ids: Int32Array; // −1 where absent
  attention: Int8Array; // −1 none, 2 non-binary
  completion: Int8Array;
  tool: Int8Array;
  flags: Uint8Array;
}

/** A whole row (W = P + C columns) and its position ids. */
export interface FullRow extends RowCells {
  position_ids: Int32Array; // from the attention bits (HF generate) or arange
}

/** Room for n cells (classifyColumns fills them). */
export function emptyCells(n: number): RowCells {
  return { region: new Uint8Array(n), ids: new Int32Array(n), attention: new Int8Array(n), completion: new Int8Array(n), tool: new Int8Array(n), flags: new Uint8Array(n) };
}

/** The whole grid as flat (B, W) arrays (the saved report; the page builds rows on demand with gridRow). */
export interface GridModel {
  B: number;
  P: number;
  C: number;
  W: number;
  region: Uint8Array; // (B, W)
  ids: Int32Array; // (B, W) −1 where absent
  attention: Int8Array; // (B, W) −1 none, 2 non-binary
  completion: Int8Array; // (B, W)
  tool: Int8Array; // (B, W)
  flags: Uint8Array; // (B, W)
  position_ids: Int32Array; // (B, W)
  rows: RowReadout[];
}

/** A mask value as the row arrays hold it: −1 no entry (or a null one), 0, 1, 2 any other value. */
const bit = (m: number | null | undefined) => (m === undefined || m === null ? -1 : m === 0 || m === 1 ? m : 2);

/**
 * Classifies columns [c0, c1) of sample b into `out` (out[k] is column c0 + k), one pass per side,
 * straight into typed arrays. Each cell needs only O(1) facts of its row (left padding, first EOS), so
 * the canvas classifies just the cells it draws: ~20 columns of a 2,560-column row, not the whole row.
 */
export function classifyColumns(ctx: GridContext, b: number, c0: number, c1: number, out: RowCells): void {
  const { batch, P, special } = ctx;
  const { region, ids, attention, completion, tool, flags } = out;
  const n = c1 - c0;
  region.fill(REGION.absent, 0, n);
  flags.fill(0, 0, n);
  for (const a of [ids, attention, completion, tool]) a.fill(-1, 0, n);

  // Prompt side: the ids and the prompt mask are each right-aligned to the boundary on their own.
  const pIds = batch.prompt_ids[b] ?? [];
  const pm = batch.prompt_mask?.[b];
  const pads = ctx.leadingPads(b);
  for (let c = Math.max(c0, P - pIds.length); c < Math.min(c1, P); c++) {
    const k = c - c0;
    const i = c - (P - pIds.length);
    ids[k] = pIds[i];
    region[k] = i < pads ? REGION.pad : special.has(pIds[i]) ? REGION.special : REGION.prompt;
    // Without a prompt mask, attention follows the left padding kept in the data.
    if (!pm) attention[k] = i < pads ? 0 : 1;
  }
  if (pm)
    for (let c = Math.max(c0, P - Math.max(pIds.length, pm.length)); c < Math.min(c1, P); c++) {
      const k = c - c0;
      const i = c - (P - pm.length);
      const a = (attention[k] = i >= 0 ? bit(pm[i]) : -1);
      const rg = region[k];
      let f = 0;
      if (rg !== REGION.absent && a === -1) f |= FLAG.mask_missing;
      if (rg === REGION.absent && a !== -1) f |= FLAG.mask_extra;
      if (a === 2) f |= FLAG.non_binary;
      if (a === 1 && rg === REGION.pad) f |= FLAG.mask_on_pad;
      if (a === 0 && (rg === REGION.prompt || rg === REGION.special)) f |= FLAG.mask_off_token;
      flags[k] = f;
    }

  // Completion side: ids, completion_mask and tool_mask from the boundary; the first EOS ends the sequence.
  const cIds = batch.completion_ids[b] ?? [];
  const cm = batch.completion_mask[b] ?? [];
  const tm = batch.tool_mask?.[b];
  const e = ctx.firstEos(b);
  const end = Math.min(c1, P + Math.max(cIds.length, cm.length, tm?.length ?? 0));
  for (let c = Math.max(c0, P); c < end; c++) {
    const k = c - c0;
    const j = c - P;
    let rg: Region = REGION.absent;
    if (j < cIds.length) {
      ids[k] = cIds[j];
      rg = e >= 0 && j > e ? REGION.after_eos : j === e ? REGION.eos : special.has(cIds[j]) ? REGION.special : REGION.completion;
    }
    region[k] = rg;
    const m = bit(cm[j]);
    completion[k] = attention[k] = m;
    if (tm) tool[k] = bit(tm[j]);
    let f = 0;
    if (rg !== REGION.absent && m === -1) f |= FLAG.mask_missing;
    if (rg === REGION.absent && m !== -1) f |= FLAG.mask_extra;
    if (m === 2) f |= FLAG.non_binary;
    if (m === 1 && (rg === REGION.after_eos || rg === REGION.absent)) f |= FLAG.mask_on_pad;
    if (m === 0 && rg !== REGION.after_eos && rg !== REGION.absent) f |= FLAG.mask_off_token;
    if (tm && (rg === REGION.absent) !== (tool[k] === -1)) f |= FLAG.tool_length;
    flags[k] = f;
  }
}

/** Every column of sample b and its position ids (the inspector's row, the saved report's grid). */
export function gridRow(ctx: GridContext, b: number): FullRow {
  const W = ctx.P + ctx.C;
  const r = { ...emptyCells(W), position_ids: new Int32Array(W) };
  classifyColumns(ctx, b, 0, W, r);
  // Position ids as HF generate derives them from the attention mask (or arange when the config says so).
  const arange = ctx.batch.config?.position_ids === 'arange';
  let seen = 0;
  for (let c = 0; c < W; c++) {
    const a = r.attention[c] === 1;
    if (a) seen++;
    r.position_ids[c] = arange ? c : a ? seen - 1 : 1;
  }
  return r;
}

/** Column `col` of sample `b` as the inspector shows it: the row's classification (`r`: gridRow's, kept by the caller) and the raw mask values. */
export function classifyCell(ctx: GridContext, b: number, col: number, r: RowCells = gridRow(ctx, b)): CellInfo {
  const { batch, P } = ctx;
  const id = r.region[col] === REGION.absent ? null : r.ids[col];
  const base = { region: r.region[col] as Region, id, flags: r.flags[col] };
  if (col < P) {
    const pm = batch.prompt_mask?.[b];
    const attention = pm ? maskBit(pm, col - (P - pm.length)) : r.attention[col] === -1 ? null : r.attention[col];
    return { ...base, side: 'prompt', index: col - (P - (batch.prompt_ids[b]?.length ?? 0)), attention, completion: null, tool: null };
  }
  const index = col - P;
  const completion = maskBit(batch.completion_mask[b], index);
  return { ...base, side: 'completion', index, attention: completion, completion, tool: maskBit(batch.tool_mask?.[b], index) };
}

export function buildGrid(ctx: GridContext): GridModel {
  const B = ctx.batch.completion_ids.length;
  const W = ctx.P + ctx.C;
  const g: GridModel = {
    B,
    P: ctx.P,
    C: ctx.C,
    W,
    region: new Uint8Array(B * W),
    ids: new Int32Array(B * W),
    attention: new Int8Array(B * W),
    completion: new Int8Array(B * W),
    tool: new Int8Array(B * W),
    flags: new Uint8Array(B * W),
    position_ids: new Int32Array(B * W),
    rows: [],
  };
  const fields = ['region', 'ids', 'attention', 'completion', 'tool', 'flags', 'position_ids'] as const;
  for (let b = 0; b < B; b++) {
    const r = gridRow(ctx, b);
    for (const f of fields) g[f].set(r[f], b * W);
    g.rows.push(rowReadout(ctx, b));
  }
  return g;
}

/** Makes special tokens and whitespace visible in a token's text. */
export function visibleText(text: string): string {
  return text.replace(/ /g, '·').replace(/\n/g, '↵').replace(/\t/g, '→').replace(/\r/g, '␍');
}

/** Grid columns [start, end) of a finding's span (its field's positions), or null if it has none. */
export function spanColumns(ctx: GridContext, f: { sample?: number; field?: string; span?: [number, number] }): [number, number] | null {
  if (f.sample === undefined || !f.span) return null;
  const field = f.field ?? 'completion_ids';
  if (field === 'prompt_ids' || field === 'prompt_mask') {
    const row = field === 'prompt_mask' ? ctx.batch.prompt_mask?.[f.sample] : ctx.batch.prompt_ids[f.sample];
    const off = ctx.P - (row?.length ?? 0);
    return [off + f.span[0], off + f.span[1]];
  }
  return [ctx.P + f.span[0], ctx.P + f.span[1]];
}
