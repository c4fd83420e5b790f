// Batch assembly, following TRL's GRPOTrainer: prompts left-padded with pad_token_id, completions
// right-padded, completion_mask 1 up to and including the first EOS, attention_mask = prompt_mask ⧺
// completion_mask, position_ids from the attention mask (what HF generate feeds) or plain arange (what a
// forward without position_ids gets). The padded view is what the model, loss and UI consume: flat,
// row-major typed arrays with their shapes in the comments.
import { BatchFormatError, PER_TOKEN_FIELDS, widestCompletion, type GrpoBatch, type PositionIdsMode } from '../io/batch.ts';
import { positionIds } from '../model/positions.ts';

/** A batch as the model sees it. B rows, P = prompt width, C = completion width, L = P + C. */
export interface PaddedBatch {
  B: number;
  G: number;
  P: number; // prompt_length: logits[:, P−1 : L−1] score input_ids[:, P:]
  C: number;
  L: number;
  pad_token_id: number;
  eos_token_ids: number[];
  position_ids_mode: PositionIdsMode;
  input_ids: Int32Array; // (B, L) prompt ⧺ completion
  attention_mask: Int32Array; // (B, L) prompt_mask ⧺ completion_mask
  position_ids: Int32Array; // (B, L)
  prompt_mask: Int32Array; // (B, P) 0 on left padding
  completion_ids: Int32Array; // (B, C) = input_ids[:, P:]
  completion_mask: Int32Array; // (B, C) 0 on right padding and after the first EOS
  tool_mask?: Int32Array; // (B, C)
  prompt_lengths: Int32Array; // (B) real prompt tokens (Σ prompt_mask)
  completion_lengths: Int32Array; // (B) tokens as given before right padding
  advantages?: Float32Array; // (B)
  old_per_token_logps?: Float32Array; // (B, C) 0 on padding
  ref_per_token_logps?: Float32Array; // (B, C)
  sampling_per_token_logps?: Float32Array; // (B, C)
  /** The loaded tokenizer's EOS where the studio sampled the batch (TRL's mask_truncated_completions counts only it). */
  tokenizer_eos_token_id?: number;
}

/** TRL's completion mask: 1 up to and including the first EOS (any of eosIds), 0 after; all 1 if none. */
export function completionMaskFromEos(ids: ArrayLike<number>, eosIds: readonly number[]): number[] {
  const mask = new Array<number>(ids.length).fill(1);
  const eos = firstEos(ids, eosIds);
  for (let t = eos + 1; t < ids.length && eos >= 0; t++) mask[t] = 0;
  return mask;
}

/** Index of the first EOS in a row, or −1. */
export function firstEos(ids: ArrayLike<number>, eosIds: readonly number[]): number {
  for (let t = 0; t < ids.length; t++) if (eosIds.includes(ids[t])) return t;
  return -1;
}

/** Sampler output → grpo-batch/v1: one prompt per group, G completions per prompt, masks from EOS. */
export interface AssembleInput {
  /** One prompt per group (length B / G) or one per sample (length B). */
  prompt_ids: number[][];
  completion_ids: number[][]; // (B, C_i)
  num_generations: number;
  pad_token_id: number;
  eos_token_ids: number[];
  rewards?: number[];
  rewards_per_func?: number[][];
  reward_weights?: number[];
  advantages?: number[];
  tool_mask?: number[][];
  /** Given: as is (a multi-turn completion holds several end-of-turn tokens, TRL masks none of it); else 1 through the first EOS. */
  completion_mask?: number[][];
  old_per_token_logps?: number[][];
  ref_per_token_logps?: number[][];
  sampling_per_token_logps?: number[][];
  messages?: GrpoBatch['messages'];
  tools?: GrpoBatch['tools'];
  prompt_texts?: string[];
  completion_texts?: string[];
  config?: GrpoBatch['config'];
}

export function assembleBatch(input: AssembleInput): GrpoBatch {
  const B = input.completion_ids.length;
  const G = input.num_generations;
  if (B % G !== 0) throw new BatchFormatError(`assembleBatch: ${B} completions is not a multiple of num_generations = ${G}`);
  const perGroup = input.prompt_ids.length === B / G && input.prompt_ids.length !== B;
  if (!perGroup && input.prompt_ids.length !== B) {
    throw new BatchFormatError(`assembleBatch: prompt_ids has ${input.prompt_ids.length} rows, expected ${B / G} (one per group) or ${B} (one per sample)`);
  }
  const prompt_ids = Array.from({ length: B }, (_, i) => [...input.prompt_ids[perGroup ? Math.floor(i / G) : i]]);
  const { prompt_ids: _p, completion_ids: _c, ...rest } = input;
  return {
    format: 'grpo-batch/v1',
    ...rest,
    prompt_ids,
    completion_ids: input.completion_ids.map((r) => [...r]),
    completion_mask: input.completion_mask?.map((r) => [...r]) ?? input.completion_ids.map((r) => completionMaskFromEos(r, input.eos_token_ids)),
  };
}

function checkRowLengths(field: string, rows: unknown[][] | undefined, ref: number[][]): void {
  if (!rows) return;
  if (rows.length !== ref.length) throw new BatchFormatError(`${field} has ${rows.length} rows, completion_ids has ${ref.length}`);
  rows.forEach((r, b) => {
    if (r.length !== ref[b].length) throw new BatchFormatError(`${field} sample ${b} has length ${r.length}, completion_ids has ${ref[b].length}`);
  });
}

/**
 * The padded (B, L) view of a batch (ragged or already padded). Rows keep what they hold: a prompt row
 * is left-padded to P, its prompt_mask (given, or all 1) left-padded with 0; a completion row is
 * right-padded to C with pad_token_id and mask 0. Per-token arrays whose length differs from their
 * completion row raise BatchFormatError naming field and sample — run the Doctor first for a full report.
 */
export function padBatch(batch: GrpoBatch, opts: { position_ids?: PositionIdsMode } = {}): PaddedBatch {
  const mode = opts.position_ids ?? batch.config?.position_ids ?? 'from_attention_mask';
  const B = batch.completion_ids.length;
  const G = batch.num_generations;
  if (batch.prompt_ids.length !== B) throw new BatchFormatError(`prompt_ids has ${batch.prompt_ids.length} rows, completion_ids has ${B}`);
  for (const f of PER_TOKEN_FIELDS) checkRowLengths(f, batch[f], batch.completion_ids);
  checkRowLengths('prompt_mask', batch.prompt_mask, batch.prompt_ids);
  // reduce, not Math.max(...rows): a spread of 200k rows overflows the stack.
  const P = batch.prompt_ids.reduce((m, r) => Math.max(m, r.length), 0);
  const C = widestCompletion(batch);
  const L = P + C;
  const pad = batch.pad_token_id;

  const input_ids = new Int32Array(B * L).fill(pad); // (B, L)
  const attention_mask = new Int32Array(B * L); // (B, L)
  const prompt_mask = new Int32Array(B * P); // (B, P)
  const completion_ids = new Int32Array(B * C).fill(pad); // (B, C)
  const completion_mask = new Int32Array(B * C); // (B, C)
  const tool_mask = batch.tool_mask ? new Int32Array(B * C) : undefined; // (B, C)
  const prompt_lengths = new Int32Array(B);
  const completion_lengths = new Int32Array(B);
  const perToken = (rows: number[][] | undefined) => {
    if (!rows) return undefined;
    const out = new Float32Array(B * C); // (B, C)
    rows.forEach((r, b) => out.set(r, b * C));
    return out;
  };

  for (let b = 0; b < B; b++) {
    const prow = batch.prompt_ids[b];
    const off = P - prow.length; // left padding
    for (let t = 0; t < prow.length; t++) {
      const m = batch.prompt_mask ? batch.prompt_mask[b][t] : 1;
      input_ids[b * L + off + t] = prow[t];
      prompt_mask[b * P + off + t] = m;
      attention_mask[b * L + off + t] = m;
      prompt_lengths[b] += m;
    }
    const crow = batch.completion_ids[b];
    completion_lengths[b] = crow.length;
    for (let t = 0; t < crow.length; t++) {
      const m = batch.completion_mask[b][t];
      input_ids[b * L + P + t] = crow[t];
      completion_ids[b * C + t] = crow[t];
      completion_mask[b * C + t] = m;
      attention_mask[b * L + P + t] = m;
      if (tool_mask) tool_mask[b * C + t] = batch.tool_mask![b][t];
    }
  }
  return {
    B, G, P, C, L,
    pad_token_id: pad,
    eos_token_ids: [...batch.eos_token_ids],
    position_ids_mode: mode,
    input_ids,
    attention_mask,
    position_ids: positionIds(attention_mask, B, L, mode),
    prompt_mask,
    completion_ids,
    completion_mask,
    tool_mask,
    prompt_lengths,
    completion_lengths,
    advantages: batch.advantages ? Float32Array.from(batch.advantages) : undefined,
    old_per_token_logps: perToken(batch.old_per_token_logps),
    ref_per_token_logps: perToken(batch.ref_per_token_logps),
    sampling_per_token_logps: perToken(batch.sampling_per_token_logps),
  };
}

/**
 * What scoring a padded batch with a model of V tokens needs: at least one prompt and one completion
 * position, an attended prompt token before every completion whose first token is trained (its log-prob is the
 * logits at the last prompt position, which attend nothing otherwise: no trainer computes a number there), and
 * every prompt / completion id inside the vocabulary (else BatchFormatError naming the field, sample and
 * position; `model` says whose vocabulary, e.g. "policy").
 */
export function checkScorable(batch: Pick<GrpoBatch, 'prompt_ids' | 'completion_ids'>, padded: Pick<PaddedBatch, 'B' | 'P' | 'C' | 'prompt_mask' | 'completion_mask'>, V: number, model: string): void {
  if (padded.P < 1 || padded.C < 1) throw new BatchFormatError(`the batch needs at least one prompt token and one completion token (P = ${padded.P}, C = ${padded.C})`);
  const { B, P, C } = padded;
  for (let b = 0; b < B; b++) {
    if (padded.completion_mask[b * C] !== 1 || padded.prompt_mask.subarray(b * P, (b + 1) * P).includes(1)) continue;
    throw new BatchFormatError(`prompt of sample ${b}: no attended token (${batch.prompt_ids[b].length === 0 ? 'prompt_ids is empty' : 'prompt_mask is 0 throughout'}), and its completion's first token is trained: nothing precedes it to predict it from`);
  }
  for (const f of ['prompt_ids', 'completion_ids'] as const) {
    batch[f].forEach((row, b) =>
      row.forEach((id, t) => {
        if (!Number.isInteger(id) || id < 0 || id >= V) throw new BatchFormatError(`${f} sample ${b}, position ${t}: token ${id} is outside the ${model} vocabulary [0, ${V})`);
      }),
    );
  }
}

/**
 * A (B, C) per-token tensor (log-probs, KL, loss) cut back to ragged rows of each sample's completion
 * length — the form grpo-batch/v1 stores, so the studio can export what it computed (serializeBatch).
 */
export function raggedFromPadded(values: ArrayLike<number>, padded: Pick<PaddedBatch, 'B' | 'C' | 'completion_lengths'>): number[][] {
  if (values.length !== padded.B * padded.C) throw new RangeError(`raggedFromPadded: ${values.length} values for a (${padded.B}, ${padded.C}) batch`);
  return Array.from({ length: padded.B }, (_, b) => Array.from({ length: padded.completion_lengths[b] }, (_, t) => values[b * padded.C + t]));
}
